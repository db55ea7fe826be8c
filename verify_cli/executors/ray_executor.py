"""The ``ray`` executor: grade requests on every node of a Ray cluster that offers sandbox slots.

One :class:`~verify_cli.executors.ray_pool.SandboxPool` actor per node, pinned there and holding
that node's ``sandbox_slots`` resource, so a node never runs more sandboxes than it offers. The
driver keeps at most ``prefetch * slots`` requests queued at each actor (the next run is waiting
when a slot frees, and the request stream is read no faster than the cluster grades: backpressure)
and streams results back in completion order.

Failures: a request whose actor or node dies, or whose call fails, is re-queued on another node
(where there is one) and never scored; after ``max_attempts`` deliveries it comes back as an
``infra_error`` result. A node whose calls fail ``drain_after`` times in a row is drained. Every
result names the node it ran on (:attr:`GradeResult.node`).

Sessions (:meth:`RayExecutor.open_session`): each lives on one node, held by that node's actor
(:mod:`verify_cli.executors.ray_sessions`), a new one on the least-loaded node (open sessions per
slot). A session whose actor or node is lost is broken (``infra_error``, never scored): it is not
moved, its caller starts over (:func:`verify_cli.agents.episode.run_episodes` re-queues the
episode).
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from verify_cli.executors.base import ClusterError, Executor, ExecutorStats, ExecutorUnavailableError, ResultCallback
from verify_cli.executors.health import NodeHealth
from verify_cli.executors.ray_cluster import (
    ACTOR_NAMESPACE,
    ACTOR_PREFIX,
    SLOTS_RESOURCE,
    SandboxNode,
    connect,
    node_is_alive,
    pin_to,
    sandbox_nodes,
)
from verify_cli.executors.ray_pool import SandboxPool
from verify_cli.executors.shipping import pack_task
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.sandbox.base import RunResult, RuntimeLayer, Verdict
from verify_cli.sandbox.registry import SandboxSpec, sandbox_spec
from verify_cli.sandbox.sessions.base import Session, SessionInfraError, SessionLimits, Workspace

#: How long the driver waits between looks at capacity that another stream may have freed.
_POLL_SECONDS = 0.05


@dataclass
class _Pool:
    node: SandboxNode
    actor: Any
    capacity: int
    generation: int = 0
    in_flight: int = 0
    sessions: int = 0
    drained: bool = False
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Attempt:
    request: GradeRequest
    content_hash: str
    bundle: Any  # ObjectRef of the TaskBundle
    tried: set[str] = field(default_factory=set)
    deliveries: int = 0
    pool: _Pool | None = None
    generation: int = 0


#: The cluster's counters (the executor interface's :class:`ExecutorStats`).
RayRunStats = ExecutorStats


class RayExecutor(Executor):
    """Grades on every node of the Ray cluster at ``address`` that offers ``sandbox_slots``.

    ``sandbox`` (a backend name, or a :class:`SandboxSpec` with its options) is resolved on each
    node (``auto``: the best backend there). ``address`` ``auto`` connects to the cluster started
    on this machine, or starts a local Ray instance when none runs (said in :attr:`warnings`).
    ``jobs`` given to :meth:`grade_many` is ignored: the cluster's slots decide how many runs go
    at once.
    """

    name = "ray"

    def __init__(self, address: str = "auto", *, sandbox: SandboxSpec | str = "auto", warm: bool = True,
                 prefetch: int = 2, max_attempts: int = 3, drain_after: int = 3,
                 start_timeout: float = 180.0) -> None:
        self.spec = sandbox if isinstance(sandbox, SandboxSpec) else sandbox_spec(sandbox, resolve=False)
        self._warnings: list[str] = []
        self._ray, self._owns_connection, notice = connect(address)
        if notice:
            self._warnings.append(notice)
        self.address = address
        self.warm = warm
        self.prefetch = max(1, prefetch)
        self.max_attempts = max(1, max_attempts)
        self.health = NodeHealth(drain_after)
        self._stats = ExecutorStats()
        self._identities: dict[str | None, str] = {}
        self._run_id = uuid.uuid4().hex[:8]
        self._actor_class = self._ray.remote(SandboxPool)
        self._lock = threading.Lock()
        self._bundles: dict[tuple[str, str], tuple[str, Any]] = {}
        self._closed = False
        try:
            self._pools = [_Pool(n, self._spawn(n), capacity=self.prefetch * n.slots)
                           for n in sandbox_nodes(self._ray)]
            self._await_pools(start_timeout)
        except BaseException:
            self.close()
            raise

    # --- set-up -----------------------------------------------------------------------------

    def _spawn(self, node: SandboxNode, generation: int = 0) -> Any:
        return self._actor_class.options(
            name=f"{ACTOR_PREFIX}{node.node_id[:12]}:{self._run_id}:{generation}", namespace=ACTOR_NAMESPACE,
            resources={SLOTS_RESOURCE: node.slots}, num_cpus=0, max_restarts=0,
            scheduling_strategy=pin_to(node.node_id),
        ).remote(self.spec, node.slots, node.name, warm=self.warm)

    def _await_pools(self, timeout: float) -> None:
        ray = self._ray
        refs = {pool.actor.describe.remote(): pool for pool in self._pools}
        ready, not_ready = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        for ref in not_ready:
            self._leave_out(refs[ref], f"its sandbox pool did not start within {timeout:g}s (are its "
                                       f"{SLOTS_RESOURCE} held by another run?)")
        for ref in ready:
            pool = refs[ref]
            try:
                pool.info = ray.get(ref)
            except ray.exceptions.RayError as e:
                self._leave_out(pool, f"its sandbox pool failed to start: {_cause(e)}")
                continue
            if pool.info.get("warning"):
                self._warnings.append(f"{pool.node.name}: {pool.info['warning']}")
        live = [p for p in self._pools if not p.drained]
        if not live:
            raise ExecutorUnavailableError("no node of the Ray cluster could start a sandbox pool: "
                                           + "; ".join(self._stats.events),
                                           hint="run `verify-cli cluster status` to see each node's backends")
        kinds = {(p.info["backend"], p.info["isolation"]) for p in live}
        if len(kinds) > 1:
            self._warnings.append("nodes grade with different sandbox backends: "
                                 + ", ".join(f"{p.node.name}={p.info['backend']}" for p in live))

    def _leave_out(self, pool: _Pool, reason: str) -> None:
        self._drain(pool, reason)
        self._warnings.append(f"node {pool.node.name} left out: {reason}")
        with contextlib.suppress(Exception):
            self._ray.kill(pool.actor, no_restart=True)

    def _drain(self, pool: _Pool, reason: str) -> None:
        with self._lock:
            if pool.drained:
                return
            pool.drained = True
            self.health.drain(pool.node.node_id, reason)
            self._stats.drained.append(pool.node.name)
            self._stats.events.append(f"drained {pool.node.name}: {reason}")

    # --- properties -------------------------------------------------------------------------

    def _live_info(self, key: str) -> str:
        # Every pool that started (drained ones graded too); those left out at start have no info.
        values = sorted({str(p.info.get(key, "?")) for p in self._pools if p.info})
        return "+".join(values) or "?"

    @property
    def backend(self) -> str:
        return self._live_info("backend")

    @property
    def isolation(self) -> str:
        return self._live_info("isolation")

    @property
    def warnings(self) -> list[str]:
        return list(self._warnings)

    @property
    def stats(self) -> ExecutorStats:
        return self._stats

    def cache_identity(self, image: str | None) -> str:
        """The identities the live nodes' sandboxes give (``a+b`` where they differ)."""
        with self._lock:
            known = self._identities.get(image)
        if known is not None:
            return known
        refs = [p.actor.cache_identity.remote(image) for p in self._pools if p.info and not p.drained]
        found: set[str] = set()
        for ref in refs:
            with contextlib.suppress(self._ray.exceptions.RayError):
                found.add(str(self._ray.get(ref, timeout=60)))
        identity = "+".join(sorted(found)) or self.backend
        with self._lock:
            self._identities[image] = identity
        return identity

    @property
    def nodes(self) -> list[SandboxNode]:
        """The nodes this executor grades on (drained ones included)."""
        return [p.node for p in self._pools]

    def pool_actor(self, node_id: str) -> Any:
        """The current sandbox-pool actor of ``node_id`` (for diagnosis and tests)."""
        return next(p.actor for p in self._pools if p.node.node_id == node_id)

    def in_flight(self) -> dict[str, int]:
        """Requests handed to each node's actor and not yet back, by node id."""
        with self._lock:
            return {p.node.node_id: p.in_flight for p in self._pools}

    # --- dispatch ---------------------------------------------------------------------------

    def _bundle_of(self, request: GradeRequest) -> tuple[str, Any]:
        task = request.task
        key = (str(task.root), task.id)
        with self._lock:
            hit = self._bundles.get(key)
        if hit is None:
            bundle = pack_task(task)
            hit = (bundle.content_hash, self._ray.put(bundle))
            with self._lock:
                hit = self._bundles.setdefault(key, hit)
        return hit

    def _claim(self, tried: set[str]) -> _Pool | None:
        """A pool with room for one more request, preferring nodes ``tried`` has not failed on
        (waiting for one of those while it is busy); None when none has room now."""
        with self._lock:
            healthy = [p for p in self._pools if not p.drained]
            if not healthy:
                raise ClusterError("every node of the cluster was drained: " + "; ".join(self._stats.events[-3:]),
                                   hint="run `verify-cli cluster status`, fix or replace the nodes, run again")
            candidates = [p for p in healthy if p.node.node_id not in tried] or healthy
            free = [p for p in candidates if p.in_flight < p.capacity]
            if not free:
                return None
            pool = min(free, key=lambda p: p.in_flight / p.capacity)
            pool.in_flight += 1
            return pool

    def _has_room(self) -> bool:
        with self._lock:
            return any(not p.drained and p.in_flight < p.capacity for p in self._pools)

    def _submit(self, attempt: _Attempt, pool: _Pool) -> Any:
        with self._lock:
            attempt.pool, attempt.generation = pool, pool.generation
            actor = pool.actor
        attempt.deliveries += 1
        return actor.grade.remote(attempt.request, attempt.content_hash, [attempt.bundle])

    def _release(self, pool: _Pool) -> None:
        with self._lock:
            pool.in_flight -= 1

    def _node_failed(self, attempt: _Attempt, error: BaseException) -> None:
        """A delivery failed: see :meth:`_pool_failed`."""
        if attempt.pool is not None:
            self._pool_failed(attempt.pool, attempt.generation, error)

    def _pool_failed(self, pool: _Pool, generation: int, error: BaseException) -> None:
        """A call on ``pool``'s actor of ``generation`` failed: strike the node once per failure
        (once per actor death), replace a dead actor on a live node, drain a node that keeps
        failing."""
        ray = self._ray
        actor_died = isinstance(error, ray.exceptions.RayActorError | ray.exceptions.NodeDiedError)
        with self._lock:
            if pool.drained or (actor_died and generation != pool.generation):
                return  # this death was already handled
            if actor_died:
                pool.generation += 1
        reason = f"{type(error).__name__}: {_cause(error)}"
        self._stats.events.append(f"{pool.node.name}: {reason}")
        if self.health.failure(pool.node.node_id, reason):
            self._drain(pool, f"failed {self.health.drain_after} times in a row")
            return
        if actor_died:
            if node_is_alive(ray, pool.node.node_id):
                with self._lock:
                    pool.actor = self._spawn(pool.node, pool.generation)
                self._stats.actor_restarts += 1
            else:
                self._drain(pool, "the node left the cluster")

    def _lost(self, attempt: _Attempt) -> GradeResult:
        req = attempt.request
        message = (f"the run could not be delivered: {attempt.deliveries} attempt(s) on node(s) "
                   f"{', '.join(sorted(attempt.tried))} failed")
        return GradeResult(task_id=req.task.id, phase=req.phase, status=GradeStatus.INFRA_ERROR, score=None,
                           passed=False, tests=(), run=RunResult(Verdict.INFRA_ERROR, self.backend, message=message),
                           problems=(f"sandbox infra_error: {message}",), seed=req.seed, label=req.label)

    def grade_many(self, requests: Iterable[GradeRequest], *, jobs: int = 2,
                   on_result: ResultCallback | None = None) -> Iterator[GradeResult]:
        pending: dict[Any, _Attempt] = {}
        try:
            yield from self._stream(iter(requests), pending, on_result)
        finally:
            # A consumer that stops early: give the room back, and drop what has not started.
            for ref, attempt in pending.items():
                if attempt.pool is not None:
                    self._release(attempt.pool)
                with contextlib.suppress(Exception):
                    self._ray.cancel(ref)

    def _stream(self, source: Iterator[GradeRequest], pending: dict[Any, _Attempt],
                on_result: ResultCallback | None) -> Iterator[GradeResult]:
        ray = self._ray
        retry: deque[_Attempt] = deque()
        exhausted = False
        while True:
            # Hand out work while some node has room: re-queued runs first, then new ones.
            while retry or (not exhausted and self._has_room()):
                if retry:
                    attempt = retry.popleft()
                else:
                    try:
                        request = next(source)
                    except StopIteration:
                        exhausted = True
                        continue
                    content_hash, bundle = self._bundle_of(request)
                    attempt = _Attempt(request, content_hash, bundle)
                pool = self._claim(attempt.tried)
                if pool is None:
                    retry.appendleft(attempt)
                    break
                pending[self._submit(attempt, pool)] = attempt
            if not pending:
                if exhausted and not retry:
                    return
                time.sleep(_POLL_SECONDS)  # all room is held by another stream of this executor
                continue
            waiting_for_room = bool(retry) or not exhausted
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_SECONDS if waiting_for_room else None)
            if ready:
                seen = set(ready)
                rest = [r for r in pending if r not in seen]
                if rest:
                    more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                    ready = [*ready, *more]
            for ref in ready:
                attempt = pending.pop(ref)
                if attempt.pool is None:  # pragma: no cover - every pending attempt was submitted
                    continue
                self._release(attempt.pool)
                try:
                    result: GradeResult = ray.get(ref)
                except ray.exceptions.RayError as e:
                    attempt.tried.add(attempt.pool.node.node_id)
                    self._node_failed(attempt, e)
                    if attempt.deliveries < self.max_attempts:
                        self._stats.requeued += 1
                        retry.append(attempt)
                        continue
                    self._stats.lost += 1
                    result = self._lost(attempt)
                else:
                    self.health.success(attempt.pool.node.node_id)
                    self._stats.per_node[result.node] += 1
                self._stats.completed += 1
                if on_result is not None:
                    on_result(result)
                yield result

    # --- sessions ---------------------------------------------------------------------------

    def sessions_open(self) -> dict[str, int]:
        """Sessions open on each node, by node id."""
        with self._lock:
            return {p.node.node_id: p.sessions for p in self._pools}

    def _claim_session(self, avoid: Collection[str], tried: set[str]) -> _Pool | None:
        """The least-loaded live node for one more session (open sessions per slot, then runs in
        flight), passing over ``avoid`` (node names or ids) where another node can take it."""
        with self._lock:
            live = [p for p in self._pools if not p.drained and p.node.node_id not in tried]
            if not live:
                return None
            preferred = [p for p in live if p.node.name not in avoid and p.node.node_id not in avoid] or live
            pool = min(preferred, key=lambda p: (p.sessions / p.node.slots, p.in_flight / p.capacity))
            pool.sessions += 1
            return pool

    def _session_closed(self, pool: _Pool) -> None:
        with self._lock:
            pool.sessions -= 1

    def open_session(self, workspace: Workspace = None, limits: SessionLimits | None = None, *,
                     env: Mapping[str, str] | None = None, image: str | None = None,
                     labels: Mapping[str, str] | None = None, avoid: Collection[str] = (),
                     layer: RuntimeLayer | None = None) -> Session:
        """A session on the least-loaded node, held there by its sandbox-pool actor; the returned
        :class:`~verify_cli.executors.ray_sessions.RaySession` forwards each call to it. A node
        whose actor cannot be reached is struck and the next one tried; SessionInfraError when
        none can open it. A host-folder ``workspace`` is read here and sent as files. A built
        environment (``layer``) is this machine's: sessions in one are not opened on a cluster yet."""
        from verify_cli.executors.ray_sessions import OPEN_TIMEOUT, RaySession, from_wire, workspace_files

        if layer is not None:
            raise SessionInfraError("agent sessions in a task's built environment are not opened on a Ray "
                                    "cluster yet (docs/environments.md): use --executor local")
        ray = self._ray
        files = workspace_files(workspace)
        limits = limits or SessionLimits()
        tried: set[str] = set()
        failures: list[str] = []
        while True:
            pool = self._claim_session(avoid, tried)
            if pool is None:
                raise SessionInfraError("no node of the Ray cluster could open a session"
                                        + (f": {'; '.join(failures)}" if failures else " (every node was drained)"),
                                        hint="run `verify-cli cluster status`")
            tried.add(pool.node.node_id)
            with self._lock:
                actor, generation = pool.actor, pool.generation
            try:
                tag, value = ray.get(actor.open_session.remote(files, limits, env, image, labels),
                                     timeout=OPEN_TIMEOUT)
            except ray.exceptions.RayError as e:
                self._session_closed(pool)
                failures.append(f"{pool.node.name}: {type(e).__name__}: {_cause(e)}")
                self._pool_failed(pool, generation, e)
                continue
            if tag == "error":
                self._session_closed(pool)
                raise from_wire(value)
            sid, backend, workdir = value

            def lost(error: BaseException, pool: _Pool = pool, generation: int = generation) -> None:
                self._pool_failed(pool, generation, error)

            def closed(pool: _Pool = pool) -> None:
                self._session_closed(pool)

            return RaySession(ray, actor, sid, node=pool.node.name, backend=backend, workdir=workdir, limits=limits,
                              on_lost=lost, on_close=closed)

    # --- tear-down --------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        pools = getattr(self, "_pools", [])
        stops = []
        for pool in pools:
            try:
                stops.append(pool.actor.shutdown.remote())
            except Exception:  # an actor that is gone has nothing to stop
                continue
        if stops:
            ray.wait(stops, num_returns=len(stops), timeout=30)
        for pool in pools:
            try:
                ray.kill(pool.actor, no_restart=True)
            except Exception:
                continue
        if self._owns_connection:
            ray.shutdown()


def _cause(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[-1][:300] if text else type(error).__name__
