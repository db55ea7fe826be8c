"""Ready sessions kept per key, so that opening one is a hand-over, not a start.

A backend's session host keeps up to ``spares`` sessions of each key it was asked for (bwrap:
the limits; docker: the image and the limits), started in the background once a key's first
session was opened. A spare is an empty session whose clocks start when it is handed out
(:meth:`ServerSession.begin`); one that died or was reclaimed while it waited is dropped. It
costs what an idle session costs (see ``scripts/bench_sessions.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

from verify_cli.sandbox.sessions.client import ServerSession


class SparePool:
    """Spares by key; ``start(key)`` makes one (any exception: none is made)."""

    def __init__(self, start: Callable[[Hashable], ServerSession], *, spares: int = 2,
                 workers: int = 1, name: str = "session-spare", max_keys: int = 8) -> None:
        self.spares = spares
        #: Keys kept at once; the least recently asked for loses its spares past that.
        self.max_keys = max_keys
        self._start = start
        self._lock = threading.Lock()
        self._ready: dict[Hashable, list[ServerSession]] = {}
        self._starting: dict[Hashable, int] = {}
        self._filler = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._closed = False
        #: Sessions handed out from the pool, and opens that found none ready.
        self.hits = 0
        self.misses = 0

    def take(self, key: Hashable) -> ServerSession | None:
        """A ready spare of ``key`` (then one more is started), or None."""
        found: ServerSession | None = None
        while True:
            with self._lock:
                pool = self._ready.get(key) or []
                if not pool:
                    break
                spare = pool.pop()
            if spare.ping():  # its server may have died while it waited
                found = spare
                break
            spare.close()
        with self._lock:
            if found is None:
                self.misses += 1
            else:
                self.hits += 1
        self.refill(key)
        return found

    def refill(self, key: Hashable) -> None:
        """Start spares of ``key`` in the background, up to :attr:`spares` of them."""
        dropped: list[ServerSession] = []
        with self._lock:
            # dicts keep insertion order: re-inserting marks the key most recently asked for
            self._ready[key] = self._ready.pop(key, [])
            while len(self._ready) > self.max_keys:
                oldest = next(iter(self._ready))
                dropped += self._ready.pop(oldest)
        for s in dropped:
            s.close()
        with self._lock:
            wanted = self.spares - len(self._ready.get(key, [])) - self._starting.get(key, 0)
            if wanted <= 0 or self._closed:
                return
            self._starting[key] = self._starting.get(key, 0) + wanted
        for _ in range(wanted):
            self._filler.submit(self._start_one, key)

    def _start_one(self, key: Hashable) -> None:
        spare: ServerSession | None
        try:
            spare = self._start(key)
        except Exception:  # a spare that fails is not made: the next open starts its own
            spare = None
        with self._lock:
            self._starting[key] -= 1
            pool = self._ready.get(key)
            if spare is not None and not self._closed and pool is not None and len(pool) < self.spares:
                pool.append(spare)
                spare = None
        if spare is not None:
            spare.close()

    def set_spares(self, spares: int) -> None:
        """Keep up to ``spares`` per key from now on (those over it are closed)."""
        extra: list[ServerSession] = []
        with self._lock:
            self.spares = spares
            for pool in self._ready.values():
                while len(pool) > spares:
                    extra.append(pool.pop())
        for s in extra:
            s.close()

    def ready(self) -> int:
        with self._lock:
            return sum(len(p) for p in self._ready.values())

    def close(self) -> None:
        """Close every spare; no more are started."""
        with self._lock:
            self._closed = True
        self._filler.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            spares = [s for pool in self._ready.values() for s in pool]
            self._ready = {}
        for s in spares:
            s.close()


__all__ = ["SparePool"]
