"""Bounded capture of a stream: keep a head and a tail, count the rest, never block the writer."""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque

from verify_cli.sandbox.plumbing.captured import CapturedOutput

CHUNK = 65536


class BoundedCapture:
    """Accumulates bytes keeping the first ``limit // 2`` and last ``limit // 2`` bytes.

    ``exceeded`` turns true once more than ``limit`` bytes were written; ``on_exceed`` (if given)
    is called once at that moment, so a runner can stop a flood at once.
    """

    def __init__(self, limit: int, on_exceed: object = None) -> None:
        self.limit = max(limit, 2)
        self.head_limit = self.limit // 2
        self.tail_limit = self.limit - self.head_limit
        self._head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_len = 0
        self.total = 0
        self.exceeded = False
        self._on_exceed = on_exceed
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        fire = False
        with self._lock:
            self.total += len(data)
            room = self.head_limit - len(self._head)
            if room > 0:
                self._head += data[:room]
                data = data[room:]
            if data:
                self._tail.append(bytes(data))
                self._tail_len += len(data)
                while self._tail and self._tail_len - len(self._tail[0]) >= self.tail_limit:
                    self._tail_len -= len(self._tail.popleft())
            if self.total > self.limit and not self.exceeded:
                self.exceeded = True
                fire = True
        if fire and callable(self._on_exceed):
            self._on_exceed()

    def result(self) -> CapturedOutput:
        with self._lock:
            tail = b"".join(self._tail)
            if len(tail) > self.tail_limit:
                tail = tail[-self.tail_limit:]
            truncated = self.total > len(self._head) + len(tail)
            return CapturedOutput(bytes(self._head), tail, self.total, truncated)


def drain_fd(fd: int, capture: BoundedCapture) -> None:
    """Read ``fd`` to EOF into ``capture`` (run it in a thread); closes ``fd``."""
    try:
        while True:
            try:
                data = os.read(fd, CHUNK)
            except OSError:
                break
            if not data:
                break
            capture.feed(data)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


def start_drain(fd: int, capture: BoundedCapture) -> threading.Thread:
    t = threading.Thread(target=drain_fd, args=(fd, capture), daemon=True, name="sandbox-drain")
    t.start()
    return t
