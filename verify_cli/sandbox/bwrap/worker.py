"""The bwrap backend's warm worker and its run protocol: one long-lived sandboxed worker
(``verify_cli/harness/warm/warm_worker.py``) that has imported its job's runner once and forks one
child per run, and how the host hands it a run, waits for it and reads back its results.

A child gets fresh namespaces and file systems, joins a per-run cgroup, runs the job in-process
with the same arguments, environment, plugins and result capture as a cold run, and exits.
Anything wrong with a worker (it died, stopped answering, failed to set a run up) is a
:class:`WorkerError`: an infrastructure fault, never a score. The pool that keys, starts, lends
and evicts workers is :mod:`verify_cli.sandbox.bwrap.warm`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify_cli.errors import ExitCode, VerifyError
from verify_cli.harness.warm.warm_worker import (
    CANDIDATE_CHANNEL,
    CANDIDATE_TMP,
    CANDIDATE_WORK,
    HANDOVER_FDS,
    WARMUP_TEST,
)
from verify_cli.sandbox.base import (
    RunResult,
    RunSpec,
    Verdict,
    WarmInvocation,
)
from verify_cli.sandbox.bwrap.candidate import (
    CandidateParent,
    CandidateParentError,
    WarmCandidates,
    cold_candidate_argv,
)
from verify_cli.sandbox.bwrap.sandbox import RESULTS_FOLDER_BYTES, BwrapSandbox, held_folders
from verify_cli.sandbox.environment import (
    SANDBOX_HARNESS,
    scratch_root,
)
from verify_cli.sandbox.local import RESULTS_MAX_FILES, Prepared, read_results_dir
from verify_cli.sandbox.plumbing.cgroup import RunCgroup, cgroup_manager, oom_kills
from verify_cli.sandbox.plumbing.job_send import recv_with_pid, send_job
from verify_cli.sandbox.plumbing.killing import kill_all_but, stop_sandbox
from verify_cli.sandbox.plumbing.output import BoundedCapture, start_drain
from verify_cli.sandbox.plumbing.trusted_launch import TRUSTED_HOME

_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")

#: Paths inside the worker's sandbox (mirrored in warm_worker.py).
JOBS_MOUNT = "/.verify-jobs"
WARMUP_DIR = "/.verify-warmup"
WORKER_SCRIPT = f"{SANDBOX_HARNESS}/warm_worker.py"
#: A warm worker keeps the run's PYTHON* variables (its forks are the runs: the hash seed must
#: hold) but never a user site (trusted_launch: no user site in any trusted process).
WARM_PYTHON_FLAGS = ("-s",)

WARMUP_MEMORY_BYTES = 4 * 1024 * 1024 * 1024  # the worker's limits until its first run
WARMUP_PIDS = 256
START_TIMEOUT = 120.0  # a worker's warm-up (busy machines are slow)
SETUP_TIMEOUT = 20.0  # fork, hello, namespaces and copy of one run
EXIT_GRACE = 3.0  # how long a worker may take to report a child that has ended
_TICK = 0.2
MAX_START_FAILURES = 3

class WorkerError(VerifyError):
    """A warm worker failed (not the code under test): the job must be re-run cold.

    ``worker_ok``: the worker itself is fine and may serve other runs (this one cannot go warm).
    """

    exit_code = ExitCode.INFRA

    def __init__(self, message: str, *, worker_ok: bool = False, fallback: bool = False) -> None:
        super().__init__(message)
        self.worker_ok = worker_ok
        #: The run failed part-way (a warm candidate side): counted and reported as a fallback
        #: even where the worker itself may serve on.
        self.fallback = fallback or not worker_ok


# --------------------------------------------------------------------------------------------
def _recv(sock: socket.socket, max_fds: int = 1) -> tuple[bytes, list[int], int | None]:
    """One message, the descriptors it carried and the sender's pid (from SO_PASSCRED)."""
    return recv_with_pid(sock, max_fds)


def _wait_readable(fds: Sequence[int], timeout: float) -> set[int]:
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return {fd for fd, _ in poller.poll(max(0.0, timeout) * 1000)}


def _has_ended(pid: int) -> bool:
    """True once ``pid`` is a zombie or gone (its parent has not reaped it, or it never will)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return text.rpartition(")")[2].split()[:1] in (["Z"], ["X"])


def _move_in(src: Path, dest: Path) -> bool:
    """Put the work folder where the worker sees it; True when it was moved (not copied)."""
    try:
        os.rename(src, dest)
        return True
    except OSError:
        shutil.copytree(src, dest, symlinks=True)
        return False


def _set_limits(cgroup: RunCgroup, memory_bytes: int, max_pids: int) -> None:
    """Re-limit a live cgroup for the next run (v1: memsw never below the memory limit)."""
    if cgroup.memory_dir is not None:
        if cgroup.version == 1:
            names = ["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
            current = int((cgroup.memory_dir / names[0]).read_text())
            if memory_bytes > current:
                names.reverse()
            for name in names:
                path = cgroup.memory_dir / name
                if name.startswith("memory.memsw") and not path.exists():
                    continue
                path.write_text(str(memory_bytes))
        else:
            (cgroup.memory_dir / "memory.max").write_text(str(memory_bytes))
    if cgroup.pids_dir is not None:
        (cgroup.pids_dir / "pids.max").write_text(str(max_pids))


@dataclass(frozen=True)
class WorkerKey:
    interpreter: str
    preload: tuple[str, ...]
    startup_env: tuple[tuple[str, str], ...]
    #: Built-in runner modules the worker imports instead of pytest (runner workers only).
    runners: tuple[str, ...] = ()
    #: Host folders of the run's built environment (:attr:`RunSpec.layer`), bound read-only at
    #: their own paths: the worker's interpreter is the environment's.
    binds: tuple[str, ...] = ()
    #: The root file system the worker runs over (an image's, :attr:`RuntimeLayer.root`), or
    #: None (the host's system); ``interpreter`` is then a path inside it.
    root: str | None = None


class WarmWorker:
    """One long-lived sandbox process running warm_worker.py; serves one job at a time.

    The worker and every child it forks live in one cgroup: the worker's own processes (bwrap
    and the warm parent, ``infra``) are recorded once it is ready; each run sets that cgroup's
    memory and process limits to the run's, and afterwards every other process in it is killed.
    A child is so born inside its run's limits (no migration on the hot path), and the memory the
    warm interpreter holds counts against the run as a cold run's interpreter does.
    """

    def __init__(self, sandbox: BwrapSandbox, key: WorkerKey) -> None:
        self.sandbox = sandbox
        self.key = key
        self.scratch = Path(tempfile.mkdtemp(prefix="verify-warm-", dir=scratch_root()))
        self.jobs = self.scratch / "jobs"
        self.jobs.mkdir(mode=0o755)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ctl: socket.socket | None = None
        self.cgroup: RunCgroup | None = None
        self.infra: set[int] = set()
        self.loaded: list[str] = []
        self.failed: dict[str, str] = {}
        self.runs = 0
        self.last_used = time.monotonic()
        #: The warm candidate side of two-process runs, and the pool's way to run a start on its
        #: spawner thread.
        self.candidates = WarmCandidates(self.scratch / "candidate")
        self.submit: Callable[[Callable[[], None]], Any] | None = None
        #: The limits the worker's cgroup holds (memory bytes, processes), once a run set them.
        self._limits: tuple[int, int] | None = None

    # Popen must happen on a thread that outlives the worker: bwrap's --die-with-parent fires
    # when the *thread* that started it ends.
    def spawn(self) -> None:
        self.cgroup = cgroup_manager().create(memory_bytes=WARMUP_MEMORY_BYTES,
                                              max_pids=WARMUP_PIDS)
        warmup = self.scratch / "warmup"
        warmup.mkdir()
        (warmup / "test_warm_up.py").write_text(WARMUP_TEST)
        host_ctl, worker_ctl = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl = host_ctl
        try:
            command = [self.key.interpreter, *WARM_PYTHON_FLAGS, WORKER_SCRIPT, "--control-fd",
                       str(worker_ctl.fileno()), "--preload", ",".join(self.key.preload)]
            if self.key.runners:
                command += ["--runners", ",".join(self.key.runners)]
            prepared = self.sandbox.long_lived(
                command, scratch=self.scratch, env=dict(self.key.startup_env),
                ro_binds=[(self.jobs, JOBS_MOUNT), (warmup, WARMUP_DIR), *((Path(b), b) for b in self.key.binds)],
                dirs=[CANDIDATE_WORK, CANDIDATE_CHANNEL, CANDIDATE_TMP, TRUSTED_HOME], root=self.key.root)
            log = open(self.scratch / "worker.log", "wb")  # noqa: SIM115 - handed to the child
            try:
                self.proc = subprocess.Popen(
                    prepared.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    env=prepared.env, cwd=prepared.cwd, pass_fds=[worker_ctl.fileno()],
                    start_new_session=True, close_fds=True, preexec_fn=self.cgroup.join_self)
            finally:
                log.close()
        finally:
            worker_ctl.close()

    def await_ready(self, timeout: float) -> None:
        assert self.ctl is not None and self.proc is not None and self.cgroup is not None
        if not _wait_readable([self.ctl.fileno()], timeout):
            raise WorkerError(
                f"the warm worker did not start within {timeout:g}s{self._log_tail()}")
        data, fds, _ = _recv(self.ctl)
        for fd in fds:
            os.close(fd)
        if not data:
            raise WorkerError(f"the warm worker exited while starting{self._log_tail()}")
        msg = json.loads(data)
        self.loaded, self.failed = list(msg.get("loaded", [])), dict(msg.get("failed", {}))
        if msg.get("op") != "ready" or "<pytest>" in self.failed:
            raise WorkerError(f"the warm worker could not warm up: {self.failed}{self._log_tail()}")
        self.infra = self.cgroup.pids()
        if self.proc.pid not in self.infra:
            raise WorkerError("the warm worker is not in its cgroup")
        for pid in self.infra:  # a run's memory bomb, not the worker, is the one to go
            with contextlib.suppress(OSError):
                Path(f"/proc/{pid}/oom_score_adj").write_text("-1000")
        self._ask_spare()

    def _ask_spare(self) -> None:
        """Have the worker fork its next run's child now, off that run's path (it enters its
        namespaces and waits for the job). Only between runs, once the cgroup was found clean:
        the spare is the next run's child, never a process of another run. Best effort: a worker
        without a spare forks the child when the run comes."""
        if self.ctl is not None:
            with contextlib.suppress(OSError):
                self.ctl.send(b'{"op": "spare"}')

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            tail = (self.scratch / "worker.log").read_bytes()[-2000:].decode("utf-8", "replace")
            return f"\n{tail}" if tail.strip() else ""
        return ""

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        self.candidates.drop(self.infra)
        stop_sandbox(self.ctl, self.proc)
        if self.cgroup is not None:
            self.cgroup.remove()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def run(self, spec: RunSpec, inv: WarmInvocation, env: Mapping[str, str],
            report_imports: bool) -> tuple[RunResult, list[str]]:
        """Run one job; raises WorkerError when the worker, not the code, failed."""
        if not self.alive or self.ctl is None:
            raise WorkerError("the warm worker is not running")
        self.runs += 1
        self.last_used = time.monotonic()
        job_id = uuid.uuid4().hex
        job_dir = self.jobs / job_id
        moved = _move_in(Path(spec.workdir), job_dir)
        try:
            return self._run(spec, inv, env, report_imports, job_id)
        finally:
            if moved:
                os.rename(job_dir, spec.workdir)
            else:
                shutil.rmtree(job_dir, ignore_errors=True)

    def _kill_run(self) -> None:
        """SIGKILL every process of the cgroup but the worker's own, until none is left."""
        assert self.cgroup is not None
        strays = kill_all_but(self.cgroup.pids, self.infra)
        if strays:
            raise WorkerError(f"cannot kill the run's processes {sorted(strays)[:5]}")

    def _run(self, spec: RunSpec, inv: WarmInvocation, env: Mapping[str, str],
             report_imports: bool, job_id: str) -> tuple[RunResult, list[str]]:
        assert self.ctl is not None and self.cgroup is not None
        limits = spec.limits
        wanted = (limits.memory_mb * 1024 * 1024, limits.processes + 4)
        try:
            # Nothing in the worker's sandbox can write its cgroup: limits set stay set.
            if self._limits != wanted:
                self._limits = None
                _set_limits(self.cgroup, *wanted)
                self._limits = wanted
        except OSError as e:  # e.g. a memory limit below what the warm interpreter holds
            raise WorkerError(f"cannot set the run's limits on the worker's cgroup: {e}",
                              worker_ok=True) from e
        ooms_before = oom_kills(self.cgroup)
        stop = threading.Event()
        reason: dict[str, Verdict] = {}
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)

        def on_flood() -> None:
            reason.setdefault("why", Verdict.OUTPUT_LIMIT)
            stop.set()
            with contextlib.suppress(OSError):
                os.write(wake_w, b"!")

        out_cap = BoundedCapture(limits.output_bytes, on_flood)
        err_cap = BoundedCapture(limits.output_bytes, on_flood)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        host_job, child_job = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        host_job.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        cpu = int(limits.cpu_seconds if limits.cpu_seconds is not None else limits.wall_seconds) + 1
        request = {
            "op": "run", "id": job_id, "mode": inv.mode, "program": inv.program, "argv0": inv.argv0,
            "args": list(inv.args), "env": dict(env), "cpu_seconds": cpu,
            "file_bytes": limits.file_bytes, "disk_bytes": limits.file_bytes,
            "results_bytes": min(limits.file_bytes, RESULTS_FOLDER_BYTES),
            "results_files": RESULTS_MAX_FILES * 2, "report_imports": report_imports,
        }
        parent = self.candidates.parent_for(spec.candidate, self.cgroup, self.infra, self.submit,
                                            layer=spec.layer)
        cand_out = cand_err = -1
        if spec.candidate is not None:
            held = held_folders(spec.candidate, self.jobs / job_id)
            request["candidate"] = {
                "argv": cold_candidate_argv(spec.candidate, held, spec.layer),
                "held": held, "protected": list(spec.candidate.protected),
                "hidden": list(spec.candidate.hidden), "private": list(spec.candidate.private),
                "warm": parent is not None}
            if parent is not None:
                cand_out, cand_err = os.dup(out_w), os.dup(err_w)
        results_fd: int | None = None
        drains: list[threading.Thread] = []
        swept = False
        start = time.monotonic()
        try:
            try:
                send_job(self.ctl, request, [out_w, err_w, child_job.fileno()],
                         unreachable=lambda why: WorkerError(f"cannot reach the warm worker: {why}"))
            finally:
                os.close(out_w)
                os.close(err_w)
                child_job.close()
            drains = [start_drain(out_r, out_cap), start_drain(err_r, err_cap)]
            if parent is not None:  # its child enters its namespaces while this run's are built
                try:
                    self._begin_candidate(parent, job_id, request, dict(spec.candidate.env)
                                          if spec.candidate is not None else {}, cand_out, cand_err)
                finally:
                    for dup in (cand_out, cand_err):
                        os.close(dup)
                    cand_out = cand_err = -1
            handed: list[list[int]] = []

            def on_mounts(mounts: list[int]) -> None:
                handed.append(mounts)
                if parent is None:
                    for fd in mounts:
                        os.close(fd)
                    return
                self._start_candidate(parent, mounts, start + SETUP_TIMEOUT)

            child_pid, results_fd = self._await_setup(host_job, start + SETUP_TIMEOUT, on_mounts)
            if parent is not None and not handed:  # none exported: the child started it cold
                on_mounts([])
            status = self._await_exit(job_id, child_pid, start, limits.wall_seconds, stop, wake_r,
                                      reason, host_job if spec.candidate is not None else None)
            wall = time.monotonic() - start
            self._kill_run()
            if status is None:  # stopped early (timeout, flood): the worker reaps the child now
                status = self._await_exit(job_id, child_pid, time.monotonic(), 5.0,
                                          threading.Event(), wake_r, {})
                if status is None:
                    raise WorkerError("the warm worker did not report a killed run")
            deadline = time.monotonic() + 5
            for t in drains:
                t.join(timeout=max(0.0, deadline - time.monotonic()))
            oom = oom_kills(self.cgroup) > ooms_before
            why = reason.get("why")
            results = {} if why is Verdict.OUTPUT_LIMIT else read_results_dir(results_fd)
            imports = self._imports(host_job) if report_imports else []
            if parent is not None and self.candidates.last == "warm":
                self._finish_candidate(parent)
            if not self.alive or self.cgroup.pids() != self.infra:
                raise WorkerError("the warm worker died during the run")
            prepared = Prepared(argv=[], env={}, cwd="/", results_dir=self.scratch / "results",
                                signal_from_status=True)
            raw = status[0]
            if os.WIFSIGNALED(raw) and why is None:
                # A command that died of a signal (not killed by us, as a cold runner kills bwrap
                # itself on a timeout or flood) is reported by bwrap as exit 128 + signal.
                raw = (128 + os.WTERMSIG(raw)) << 8
            run = self.sandbox._judge(prepared, {"status": raw, "cpu": status[1]}, why, oom,
                                      wall, out_cap, err_cap, results)
            swept = True  # the cgroup holds the worker's own processes and nothing else
            self._ask_spare()
            self.candidates.ask_spare()
            return run, imports
        finally:
            try:
                if not swept:
                    self._kill_run()
            finally:
                for t in drains:
                    t.join(timeout=1)
                for fd in (results_fd, wake_r, wake_w, cand_out, cand_err):
                    if fd is not None and fd >= 0:
                        with contextlib.suppress(OSError):
                            os.close(fd)
                if not drains:
                    for fd in (out_r, err_r):
                        with contextlib.suppress(OSError):
                            os.close(fd)
                host_job.close()

    def _begin_candidate(self, parent: CandidateParent, job_id: str, request: dict[str, Any],
                         extra_env: Mapping[str, str], out_fd: int, err_fd: int) -> None:
        try:
            self.candidates.begin(parent, job_id, cpu_seconds=int(request["cpu_seconds"]),
                                  file_bytes=int(request["file_bytes"]), extra_env=extra_env,
                                  out_fd=out_fd, err_fd=err_fd, infra=self.infra,
                                  held=list(request["candidate"].get("held", [])),
                                  protected=list(request["candidate"].get("protected", [])))
        except CandidateParentError as e:
            raise WorkerError(f"the warm candidate side failed: {e}", worker_ok=True,
                              fallback=True) from e

    def _start_candidate(self, parent: CandidateParent, mounts: list[int], deadline: float) -> None:
        try:
            self.candidates.start(parent, mounts=mounts, deadline=deadline, infra=self.infra)
        except CandidateParentError as e:
            raise WorkerError(f"the warm candidate side failed: {e}", worker_ok=True,
                              fallback=True) from e

    def _finish_candidate(self, parent: CandidateParent) -> None:
        """A candidate parent that died or lost track of its run fails the run (re-run cold)."""
        try:
            self.candidates.finish(parent, self.infra)
        except CandidateParentError as e:
            self._kill_run()
            raise WorkerError(f"the warm candidate side failed: {e}", worker_ok=True,
                              fallback=True) from e

    def _await_setup(self, host_job: socket.socket, deadline: float,
                     on_mounts: Callable[[list[int]], None]) -> tuple[int, int]:
        """(host pid of the run's child, handle on its results folder), sent once its sandbox
        is built. The detached mounts it exports for a warm candidate on the way (before its own
        sandbox is done) go to ``on_mounts`` at once."""
        assert self.ctl is not None
        while True:
            ready = _wait_readable([host_job.fileno(), self.ctl.fileno()], deadline - time.monotonic())
            if not ready:
                raise WorkerError("the run's sandbox was not set up in time")
            if host_job.fileno() not in ready:
                raise WorkerError(self._unexpected_control())
            data, fds, pid = _recv(host_job, max_fds=HANDOVER_FDS)
            msg: dict[str, Any] = {}
            with contextlib.suppress(ValueError):
                msg = json.loads(data) if data else {}
            if msg.get("op") == "mounts" and len(fds) == HANDOVER_FDS:
                on_mounts(fds)
                continue
            if msg.get("op") == "ready" and len(fds) == 1 and pid:
                return pid, fds[0]
            break
        for fd in fds:
            os.close(fd)
        why = msg.get("message", "no answer")
        raise WorkerError(f"the run's sandbox could not be set up: {why}")

    def _unexpected_control(self) -> str:
        assert self.ctl is not None
        try:
            data, fds, _ = _recv(self.ctl)
        except OSError as e:
            return f"the warm worker's channel failed: {e}"
        for fd in fds:
            os.close(fd)
        return "the warm worker exited" if not data else f"unexpected worker message {data[:200]!r}"

    def _await_exit(self, job_id: str, child_pid: int, start: float, limit: float,
                    stop: threading.Event, wake_r: int, reason: dict[str, Verdict],
                    host_job: socket.socket | None = None) -> tuple[int, float] | None:
        """(wait status, cpu seconds) of the run's child, or None if the run had to be stopped
        (``reason`` says why). A worker that cannot report an ended child raises WorkerError.
        With ``host_job`` (a two-process run), the candidate's side is killed as soon as the
        child says its tests are done, while the child's own exit goes on."""
        assert self.ctl is not None and self.cgroup is not None
        ended_at: float | None = None
        while True:
            now = time.monotonic()
            if stop.is_set():
                return None
            if now - start >= limit:
                reason.setdefault("why", Verdict.TIMEOUT)
                return None
            watch = [self.ctl.fileno(), wake_r] + ([host_job.fileno()] if host_job is not None else [])
            ready = _wait_readable(watch, min(_TICK, limit - (now - start)))
            if host_job is not None and host_job.fileno() in ready:
                data, fds, _ = _recv(host_job)
                for fd in fds:
                    os.close(fd)
                told: dict[str, Any] = {}
                with contextlib.suppress(ValueError):
                    told = json.loads(data) if data else {}
                if told.get("op") == "finished":
                    kill_all_but(self.cgroup.pids, self.infra | {child_pid})
                host_job = None  # one look: what follows is read after the run
                continue
            if self.ctl.fileno() in ready:
                data, fds, _ = _recv(self.ctl)
                for fd in fds:
                    os.close(fd)
                if not data:
                    raise WorkerError("the warm worker exited during the run")
                msg = json.loads(data)
                if msg.get("op") == "exit" and msg.get("id") == job_id:
                    return int(msg["status"]), float(msg.get("cpu", 0.0))
                raise WorkerError(f"unexpected worker message {data[:200]!r}")
            # The child ended but its parent does not say so: the worker is stopped or broken.
            if ended_at is None and _has_ended(child_pid):
                ended_at = time.monotonic()
            elif ended_at is not None and time.monotonic() - ended_at > EXIT_GRACE:
                raise WorkerError("the warm worker stopped answering")

    @staticmethod
    def _imports(host_job: socket.socket) -> list[str]:
        found: list[str] = []
        for _ in range(16):
            if not _wait_readable([host_job.fileno()], 0):
                break
            try:
                data, fds, _ = _recv(host_job)
            except OSError:
                break
            for fd in fds:
                os.close(fd)
            if not data:
                break
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                msg = json.loads(data)
                if msg.get("op") == "imports":
                    found = [m for m in msg.get("modules", [])[:64]
                             if isinstance(m, str) and _MODULE_NAME.fullmatch(m)]
        return found
