"""One thread that drains every run's output pipes, instead of a thread per pipe.

A run's stdout and stderr are pipes the host must read to their end, or a chatty run blocks on a
full pipe. A thread per pipe costs the host about 0.7 ms of CPU a pipe on a busy machine
(most of it ``Thread.start`` waiting for the new thread to be scheduled): two pipes a run were
about a third of a warm bwrap run's host CPU. :func:`drain` registers the pipe with one
``epoll`` loop (started the first time it is needed, and again in a forked child), which reads
whatever is ready into the pipe's capture and closes the pipe at its end. The captures'
``on_exceed`` callbacks (a flood's kill) run on that thread: they must not block.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading

from verify_cli.sandbox.plumbing.output import CHUNK, BoundedCapture


class Drain:
    """One pipe being drained; :meth:`join` waits for its end, as ``Thread.join`` would."""

    def __init__(self, fd: int, capture: BoundedCapture) -> None:
        self.fd = fd
        self.capture = capture
        self._done = threading.Event()

    def join(self, timeout: float | None = None) -> None:
        self._done.wait(timeout)

    def is_alive(self) -> bool:
        return not self._done.is_set()

    def _finish(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self._done.set()


class _Drainer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[Drain] = []
        self._pid = 0
        self._wake_w = -1

    def add(self, fd: int, capture: BoundedCapture) -> Drain:
        drain = Drain(fd, capture)
        with self._lock:
            if self._pid != os.getpid():  # first use, or a forked child: no loop runs here yet
                self._start()
            self._pending.append(drain)
            wake = self._wake_w
        with contextlib.suppress(BlockingIOError):
            os.write(wake, b"+")
        return drain

    def _start(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._pid, self._wake_w, self._pending = os.getpid(), wake_w, []
        threading.Thread(target=self._serve, args=(wake_r,), daemon=True, name="sandbox-drainer").start()

    def _serve(self, wake_r: int) -> None:
        selector = selectors.DefaultSelector()
        selector.register(wake_r, selectors.EVENT_READ, None)
        while True:
            for key, _ in selector.select():
                drain: Drain | None = key.data
                if drain is None:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    with self._lock:
                        new, self._pending = self._pending, []
                    for one in new:
                        try:
                            selector.register(one.fd, selectors.EVENT_READ, one)
                        except (OSError, ValueError):
                            one._finish()  # closed or bad: nothing to read
                    continue
                try:
                    data = os.read(drain.fd, CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    with contextlib.suppress(Exception):
                        drain.capture.feed(data)
                    continue
                selector.unregister(drain.fd)
                drain._finish()


_DRAINER = _Drainer()


def drain(fd: int, capture: BoundedCapture) -> Drain:
    """Read ``fd`` to its end into ``capture`` on the shared drain thread; closes ``fd``."""
    return _DRAINER.add(fd, capture)


__all__ = ["Drain", "drain"]
