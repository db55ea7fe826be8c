"""The elastic pool of the docker backend's node mode, with stand-in nodes (no Docker needed):
the pool is the unit under test here; ``test_docker_nodes.py`` runs it with real containers."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from verify_cli.sandbox.base import Limits
from verify_cli.sandbox.docker.containers import Shape
from verify_cli.sandbox.docker.node_pool import SHAPES_KEPT, NodePool

A = Shape.of("image-a", Limits())
B = Shape.of("image-b", Limits())


@dataclass
class FakeNode:
    shape: Shape
    runs: int = 0


class Made:
    def __init__(self) -> None:
        self.made: list[FakeNode] = []
        self.destroyed: list[FakeNode] = []
        self.lock = threading.Lock()

    def make(self, shape: Shape) -> FakeNode:
        time.sleep(0.01)
        with self.lock:
            self.made.append(FakeNode(shape))
            return self.made[-1]

    def destroy(self, node: FakeNode) -> None:
        with self.lock:
            self.destroyed.append(node)


def _pool(made: Made, *, max_nodes: int = 2, idle_s: float = 60, max_runs: int = 100) -> NodePool[FakeNode]:
    return NodePool(made.make, made.destroy, max_nodes=max_nodes, idle_s=idle_s, max_runs=max_runs)


def test_grows_to_the_limit_under_a_queue_then_makes_work_wait() -> None:
    made = Made()
    pool = _pool(made, max_nodes=2)
    held = [pool.acquire(A), pool.acquire(A)]
    assert pool.stats.started == 2 and pool.alive() == 2
    got: list[FakeNode] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(A)))
    waiter.start()
    time.sleep(0.2)
    assert not got and pool.stats.waits >= 1  # at the limit: the third run waits
    held[0].runs += 1
    pool.release(held[0], healthy=True)
    waiter.join(5)
    assert got == [held[0]] and pool.stats.reused == 1 and pool.stats.started == 2


def test_damaged_or_worn_out_nodes_are_recycled() -> None:
    made = Made()
    pool = _pool(made, max_runs=2)
    node = pool.acquire(A)
    node.runs = 1
    pool.release(node, healthy=False)
    assert made.destroyed == [node] and pool.stats.recycled == 1 and pool.alive() == 0
    node = pool.acquire(A)
    node.runs = 2
    pool.release(node, healthy=True)  # served max_runs
    assert made.destroyed[-1] is node and pool.stats.recycled == 2


def test_idle_nodes_go_after_the_timeout_and_the_thread_with_them() -> None:
    made = Made()
    pool = _pool(made, idle_s=0.3)
    nodes = [pool.acquire(A), pool.acquire(A)]
    for n in nodes:
        pool.release(n, healthy=True)
    assert pool.idle_count() == 2
    deadline = time.monotonic() + 5
    while pool.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.alive() == 0 and sorted(map(id, made.destroyed)) == sorted(map(id, nodes))
    assert pool.stats.idle_removed == 2
    deadline = time.monotonic() + 5
    while pool.reaper_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pool.reaper_alive()  # nothing idle: the pool holds no thread either


def test_shapes_are_never_shared_and_old_idle_shapes_make_room() -> None:
    made = Made()
    pool = _pool(made, max_nodes=1)
    a = pool.acquire(A)
    pool.release(a, healthy=True)
    b = pool.acquire(B)
    assert b is not a and b.shape == B  # an idle node of another shape is not used
    pool.release(b, healthy=True)
    shapes = [Shape.of(f"image-{i}", Limits()) for i in range(SHAPES_KEPT)]
    for s in shapes:
        pool.release(pool.acquire(s), healthy=True)
    assert pool.alive() == SHAPES_KEPT  # the longest idle (A, then B) made room
    assert a in made.destroyed and b in made.destroyed


def test_close_removes_idle_nodes_and_nodes_in_use_when_they_end() -> None:
    made = Made()
    pool = _pool(made)
    busy = pool.acquire(A)
    pool.release(pool.acquire(A), healthy=True)
    pool.close()
    assert len(made.destroyed) == 1
    pool.release(busy, healthy=True)
    assert len(made.destroyed) == 2 and pool.alive() == 0
