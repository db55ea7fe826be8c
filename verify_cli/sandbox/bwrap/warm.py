"""The bwrap backend's warm runs: a pool of long-lived sandboxed workers that fork per run.

A cold run pays for an interpreter start and for importing its runner (pytest and its plugins,
a built-in runner) before the first test runs. A warm worker is a long-lived process in the
sandbox (``verify_cli/harness/warm/warm_worker.py``) that has imported the job's runner and the
task's preload modules once, never runs candidate code itself, and forks one child per run.
Each child gets fresh namespaces and file systems, joins a per-run cgroup, runs the job
in-process with the same arguments, environment, plugins and result capture as a cold run, and
exits. The sandbox does not read the job (a :class:`~verify_cli.sandbox.base.WarmInvocation`
that the task's kind built); the worker's harness does.

What keeps the verdicts the same as cold:

- workers are keyed by interpreter, preload set and the environment read at interpreter start
  (``PYTHONHASHSEED`` above all), so a run never sees another run's hash seed;
- the per-run cgroup, output capture, limits and judging are the cold runner's;
- anything wrong with a worker (it died, stopped answering, failed to set a run up) is an
  infrastructure fault: the worker is replaced and the job re-run cold. It is never scored.

:class:`WarmPool` is the :class:`~verify_cli.sandbox.base.WarmHost` that
:meth:`BwrapSandbox.warm_host <verify_cli.sandbox.bwrap.BwrapSandbox.warm_host>` opens; this module
keys, starts, lends and evicts the workers, and :mod:`verify_cli.sandbox.bwrap.worker` is one
worker's run protocol.
"""

from __future__ import annotations

import atexit
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from verify_cli.harness.warm.warm_worker import CANDIDATE_CHANNEL
from verify_cli.sandbox.base import (
    RunSpec,
    WarmHost,
    WarmHow,
    WarmInvocation,
    WarmOutcome,
    WarmStats,
)
from verify_cli.sandbox.bwrap.rootfs import which_in_root
from verify_cli.sandbox.bwrap.sandbox import BwrapSandbox, root_candidate_exec
from verify_cli.sandbox.bwrap.worker import (
    MAX_START_FAILURES,
    START_TIMEOUT,
    WarmWorker,
    WorkerError,
    WorkerKey,
)
from verify_cli.sandbox.environment import (
    CHANNEL_SOCKET,
    SANDBOX_HARNESS,
    SANDBOX_RESULTS,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    candidate_exec_prefix,
    compile_harness,
    pinned_environment,
)
from verify_cli.sandbox.plumbing.cgroup import cgroup_manager
from verify_cli.sandbox.plumbing.trusted_launch import trusted_home_variables
from verify_cli.sandbox.process import run_path

# --------------------------------------------------------------------------------------------
# The pool


@dataclass
class _KeyState:
    idle: list[WarmWorker] = field(default_factory=list)
    count: int = 0
    start_failures: int = 0


def startup_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables an interpreter or pytest reads once, at start: a worker serves only runs
    whose values match its own."""
    # PYTEST_ADDOPTS is read by each run's pytest.main, in the run's work folder (its "-c" names
    # the trusted configuration there): the worker's own warm-up runs without it.
    return {k: v for k, v in env.items()
            if (k.startswith(("PYTHON", "PYTEST_", "LC_")) or k in ("LANG", "HOME")) and k != "PYTEST_ADDOPTS"}


def bwrap_warm_unavailable() -> str | None:
    """Why the bwrap backend cannot host warm workers here, or None when it can."""
    manager = cgroup_manager()
    if not manager.available:
        return f"warm runs need per-run cgroups: {manager.reason or 'not available'}"
    return None


class WarmPool(WarmHost):
    """Warm workers of one bwrap sandbox, by :class:`WorkerKey`; safe to share between threads.

    At most ``workers_per_key`` workers serve a key (a run waits for a free one); idle workers of
    other keys are closed when more than ``max_workers`` are alive. Runs of the built-in runners
    go to workers of their own that imported the runner (and not pytest).
    """

    runs_harness_modules = True

    def __init__(self, sandbox: BwrapSandbox, *, workers_per_key: int = 2,
                 max_workers: int | None = None, start_timeout: float = START_TIMEOUT) -> None:
        reason = sandbox.warm_unavailable()
        if reason is not None:
            raise ValueError(reason)
        self.sandbox = sandbox
        compile_harness()  # the runs' candidate servers import harness modules too
        self.workers_per_key = max(1, workers_per_key)
        self.max_workers = max_workers
        self.start_timeout = start_timeout
        self._stats = WarmStats()
        self._keys: dict[WorkerKey, _KeyState] = {}
        self._cond = threading.Condition()
        self._closed = False
        # One thread starts every worker (see WarmWorker.spawn).
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warm-spawn")
        # Workers die with this process anyway (--die-with-parent); this also removes their
        # cgroups when a caller forgets close().
        atexit.register(_close_at_exit, weakref.ref(self))

    @property
    def stats(self) -> WarmStats:
        return self._stats

    def resize(self, workers_per_key: int) -> None:
        with self._cond:
            self.workers_per_key = max(self.workers_per_key, workers_per_key)
            self._cond.notify_all()

    def reserve(self, jobs: int) -> None:
        """Let up to ``jobs`` workers serve each key (the caller's parallelism)."""
        self.resize(jobs)
        with self._cond:
            self.max_workers = max(self.max_workers or 0, 4 * jobs)

    def environment(self, spec: RunSpec) -> dict[str, str]:
        return self._job_env(spec)

    def run_warm(self, spec: RunSpec, invocation: WarmInvocation, *,
                   preload: Sequence[str] = (), report_imports: bool = False) -> WarmOutcome:
        """Run ``spec`` warm (or cold where a worker cannot be had or fails); with
        ``report_imports``, the outcome names the third-party modules the run imported."""
        inv = invocation
        env = self._job_env(spec)
        root = spec.layer.root if spec.layer is not None else None
        interpreter = inv.interpreter
        if root is not None:
            # Over an image's root the worker runs the root's interpreter (as the run's PATH finds
            # it there, never the host's) with the host's bwrap bound in; without one, cold.
            interpreter = which_in_root(root, inv.argv0 or "python", env.get("PATH", "")) or ""
            if not interpreter or (inv.mode == "script" and which_in_root(root, inv.program, env.get("PATH", ""))
                                   is None):
                with self._cond:
                    self._stats.cold_runs += 1
                return WarmOutcome(self.sandbox.run(spec), "cold")
            inv = replace(inv, interpreter=interpreter)
        key = WorkerKey(interpreter, tuple(sorted(set(preload))),
                        tuple(sorted(startup_environment(env).items())),
                        runners=(inv.program,) if inv.mode == "runner" else (),
                        binds=spec.layer.binds if spec.layer is not None else (), root=root)
        worker = self._acquire(key)
        if worker is None:
            with self._cond:
                self._stats.cold_runs += 1
            return WarmOutcome(self.sandbox.run(spec), "cold")
        healthy = ran = False
        imports: list[str] = []
        how: WarmHow = "fallback"  # the worker died with the run: re-run cold
        try:
            result, imports = worker.run(spec, inv, env, report_imports)
            healthy = ran = worker.alive
            with self._cond:
                if worker.candidates.last == "warm":
                    self._stats.warm_candidates += 1
                    if worker.candidates.parent is not None and worker.candidates.parent.last_spared:
                        self._stats.spare_candidates += 1
                elif worker.candidates.last == "cold":
                    self._stats.cold_candidates += 1
        except WorkerError as e:
            healthy = e.worker_ok and worker.alive
            how = "fallback" if e.fallback else "cold"
            with self._cond:
                if not e.fallback:
                    self._stats.cold_runs += 1
                else:
                    self._stats.fallbacks += 1
                self._stats.last_error = str(e)
        finally:
            self._release(key, worker, healthy)
        if not ran:
            return WarmOutcome(self.sandbox.run(spec), how)
        with self._cond:
            self._stats.warm_runs += 1
        return WarmOutcome(result, "warm", tuple(imports))

    @staticmethod
    def _job_env(spec: RunSpec) -> dict[str, str]:
        """The environment a cold run of ``spec`` gets in the sandbox (bwrap's)."""
        extra = dict(spec.env)
        if spec.candidate is not None:
            channel = f"{CANDIDATE_CHANNEL}/{CHANNEL_SOCKET}"
            over_root = spec.layer is not None and spec.layer.root is not None
            extra.update(VERIFY_CHANNEL=channel, VERIFY_CANDIDATE_EXEC=root_candidate_exec(channel) if over_root
                         else candidate_exec_prefix(sys.executable, SANDBOX_HARNESS, channel))
            # The trusted side's home: an empty read-only folder of the worker's sandbox, which
            # the candidate's (bwrap_candidate.py) does not have.
            extra.update(trusted_home_variables(spec.env))
        return pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                                  harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP,
                                  path=run_path(spec), extra=extra)

    def _acquire(self, key: WorkerKey) -> WarmWorker | None:
        with self._cond:
            state = self._keys.setdefault(key, _KeyState())
            while True:
                if self._closed or state.start_failures >= MAX_START_FAILURES:
                    return None
                if state.idle:
                    return state.idle.pop()
                if state.count < self.workers_per_key:
                    state.count += 1
                    evict = self._evictable(key)
                    break
                self._cond.wait()
        for old in evict:
            old.close()
        worker = WarmWorker(self.sandbox, key)
        worker.submit = lambda fn: self._spawner.submit(fn).result()
        try:
            self._spawner.submit(worker.spawn).result()
            worker.await_ready(self.start_timeout)
        except (WorkerError, OSError, ValueError, RuntimeError) as e:
            worker.close()
            with self._cond:
                state.count -= 1
                state.start_failures += 1
                self._stats.last_error = str(e)
                self._cond.notify_all()
            return None
        with self._cond:
            state.start_failures = 0
            self._stats.workers_started += 1
        return worker

    def _evictable(self, keep: WorkerKey) -> list[WarmWorker]:
        """Idle workers of other keys to close so that at most max_workers are alive (lock held)."""
        if self.max_workers is None:
            return []
        alive = sum(s.count for s in self._keys.values())
        idle = sorted(((w.last_used, k, w) for k, s in self._keys.items() if k != keep
                       for w in s.idle), key=lambda t: t[0])
        out: list[WarmWorker] = []
        for _, k, w in idle:
            if alive <= self.max_workers:
                break
            self._keys[k].idle.remove(w)
            self._keys[k].count -= 1
            alive -= 1
            out.append(w)
        return out

    def _release(self, key: WorkerKey, worker: WarmWorker, healthy: bool) -> None:
        with self._cond:
            state = self._keys[key]
            if healthy and not self._closed:
                state.idle.append(worker)
                worker = None  # type: ignore[assignment]
            else:
                state.count -= 1
                self._stats.workers_replaced += 1
            self._cond.notify_all()
        if worker is not None:
            worker.close()

    def close(self) -> None:
        """Stop every worker; runs after this go cold."""
        with self._cond:
            self._closed = True
            workers = [w for s in self._keys.values() for w in s.idle]
            for s in self._keys.values():
                s.count -= len(s.idle)
                s.idle.clear()
            self._cond.notify_all()
        for w in workers:
            w.close()
        self._spawner.shutdown(wait=False)


def _close_at_exit(ref: weakref.ref[WarmPool]) -> None:
    pool = ref()
    if pool is not None:
        pool.close()



__all__ = ["WarmPool", "WorkerError", "WorkerKey", "bwrap_warm_unavailable", "startup_environment"]
