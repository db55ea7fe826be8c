"""The elastic pool of the docker backend's node mode, with stand-in nodes (no Docker needed):
the pool is the unit under test here; ``test_docker_nodes.py`` runs it with real containers."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

from verify_cli.sandbox.base import Limits
from verify_cli.sandbox.docker.containers import Shape
from verify_cli.sandbox.docker.node_pool import SHAPES_KEPT, WARM_KEYS_KEPT, NodePool

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
    assert pool.kept == SHAPES_KEPT + WARM_KEYS_KEPT  # one node a shape: shapes and warm keys
    shapes = [Shape.of(f"image-{i}", Limits()) for i in range(pool.kept)]
    for s in shapes:
        pool.release(pool.acquire(s), healthy=True)
    assert pool.alive() == pool.kept  # the longest idle (A, then B) made room
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


# -- re-arming: the same container, another supervisor ------------------------------------------

KEPT = SHAPES_KEPT + WARM_KEYS_KEPT  # nodes a pool of max_nodes 1 keeps

def _seeded(seed: int, image: str = "image-a") -> Shape:
    """A warm shape keyed by its hash seed (check-tasks runs each repeat with its own)."""
    return replace(Shape.of(image, Limits()), warm=("module", "python", (), (("PYTHONHASHSEED", str(seed)),)))


class Rearmed(Made):
    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.rearmed: list[tuple[FakeNode, Shape]] = []
        self.fail = fail

    def rearm(self, node: FakeNode, shape: Shape) -> FakeNode:
        if self.fail:
            raise RuntimeError("the node's processes did not end")
        with self.lock:
            self.rearmed.append((node, shape))
        return FakeNode(shape, runs=node.runs)


def _full_pool(made: Rearmed, shapes: list[Shape]) -> NodePool[FakeNode]:
    """A pool at its size (max_nodes 1: ``kept`` nodes, one a shape), every node idle,
    ``shapes[0]``'s the longest idle."""
    pool: NodePool[FakeNode] = NodePool(made.make, made.destroy, max_nodes=1, idle_s=60,
                                        max_runs=100, rearm=made.rearm)
    nodes = [pool.acquire(s) for s in shapes]
    for n in nodes:
        pool.release(n, healthy=True)
        time.sleep(0.002)  # distinct idle times
    assert pool.alive() == KEPT and pool.stats.started == KEPT
    return pool


def test_at_its_size_the_pool_rearms_the_longest_idle_node_when_its_container_serves() -> None:
    made = Rearmed()
    pool = _full_pool(made, [_seeded(i) for i in range(KEPT)])
    node = pool.acquire(_seeded(99))
    assert made.rearmed and made.rearmed[0][0].shape == _seeded(0) and node.shape == _seeded(99)
    assert pool.stats.rearmed == 1 and pool.stats.started == KEPT  # no container started
    assert made.destroyed == [] and pool.alive() == KEPT
    pool.release(node, healthy=True)
    assert pool.acquire(_seeded(99)) is node  # and it is a node of its new shape from then on
    assert pool.idle_count(_seeded(0)) == 0


def test_a_victim_of_another_container_is_removed_and_a_new_node_made_as_before() -> None:
    made = Rearmed()
    pool = _full_pool(made, [_seeded(0, "image-b"), *(_seeded(i) for i in range(1, KEPT))])
    node = pool.acquire(_seeded(99))  # the longest idle is image-b's: not re-armable
    assert made.rearmed == [] and pool.stats.rearmed == 0
    assert [n.shape for n in made.destroyed] == [_seeded(0, "image-b")]
    assert pool.stats.started == KEPT + 1 and node.shape == _seeded(99)


def test_room_left_means_a_new_node_not_a_rearmed_one() -> None:
    made = Rearmed()
    pool: NodePool[FakeNode] = NodePool(made.make, made.destroy, max_nodes=2, idle_s=60,
                                        max_runs=100, rearm=made.rearm)
    pool.release(pool.acquire(_seeded(0)), healthy=True)
    pool.acquire(_seeded(1))  # the pool is below its size: interleaved shapes keep their nodes
    assert made.rearmed == [] and pool.stats.started == 2 and pool.idle_count(_seeded(0)) == 1


def test_a_node_that_cannot_be_rearmed_is_removed_and_a_new_one_made() -> None:
    made = Rearmed(fail=True)
    pool = _full_pool(made, [_seeded(i) for i in range(KEPT)])
    node = pool.acquire(_seeded(99))
    assert [n.shape for n in made.destroyed] == [_seeded(0)]
    assert node.shape == _seeded(99) and pool.stats.rearmed == 0
    assert pool.stats.started == KEPT + 1 and pool.alive() == KEPT
