"""The pool of single-use containers: per-shape queues of prepared ones, refilled in the background."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from verify_cli.sandbox.docker.containers import MAX_POOLS, POOL_FILLERS, WARM_POOL_SIZE, Shape
from verify_cli.sandbox.docker.errors import short
from verify_cli.sandbox.docker.streams import Conn


@dataclass
class Prepared:
    """A started container, harness in place, its runner waiting for orders; used once."""

    container_id: str
    runner_id: str
    runner: Conn
    nonce: str  # the line that ends the runner's script
    pooled: bool  # made ahead of time: carries no run's labels, so it may be removed later
    warm: bool = False  # its waiting process is docker_warm.py (pytest imported), not the runner
    cpu_offset: float = 0.0  # the cgroup's CPU seconds spent before the run (the warm-up)
    #: Nothing of a run can be alive in it any more: the collector killed it all, or the daemon
    #: confirmed a kill. Only such a container is left to the background reaper.
    settled: bool = True


class WarmPool:
    """Per-shape queues of prepared containers, refilled in the background; thread-safe.

    A container taken from the pool is never returned to it: runs dispose of it, and the pool
    makes a replacement.
    """

    def __init__(self, make: Callable[[Shape], Prepared], discard: Callable[[Prepared], None],
                 size: int) -> None:
        self._make = make
        self._discard = discard
        self._size = size
        self._cond = threading.Condition()
        self._ready: OrderedDict[Shape, deque[Prepared]] = OrderedDict()
        self._pending: dict[Shape, int] = {}
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._jobs: deque[Shape] = deque()
        self.last_error = ""

    def take(self, shape: Shape) -> Prepared | None:
        with self._cond:
            queue = self._ready.get(shape)
            if queue:
                self._ready.move_to_end(shape)
                return queue.popleft()
            return None

    def ready_count(self, shape: Shape) -> int:
        with self._cond:
            return len(self._ready.get(shape, ()))

    def replenish(self, shape: Shape) -> None:
        evicted: list[Prepared] = []
        with self._cond:
            if self._closed:
                return
            queue = self._ready.setdefault(shape, deque())
            self._ready.move_to_end(shape)
            while len(self._ready) > MAX_POOLS:
                _old, old_queue = self._ready.popitem(last=False)
                evicted.extend(old_queue)
            missing = self._target(shape) - len(queue) - self._pending.get(shape, 0)
            if missing > 0:
                self._pending[shape] = self._pending.get(shape, 0) + missing
                self._jobs.extend([shape] * missing)
                self._threads = [t for t in self._threads if t.is_alive()]
                # Few fillers at a time: the daemon serialises much of the work, but a warm
                # container's warm-up (an interpreter importing pytest) overlaps another's start.
                while len(self._threads) < min(POOL_FILLERS, len(self._jobs)):
                    t = threading.Thread(target=self._fill_loop, daemon=True,
                                         name="verify-docker-pool")
                    self._threads.append(t)
                    t.start()
        for prepared in evicted:
            self._discard(prepared)

    def _fill_loop(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    me = threading.current_thread()
                    self._threads = [t for t in self._threads if t is not me]
                    return
                shape = self._jobs.popleft()
                closed = self._closed
            prepared: Prepared | None = None
            if not closed:
                try:
                    prepared = self._make(shape)
                except Exception as e:  # e.g. the image is missing: runs report it themselves
                    self.last_error = short(e)
            with self._cond:
                self._pending[shape] = max(0, self._pending.get(shape, 0) - 1)
                if prepared is not None and not self._closed and shape in self._ready:
                    self._ready[shape].append(prepared)
                    prepared = None
                self._cond.notify_all()
            if prepared is not None:
                self._discard(prepared)

    def wait_full(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while any(self._pending.get(s, 0) for s in self._ready):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return all(len(q) >= self._target(s) for s, q in self._ready.items())

    def _target(self, shape: Shape) -> int:
        return self._size if shape.warm is None else min(self._size, WARM_POOL_SIZE)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._jobs.clear()
            ready = [p for queue in self._ready.values() for p in queue]
            self._ready.clear()
            threads = list(self._threads)
        for t in threads:
            t.join(timeout=60)
        for prepared in ready:
            self._discard(prepared)
