"""The warm candidate side of two-process grading on bwrap: a long-lived candidate parent.

A cold two-process run starts the candidate server in a nested bwrap: a new interpreter that
imports the server, its wire codec and peer, on every run. A warm trusted worker
(:mod:`verify_cli.sandbox.bwrap.warm`) instead pairs with a :class:`CandidateParent`: a process
started once, in a sandbox of the candidate's kind, running
``verify_cli/harness/candidate/verify_candidate_parent.py``, that has those modules imported and
forks one server per run.

What the parent can see is what a cold candidate sees, minus any run: the read-only system and
runtime, the candidate-side harness, the candidate's environment (``--clearenv``), its own
``/proc`` (a pid namespace of its own: only itself). No task's files, tests, results folder,
trusted harness or seal key were ever in its view.

How a run's folders reach the child, which lives in other namespaces than the trusted side's:
the trusted side's run child lays out the work folder as today and makes detached copies of the
candidate's view of it, of ``/tmp`` and of the channel folder with ``open_tree(OPEN_TREE_CLONE)``
(non-recursive: the test folders bound over the work folder do not come along); the handles
travel over SCM_RIGHTS (trusted child -> host -> candidate parent -> its child), which attaches
them with ``move_mount`` at the paths a cold candidate has. Both sides then share the same file
systems, so the tests see what the candidate writes, exactly as with the cold start's bind mounts.
(``fchdir`` into a passed directory handle would give the candidate a working folder but no
``/workspace``, no shared ``/tmp`` and paths that do not resolve; bind mounts by path cannot
cross the two sandboxes' mount namespaces.) A kernel that refuses ``open_tree`` makes the
trusted child start its candidate cold, and the pool stops asking for the warm one.

Limits: the parent lives in the trusted worker's cgroup, which the pool re-limits for each run
and empties after it, so the candidate's processes are born inside the run's memory and process
limits, shared with the tests' side exactly as in a cold two-process run, and die with the run;
CPU and file-size rlimits are the run's, as a cold candidate inherits them.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from verify_cli.harness.warm.warm_worker import CANDIDATE_CHANNEL, CANDIDATE_TMP, CANDIDATE_WORK, HANDOVER_FDS
from verify_cli.sandbox.base import CandidateProcess, RuntimeLayer
from verify_cli.sandbox.bwrap.sandbox import candidate_argv, candidate_parent_argv
from verify_cli.sandbox.environment import (
    CHANNEL_SOCKET,
    DEFAULT_PATH,
    SANDBOX_CANDIDATE_HARNESS,
    SANDBOX_CHANNEL_DIR,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    candidate_environment,
)
from verify_cli.sandbox.plumbing.cgroup import RunCgroup
from verify_cli.sandbox.plumbing.job_send import send_job
from verify_cli.sandbox.plumbing.killing import stop_sandbox
from verify_cli.sandbox.plumbing.levers import lever_on
from verify_cli.sandbox.process import runtime_path

#: The Python candidate server's start command (two-process pytest, calls and stdio runners):
#: the runs a warm candidate parent can serve.
PYTHON_SERVER_COMMAND = ("/bin/sh", "-c", 'exec python "$VERIFY_CANDIDATE_HARNESS/verify_candidate_server.py"')
#: ``VERIFY_WARM_CANDIDATE=0`` in verify-cli's environment: two-process runs on warm workers
#: start their candidate cold (a diagnostic switch; the benchmark compares both in one run).
WARM_CANDIDATE_ENV = "VERIFY_WARM_CANDIDATE"
PARENT_SCRIPT = f"{SANDBOX_CANDIDATE_HARNESS}/verify_candidate_parent.py"
START_TIMEOUT = 60.0
SETUP_TIMEOUT = 20.0
EXIT_GRACE = 3.0


#: The warm runs' cold candidate command lines (used only where the kernel refuses to export
#: the run's folders), by (command, environment, held folders, protected files, environment
#: layer): building one costs more than a millisecond of path handling, on every run.
_ArgvKey = tuple[tuple[str, ...], tuple[tuple[str, str], ...], tuple[str, ...], tuple[str, ...], RuntimeLayer | None]
_CANDIDATE_ARGVS: dict[_ArgvKey, list[str]] = {}


def cold_candidate_argv(candidate: CandidateProcess, held: list[str], layer: RuntimeLayer | None = None) -> list[str]:
    """The command line that starts the run's candidate cold inside the warm worker's run child
    (where the kernel refuses to export the run's folders; a run in a built environment,
    ``layer``), from a cache."""
    key = (tuple(candidate.command), tuple(sorted(candidate.env.items())), tuple(held), tuple(candidate.protected),
           layer)
    argv = _CANDIDATE_ARGVS.get(key)
    if argv is None:
        if len(_CANDIDATE_ARGVS) >= 256:
            _CANDIDATE_ARGVS.clear()
        argv = _CANDIDATE_ARGVS[key] = candidate_argv(candidate, work_source=CANDIDATE_WORK,
                                                      channel_source=CANDIDATE_CHANNEL, tmp_source=CANDIDATE_TMP,
                                                      held=held, layer=layer)
    return list(argv)


class CandidateParentError(Exception):
    """The candidate parent, not the candidate, failed: the run must not be scored."""


def candidate_env(extra: Mapping[str, str], layer: RuntimeLayer | None = None) -> dict[str, str]:
    """The whole environment of a run's candidate server (what a cold start gives it), in the
    run's built environment where it has one (``layer``)."""
    return candidate_environment(workdir=SANDBOX_WORKDIR, tmp_dir=SANDBOX_TMP,
                                 channel=f"{SANDBOX_CHANNEL_DIR}/{CHANNEL_SOCKET}",
                                 candidate_harness=SANDBOX_CANDIDATE_HARNESS,
                                 path=layer.search_path(DEFAULT_PATH) if layer is not None else runtime_path(),
                                 extra=extra)


def _readable(fd: int, timeout: float) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(max(0.0, timeout) * 1000))


def _parent_pid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _descendants(root: int, pids: set[int]) -> set[int]:
    """Those of ``pids`` that are ``root`` or descend from it."""
    out: set[int] = set()
    for pid in pids:
        seen, p = 0, pid
        while p > 1 and seen < 64:
            if p == root:
                out.add(pid)
                break
            p, seen = _parent_pid(p), seen + 1
    return out


class CandidateParent:
    """One warm candidate parent, in the cgroup of the trusted worker it serves; one run at a time.

    ``env`` is the candidate environment it was started with: it serves only runs whose
    candidate environment is the same (the hash seed is read at interpreter start), and whose
    built environment (``layer``: its interpreter) is its own.
    """

    def __init__(self, cgroup: RunCgroup, scratch: Path, extra_env: Mapping[str, str],
                 layer: RuntimeLayer | None = None) -> None:
        self.cgroup = cgroup
        self.scratch = scratch
        self.layer = layer
        self.env = candidate_env(extra_env, layer)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ctl: socket.socket | None = None
        self.pids: set[int] = set()
        self._job: socket.socket | None = None
        self._job_id = ""
        #: Whether the last finished run's candidate was the parent's spare.
        self.last_spared = False

    def serves(self, extra_env: Mapping[str, str], layer: RuntimeLayer | None = None) -> bool:
        return self.alive and layer == self.layer and candidate_env(extra_env, layer) == self.env

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        """Start the parent (on a thread that outlives it: bwrap's --die-with-parent)."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        host_ctl, parent_ctl = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl = host_ctl
        try:
            argv = candidate_parent_argv(self.scratch, [
                "/bin/sh", "-c", f'exec python "{PARENT_SCRIPT}" "$@"', "sh",
                "--control-fd", str(parent_ctl.fileno())], layer=self.layer)
            log = open(self.scratch / "candidate-parent.log", "wb")  # noqa: SIM115 - the child's
            try:
                self.proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env, cwd="/",
                    pass_fds=[parent_ctl.fileno()], start_new_session=True, close_fds=True,
                    preexec_fn=self.cgroup.join_self)
            finally:
                log.close()
        finally:
            parent_ctl.close()

    def await_ready(self, before: set[int], timeout: float = START_TIMEOUT) -> None:
        """Wait for the parent's warm-up; ``before`` are the cgroup's processes without it."""
        assert self.ctl is not None
        if not _readable(self.ctl.fileno(), timeout):
            raise CandidateParentError(f"the candidate parent did not start in {timeout:g}s{self.log_tail()}")
        msg = self._recv()
        if msg.get("op") != "ready":
            raise CandidateParentError(f"the candidate parent could not warm up{self.log_tail()}")
        assert self.proc is not None
        # Its own processes only: the worker's cgroup may hold the worker's spare child too.
        self.pids = _descendants(self.proc.pid, self.cgroup.pids() - before)
        if self.proc.pid not in self.pids:
            raise CandidateParentError("the candidate parent is not in its worker's cgroup")
        for pid in self.pids:  # a run's memory bomb, not the parent, is the one to go
            with contextlib.suppress(OSError):
                Path(f"/proc/{pid}/oom_score_adj").write_text("-1000")

    def _recv(self) -> dict[str, Any]:
        assert self.ctl is not None
        data, fds, _flags, _addr = socket.recv_fds(self.ctl, 1 << 20, 8)
        for fd in fds:
            os.close(fd)
        if not data:
            raise CandidateParentError("the candidate parent exited")
        try:
            msg = json.loads(data)
        except ValueError as e:
            raise CandidateParentError(f"unreadable message from the candidate parent: {e}") from e
        return msg if isinstance(msg, dict) else {}

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            tail = (self.scratch / "candidate-parent.log").read_bytes()[-2000:].decode("utf-8", "replace")
            return f"\n{tail}" if tail.strip() else ""
        return ""

    def begin(self, job_id: str, *, cpu_seconds: int, file_bytes: int, out_fd: int, err_fd: int,
              extra_env: Mapping[str, str], held: Sequence[str] = (), protected: Sequence[str] = ()) -> None:
        """Have the parent fork the run's candidate child now, while the trusted side builds its
        own sandbox: the child enters its namespaces and waits for the run's folders
        (:meth:`start`). Raises CandidateParentError where the parent cannot be reached."""
        if not self.alive or self.ctl is None:
            raise CandidateParentError("the candidate parent is not running")
        host_job, child_job = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._job, self._job_id = host_job, job_id
        request = {"op": "run", "id": job_id, "env": candidate_env(extra_env, self.layer),
                   "cpu_seconds": cpu_seconds, "file_bytes": file_bytes, "held": list(held),
                   "protected": list(protected)}
        try:
            send_job(self.ctl, request, [out_fd, err_fd, child_job.fileno()],
                     unreachable=lambda why: CandidateParentError(f"cannot reach the candidate parent: {why}"))
        finally:
            child_job.close()

    def start(self, mounts: list[int], deadline: float) -> None:
        """Hand the run's child (:meth:`begin`) the run's ``mounts`` (work folder, /tmp, channel
        folder, and the channel's listening socket, made by the trusted side) and wait until its
        sandbox is built; raises CandidateParentError otherwise."""
        host_job = self._job
        if host_job is None:
            raise CandidateParentError("no run of the candidate parent was begun")
        send_job(host_job, {"op": "mounts"}, mounts,
                 unreachable=lambda why: CandidateParentError(f"the run's candidate child is gone: {why}"))
        if not _readable(host_job.fileno(), deadline - time.monotonic()):
            raise CandidateParentError("the run's candidate sandbox was not set up in time")
        data = host_job.recv(1 << 16)
        msg: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            msg = json.loads(data) if data else {}
        if msg.get("op") != "ready":
            why = msg.get("message", "no answer")
            raise CandidateParentError(f"the run's candidate sandbox could not be set up: {why}")

    def ask_spare(self) -> None:
        """Have the parent fork its next run's candidate (its init in fresh namespaces and its
        server, both waiting for their run) now, off that run's path. Only between runs, once
        the worker's cgroup was found clean: a spare is the next run's, never a process of
        another run (the host's sweep after a run that did not use it kills it; the parent then
        forks that run's child itself). Best effort; the lever ``candidate-spare``."""
        if self.ctl is not None and self.alive and lever_on("candidate-spare"):
            with contextlib.suppress(OSError):
                self.ctl.send(b'{"op": "spare"}')

    def finish(self, timeout: float = EXIT_GRACE) -> None:
        """After the run's processes were killed: the parent must report its child's end."""
        job, self._job = self._job, None
        self.last_spared = False
        if job is None:
            return
        job.close()
        if self.ctl is None or not _readable(self.ctl.fileno(), timeout):
            raise CandidateParentError("the candidate parent did not report its run's end")
        msg = self._recv()
        if msg.get("op") != "exit" or msg.get("id") != self._job_id:
            raise CandidateParentError(f"unexpected message from the candidate parent: {msg!r:.200}")
        self.last_spared = msg.get("spare") is True

    def close(self) -> None:
        if self._job is not None:
            self._job.close()
            self._job = None
        stop_sandbox(self.ctl, self.proc)
        shutil.rmtree(self.scratch, ignore_errors=True)


class WarmCandidates:
    """The warm candidate side of one trusted worker: its candidate parent (started on the first
    two-process run it can serve), why the worker starts candidates cold instead, and how the
    last run's candidate started (``"warm"``, ``"cold"``, or ``""`` for a run without one).
    ``infra`` arguments are the worker's own processes, kept up to date with the parent's."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.parent: CandidateParent | None = None
        self.off = ""
        self.last = ""

    def parent_for(self, candidate: CandidateProcess | None, cgroup: RunCgroup | None,
                   infra: set[int], submit: Callable[[Callable[[], None]], Any] | None, *,
                   layer: RuntimeLayer | None = None) -> CandidateParent | None:
        """The parent that serves this run's candidate, in the run's built environment
        (``layer``) where it has one; None where it starts cold (not the Python server,
        switched off, or no parent can be had: never a score, it starts cold)."""
        self.last = "" if candidate is None else "cold"
        if candidate is None or cgroup is None or submit is None or tuple(candidate.command) != PYTHON_SERVER_COMMAND \
                or self.off or os.environ.get(WARM_CANDIDATE_ENV, "1") == "0":
            return None
        if self.parent is not None and self.parent.serves(candidate.env, layer):
            return self.parent
        self.drop(infra)
        try:
            self.parent = open_candidate_parent(cgroup, self.scratch, candidate.env, set(infra), submit, layer)
        except CandidateParentError as e:
            self.off = f"the warm candidate parent could not start: {e}"
            return None
        infra |= self.parent.pids
        return self.parent

    def drop(self, infra: set[int]) -> None:
        parent, self.parent = self.parent, None
        if parent is not None:
            parent.close()
            infra -= parent.pids

    def begin(self, parent: CandidateParent, job_id: str, *, cpu_seconds: int, file_bytes: int,
              extra_env: Mapping[str, str], out_fd: int, err_fd: int, infra: set[int],
              held: Sequence[str] = (), protected: Sequence[str] = ()) -> None:
        """Start the run's candidate child (:meth:`CandidateParent.begin`); a parent that cannot
        be reached is dropped and the error raised (the run is re-run cold, never scored)."""
        try:
            parent.begin(job_id, cpu_seconds=cpu_seconds, file_bytes=file_bytes, out_fd=out_fd,
                         err_fd=err_fd, extra_env=extra_env, held=held, protected=protected)
        except CandidateParentError:
            self.drop(infra)
            raise

    def start(self, parent: CandidateParent, *, mounts: list[int], deadline: float,
              infra: set[int]) -> None:
        """Hand the run's exported mounts to its begun child (closed here either way). Where the
        trusted child exported none (the kernel refused), it started the candidate cold itself."""
        try:
            if len(mounts) != HANDOVER_FDS:
                self.off = "the kernel refused to export the run's folders (open_tree)"
                self.drop(infra)
                return
            try:
                parent.start(mounts, deadline)
            except CandidateParentError as e:
                self.drop(infra)
                if "could not be set up" in str(e):
                    self.off = str(e)
                raise
            self.last = "warm"
        finally:
            for fd in mounts:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def ask_spare(self) -> None:
        """After a clean run whose candidate started warm: the parent's spare for the next."""
        if self.parent is not None and self.last == "warm":
            self.parent.ask_spare()

    def finish(self, parent: CandidateParent, infra: set[int]) -> None:
        """After the run: a parent that died or lost track of its run raises (never a score)."""
        try:
            parent.finish()
            if not parent.alive:
                raise CandidateParentError("the candidate parent died during the run")
        except CandidateParentError:
            self.drop(infra)
            raise


def open_candidate_parent(cgroup: RunCgroup, scratch: Path, extra_env: Mapping[str, str],
                          infra: set[int], submit: Callable[[Callable[[], None]], Any],
                          layer: RuntimeLayer | None = None) -> CandidateParent:
    """Start a parent in ``cgroup`` (``infra``: its processes so far) through ``submit`` (runs a
    function on the pool's spawner thread and waits); raises CandidateParentError."""
    parent = CandidateParent(cgroup, scratch, extra_env, layer)
    try:
        submit(parent.spawn)
        parent.await_ready(infra)
    except (CandidateParentError, OSError, ValueError, RuntimeError) as e:
        parent.close()
        raise CandidateParentError(str(e)) from e
    return parent


__all__ = ["PYTHON_SERVER_COMMAND", "WARM_CANDIDATE_ENV", "CandidateParent", "CandidateParentError",
           "WarmCandidates", "candidate_env", "cold_candidate_argv", "open_candidate_parent"]
