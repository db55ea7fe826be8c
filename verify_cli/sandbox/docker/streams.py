"""Socket and frame handling: hijacked exec/attach connections, Docker's multiplexed frames,
the kill timer of an exec and the gate that starts a run's clock."""

from __future__ import annotations

import contextlib
import io
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from docker.errors import APIError
from requests.exceptions import RequestException

from verify_cli.sandbox.docker.containers import COPY_TIMEOUT_S
from verify_cli.sandbox.docker.scripts import COUNTERS_MARK, READY, RESULTS_MARK
from verify_cli.sandbox.plumbing.deadlines import Deadline, arm
from verify_cli.sandbox.plumbing.judging import read_results_tar
from verify_cli.sandbox.plumbing.output import BoundedCapture


@dataclass
class ExecOutcome:
    exit_code: int | None
    killed: str | None  # "timeout" | "output" | "copy" when we killed the container
    seconds: float


class Killer:
    """Kills a container once, from whichever thread notices first, and remembers why."""

    def __init__(self, api: Any, container_id: str) -> None:
        self._api = api
        self._id = container_id
        self._lock = threading.Lock()
        self.reason: str | None = None
        self.confirmed = False  # the daemon acknowledged the kill (it waits for the stop)
        self._sockets: list[Any] = []

    def watch(self, sock: Any) -> None:
        with self._lock:
            self._sockets.append(sock)

    def kill(self, reason: str) -> None:
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            socks = list(self._sockets)
        # Close the streams first: the daemon does not finish a kill while it is blocked
        # writing output nobody reads, and readers must not wait for a stream that stays open.
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(APIError, RequestException, OSError):
            self._api.kill(self._id)
            self.confirmed = True


class Clock:
    """The kill timer of one exec. Gated (the runner), it allows ``COPY_TIMEOUT_S`` for the work
    folder to land, then, from the ready byte on, the wall-clock limit: the run's time starts
    there."""

    def __init__(self, killer: Killer, wall_s: float, gated: bool) -> None:
        self._killer = killer
        self._wall_s = wall_s
        self._lock = threading.Lock()
        self._stopped = False
        self.started = time.monotonic()
        self._timer = self._arm(COPY_TIMEOUT_S, "copy") if gated else self._arm(wall_s, "timeout")

    def _arm(self, seconds: float, reason: str) -> threading.Timer | Deadline:
        return arm(seconds, self._killer.kill, reason)

    def ready(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._timer.cancel()
            self.started = time.monotonic()
            self._timer = self._arm(self._wall_s, "timeout")

    def stop(self) -> float:
        with self._lock:
            self._stopped = True
            self._timer.cancel()
            return time.monotonic() - self.started


class Conn:
    """A hijacked connection to an exec or an attach: its socket and a reader over it."""

    def __init__(self, sock: Any, reader: IO[bytes]) -> None:
        self.sock = sock
        self.reader = reader

    def close(self) -> None:
        # As docker-py's CancellableStream: end the hijacked connection at the socket and
        # never hand it back to the HTTP connection pool (response.close() would).
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()


class ReadyGate:
    """The runner's stderr: its first byte says whether the command starts (``READY``, then the
    command's stderr follows, forwarded to ``sink``) or the unpacking failed (tar's complaint)."""

    def __init__(self, sink: BoundedCapture) -> None:
        self._sink = sink
        self._first = True
        self.ready = False
        self.on_ready: Callable[[], None] | None = None
        self._setup = BoundedCapture(4096)

    def feed(self, data: bytes) -> None:
        if self.ready:
            self._sink.feed(data)
            return
        if self._first and data:
            self._first = False
            if data[:1] == READY:
                self.ready = True
                if self.on_ready is not None:
                    self.on_ready()
                if len(data) > 1:
                    self._sink.feed(data[1:])
                return
        self._setup.feed(data)

    def setup_text(self) -> str:
        return self._setup.result().text.lstrip("\x02").strip()


class FrameReader(io.RawIOBase):
    """The stdout of a multiplexed Docker stream as a file; stderr goes to ``errors``. Reads
    block only for bytes a frame header announced, and end (after ``on_exceed``) past ``limit``."""

    def __init__(self, reader: IO[bytes], errors: BoundedCapture, limit: int,
                 on_exceed: Callable[[], None], on_data: Callable[[], None]) -> None:
        super().__init__()
        self._reader = reader
        self._errors = errors
        self._left = 0  # bytes of the current stdout frame still unread
        self._limit = limit
        self._total = 0
        self._on_exceed = on_exceed
        self._on_data = on_data

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            while self._left == 0:
                header = self._reader.read(8)
                if len(header) < 8:
                    return 0
                self._on_data()
                kind, size = struct.unpack(">BxxxL", header)
                if kind == 1:
                    self._left = size
                    continue
                while size:
                    data = self._reader.read(min(size, 65536))
                    if not data:
                        return 0
                    size -= len(data)
                    self._errors.feed(data)
            data = self._reader.read(min(len(buffer), self._left))
        except (OSError, ValueError):
            return 0  # the connection was shut down by a kill
        if not data:
            return 0
        self._left -= len(data)
        self._total += len(data)
        if self._total > self._limit:
            self._on_exceed()
            return 0
        buffer[:len(data)] = data
        return len(data)


class Prefixed(io.RawIOBase):
    """``head`` then the rest of ``stream``."""

    def __init__(self, head: bytes, stream: io.RawIOBase) -> None:
        super().__init__()
        self._head = head
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._stream.readinto(buffer) or 0


def read_collector(stream: FrameReader) -> tuple[dict[str, bytes], str, bool]:
    """The collector's output: counters text, then the results as tar. Reading stops at the
    archive's end (the container's own end comes later). Also: whether the collector spoke
    (it had killed everything else first)."""
    head = b""
    while RESULTS_MARK not in head:
        chunk = stream.read(65536)
        if not chunk or len(head) > 1024 * 1024:
            return {}, "", False
        head += chunk
    before, _, rest = head.partition(RESULTS_MARK)
    counters = before.rpartition(COUNTERS_MARK)[2].decode("utf-8", "replace")
    return read_results_tar(Prefixed(rest, stream), stream=True), counters, True


class SocketWriter(io.RawIOBase):
    """A write-only file over a socket, for ``tarfile`` in stream mode."""

    def __init__(self, sock: Any) -> None:
        super().__init__()
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


def feed_stdin(sock: Any, feed: Callable[[SocketWriter], object] | None) -> None:
    try:
        if feed is not None:
            feed(SocketWriter(sock))
        sock.shutdown(socket.SHUT_WR)  # EOF on the process's stdin
    except OSError:
        pass  # the process exited or was killed without reading everything


def pump_frames(reader: IO[bytes], stdout: Any, stderr: Any, stop: Callable[[], bool]) -> None:
    """Demultiplex Docker's stream (8-byte header: stream id, size) until EOF or ``stop()``."""
    sinks = {1: stdout, 2: stderr}
    try:
        while not stop():
            header = reader.read(8)
            if len(header) < 8:
                return
            kind, size = struct.unpack(">BxxxL", header)
            while size and not stop():
                data = reader.read(min(size, 65536))
                if not data:
                    return
                size -= len(data)
                sink = sinks.get(kind)
                if sink is not None:
                    sink.feed(data)
    except (OSError, ValueError):
        return  # the socket was shut down by a kill
