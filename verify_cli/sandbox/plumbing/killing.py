"""Killing a warm sandbox's processes and waiting for them to end, without polling sleeps."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import time
from collections.abc import Callable


def stop_sandbox(ctl: socket.socket | None, proc: subprocess.Popen[bytes] | None) -> None:
    """Close a warm sandbox's control socket, then kill its process group and wait for it."""
    if ctl is not None:
        with contextlib.suppress(OSError):
            ctl.close()
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def _kill_by_pidfd(pids: set[int]) -> list[int] | None:
    """SIGKILL each of ``pids`` through a pidfd (no pid-reuse race); the pidfds, which become
    readable when their process ends, or None where the kernel has no pidfds."""
    fds: list[int] = []
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # already gone
        except (OSError, AttributeError):
            for opened in fds:
                os.close(opened)
            return None
        fds.append(fd)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    return fds


def kill_all_but(listed: Callable[[], set[int]], keep: set[int], timeout: float = 5.0) -> set[int]:
    """SIGKILL every process ``listed()`` names but those in ``keep`` (a cgroup's processes but
    its warm server's), until none is left; waits on the processes' pidfds rather than sleeping
    between looks. Returns those still alive after ``timeout`` (empty when all ended)."""
    deadline = time.monotonic() + timeout
    last: set[int] = set()
    while True:
        strays = listed() - keep
        if not strays or time.monotonic() > deadline:
            return strays
        fds = _kill_by_pidfd(strays)
        if fds is None:  # no pidfds: kill by pid and look again shortly
            for pid in strays:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)
            continue
        try:
            poller = select.poll()
            for fd in fds:
                poller.register(fd, select.POLLIN)
            pending = len(fds)
            while pending and time.monotonic() < deadline:
                ready = poller.poll(max(1, int(min(0.05, deadline - time.monotonic()) * 1000)))
                for fd, _ in ready:
                    poller.unregister(fd)
                    pending -= 1
        finally:
            for fd in fds:
                os.close(fd)
        if strays == last:  # ended but still listed (not yet reaped by their parent): yield
            time.sleep(0.0005)
        last = strays


__all__ = ["kill_all_but", "stop_sandbox"]
