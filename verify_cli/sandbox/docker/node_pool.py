"""Elastic pools of long-lived containers (nodes), one pool per shape (image and limits).

A pool grows while work waits: a run that finds no idle node of its shape starts one, up to a
limit (``max_nodes`` of a shape, and no more than the machine's memory holds for that shape);
past it, the run waits for a node to come free. All shapes together keep at most
``SHAPES_KEPT`` times ``max_nodes`` plus ``WARM_KEYS_KEPT`` nodes (:attr:`NodePool.kept`): beyond
that, the longest-idle node of another shape is removed to make room. Where the pool is given a
``rearm`` and that node's container serves the run's shape too (the same image and limits,
another supervisor: a warm node's interpreter is keyed by its start-time variables,
``PYTHONHASHSEED`` one per check-tasks repeat), it is re-armed (its supervisor replaced in the
same container) rather than removed for a new container. A node goes back idle after a run
unless it is damaged or has served ``max_runs`` runs (then it is recycled: removed, and the next
run starts a new one). Nodes idle for ``idle_s`` are removed by a background thread that exits
once nothing is left, so an idle process holds no container and no thread.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from verify_cli.sandbox.docker.containers import Shape

#: Fraction of the machine's memory that the nodes' memory limits may add up to.
MEMORY_SHARE = 0.5
#: Shapes' worth of nodes kept alive at once (a task set mixing images keeps each one's warm).
SHAPES_KEPT = 4
#: Nodes kept beyond those, for warm nodes that differ only in their start-time key: check-tasks
#: runs a task's repeats under their own ``PYTHONHASHSEED`` each (12 seeds by default), one run
#: of each at a time, and a pool holding fewer keys than that lost every node task after task
#: (34 containers started for the sample tasks at 8 kept, 14 at 16: one per seed and image).
WARM_KEYS_KEPT = 8


class _NodeLike(Protocol):
    shape: Shape
    runs: int


N = TypeVar("N", bound=_NodeLike)


@dataclass
class PoolStats:
    """What a pool did: containers started, runs on a node that had run before, nodes recycled
    (damaged or worn out) and nodes removed for idling; ``peak``: most nodes alive at once."""

    started: int = 0
    reused: int = 0
    recycled: int = 0
    idle_removed: int = 0
    peak: int = 0
    waits: int = 0
    #: Idle nodes given another shape's supervisor in the same container (no container started).
    rearmed: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"started": self.started, "reused": self.reused, "recycled": self.recycled,
                "idle_removed": self.idle_removed, "peak": self.peak, "waits": self.waits,
                "rearmed": self.rearmed}


def default_max_nodes() -> int:
    """Nodes of one shape at most: ``VERIFY_DOCKER_MAX_CONTAINERS``, else one per core (at least
    2)."""
    env = os.environ.get("VERIFY_DOCKER_MAX_CONTAINERS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(2, os.cpu_count() or 1)


def machine_memory_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError):
        return 4096


@dataclass
class _Idle(Generic[N]):
    node: N
    since: float = field(default_factory=time.monotonic)


class NodePool(Generic[N]):
    """Nodes by shape; ``make`` starts one (may raise), ``destroy`` removes one. Thread-safe.

    ``rearm(node, shape)`` (optional) turns an idle node whose container suits ``shape``
    (:meth:`Shape.container`: the same image and limits) into a node of ``shape`` (may raise: the
    node is then destroyed and a new one made)."""

    def __init__(self, make: Callable[[Shape], N], destroy: Callable[[N], None], *,
                 max_nodes: int, idle_s: float, max_runs: int,
                 rearm: Callable[[N, Shape], N] | None = None) -> None:
        self._make = make
        self._destroy = destroy
        self._rearm = rearm
        self.max_nodes = max(1, max_nodes)
        self.idle_s = idle_s
        self.max_runs = max(1, max_runs)
        #: Most nodes alive at once, all shapes together.
        self.kept = self.max_nodes * SHAPES_KEPT + WARM_KEYS_KEPT
        self.stats = PoolStats()
        self._cond = threading.Condition()
        self._idle: dict[Shape, list[_Idle[N]]] = {}
        self._alive: dict[Shape, int] = {}
        self._total = 0
        self._closed = False
        self._reaper: threading.Thread | None = None

    def _cap(self, shape: Shape) -> int:
        """Most nodes of ``shape``: ``max_nodes``, and what the machine's memory holds beside the
        nodes of other shapes."""
        others = sum(s.memory_mb * n for s, n in self._alive.items() if s != shape)
        by_memory = (int(machine_memory_mb() * MEMORY_SHARE) - others) // max(1, shape.memory_mb)
        return max(1, min(self.max_nodes, by_memory))

    def acquire(self, shape: Shape) -> N:
        """An idle node of ``shape``, else a new one (when the limits allow), else waits."""
        evict: list[N] = []
        node: N | None = None
        rearm: N | None = None
        with self._cond:
            self._closed = False  # a closed pool grows again on demand
            while True:
                idle = self._idle.get(shape)
                if idle:
                    self.stats.reused += 1
                    node = idle.pop().node  # the most recently used: its caches are warm
                    break
                room = self._alive.get(shape, 0) < self._cap(shape)
                if room and self._total < self.kept:
                    self._grow(shape, 1)
                    break
                # At the pool's size: the longest-idle node of another shape makes room. One whose
                # container serves this shape is re-armed (no container to remove and start).
                victim = self._oldest_idle_other(shape) if room else None
                if victim is not None:
                    self._shrink(victim.shape, 1)
                    if self._rearm is not None and victim.shape.container() == shape.container():
                        rearm = victim
                        self._grow(shape, 1)
                        break
                    evict.append(victim)
                    continue
                self.stats.waits += 1
                self._cond.wait(1.0)
        for old in evict:
            self._destroy(old)
        if node is not None:
            return node
        if rearm is not None:
            assert self._rearm is not None
            try:
                made = self._rearm(rearm, shape)
            except BaseException:  # the node is gone either way; a new one is made below
                self._destroy(rearm)
            else:
                with self._cond:
                    self.stats.rearmed += 1
                return made
        try:
            made = self._make(shape)
        except BaseException:
            with self._cond:
                self._shrink(shape, 1)
                self._cond.notify_all()
            raise
        with self._cond:
            self.stats.started += 1
            self.stats.peak = max(self.stats.peak, self._total)
        return made

    def release(self, node: N, *, healthy: bool) -> None:
        """A run on ``node`` ended: back to idle, or recycled when damaged or worn out."""
        with self._cond:
            keep = healthy and not self._closed and node.runs < self.max_runs
            if keep:
                self._idle.setdefault(node.shape, []).append(_Idle(node))
                self._start_reaper()
            else:
                self._shrink(node.shape, 1)
                self.stats.recycled += 1
            self._cond.notify_all()
        if not keep:
            self._destroy(node)

    def reaper_alive(self) -> bool:
        """Whether the pool's idle-removal thread runs (only while nodes idle)."""
        with self._cond:
            return self._reaper is not None and self._reaper.is_alive()

    def alive(self) -> int:
        with self._cond:
            return self._total

    def idle_count(self, shape: Shape | None = None) -> int:
        with self._cond:
            if shape is not None:
                return len(self._idle.get(shape, ()))
            return sum(len(v) for v in self._idle.values())

    def close(self) -> None:
        """Remove every idle node; nodes in use are removed when their runs end."""
        with self._cond:
            self._closed = True
            nodes = [i.node for v in self._idle.values() for i in v]
            self._idle.clear()
            for n in nodes:
                self._shrink(n.shape, 1)
            self._cond.notify_all()
        for n in nodes:
            self._destroy(n)

    def reap_idle(self, now: float | None = None) -> int:
        """Remove nodes idle for ``idle_s`` or longer; how many."""
        now = time.monotonic() if now is None else now
        gone: list[N] = []
        with self._cond:
            for shape, idle in list(self._idle.items()):
                keep = [i for i in idle if now - i.since < self.idle_s]
                for i in idle:
                    if now - i.since >= self.idle_s:
                        gone.append(i.node)
                        self._shrink(shape, 1)
                self._idle[shape] = keep
                if not keep:
                    del self._idle[shape]
            self.stats.idle_removed += len(gone)
            self._cond.notify_all()
        for n in gone:
            self._destroy(n)
        return len(gone)

    # -- internals (call with the lock held) ---------------------------------------------------

    def _grow(self, shape: Shape, count: int) -> None:
        self._alive[shape] = self._alive.get(shape, 0) + count
        self._total += count

    def _shrink(self, shape: Shape, count: int) -> None:
        self._alive[shape] = self._alive.get(shape, 0) - count
        if self._alive[shape] <= 0:
            del self._alive[shape]
        self._total -= count

    def _oldest_idle_other(self, shape: Shape) -> N | None:
        """The longest-idle node of another shape, taken out of the idle lists."""
        best: tuple[float, Shape, int] | None = None
        for other, idle in self._idle.items():
            if other == shape:
                continue
            for k, i in enumerate(idle):
                if best is None or i.since < best[0]:
                    best = (i.since, other, k)
        if best is None:
            return None
        _, other, k = best
        node = self._idle[other].pop(k).node
        if not self._idle[other]:
            del self._idle[other]
        return node

    def _start_reaper(self) -> None:
        if self._reaper is None or not self._reaper.is_alive():
            self._reaper = threading.Thread(target=self._reap_loop, daemon=True,
                                            name="verify-docker-idle")
            self._reaper.start()

    def _reap_loop(self) -> None:
        while True:
            with self._cond:
                oldest = min((i.since for v in self._idle.values() for i in v), default=None)
                if self._closed or oldest is None:
                    self._reaper = None
                    return
                wait = oldest + self.idle_s - time.monotonic()
                if wait > 0:
                    self._cond.wait(min(wait + 0.01, self.idle_s))
                    continue
            self.reap_idle()


__all__ = ["NodePool", "PoolStats", "default_max_nodes"]
