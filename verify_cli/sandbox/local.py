"""Machinery shared by the local backends (process, bwrap): spawn, limit, stream, kill, judge."""

from __future__ import annotations

import contextlib
import io
import os
import resource
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from verify_cli.sandbox.base import (
    CANCELLED_MESSAGE,
    MAX_RESULT_FILE_BYTES,
    Limits,
    RunResult,
    RunSpec,
    Sandbox,
    Verdict,
)
from verify_cli.sandbox.environment import compile_harness
from verify_cli.sandbox.plumbing.captured import CapturedOutput
from verify_cli.sandbox.plumbing.cgroup import RunCgroup, cgroup_manager
from verify_cli.sandbox.plumbing.judging import out_of_memory, read_results_tar, signal_verdict
from verify_cli.sandbox.plumbing.output import BoundedCapture, start_drain
from verify_cli.sandbox.plumbing.trusted_launch import SEAL_KEY_ENV, seal_key_pipe


@dataclass(frozen=True)
class Prepared:
    """How a local backend launches one run."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    results_dir: Path
    #: Exit statuses above 128 mean "killed by signal status-128" (bwrap reports deaths so).
    signal_from_status: bool = False
    #: (read end, write end) of a pipe on which the command's wrapper writes a tar archive of the
    #: results folder once the command ended, instead of the runner reading ``results_dir``. The
    #: runner passes the write end to the child as descriptor :data:`RESULTS_FD` (the child holds
    #: no other descriptor above 2: the wrapper closes it for every command it starts) and owns
    #: both ends from the moment it is handed one.
    results_pipe: tuple[int, int] | None = None
    #: The most bytes of that archive the runner reads; more ends the run as ``output_limit``.
    results_archive_limit: int = 0
    #: The read end of the seal key's pipe (trusted_launch.seal_key_pipe), the command's stdin
    #: (its wrapper moves it to the key's descriptor); the runner owns it once handed it.
    key_stdin: int | None = None
    #: The bytes the results archive starts with where every stage of the sandbox began (one
    #: byte a stage, written by the stage itself once it runs, before anything the command
    #: controls): missing ones mean the sandbox did not start, an ``infra_error`` whatever the
    #: exit status says (:func:`not_started`). Empty: the runner knows no stages.
    start_markers: bytes = b""
    #: What each marker's stage is, for the message of a run that did not start.
    start_stages: tuple[str, ...] = ()


def key_stdin_of(spec: RunSpec, env: dict[str, str]) -> int | None:
    """The seal key's pipe for a local run's wrapper (the key taken out of ``env``), which gets
    it as its stdin (:mod:`verify_cli.sandbox.plumbing.trusted_launch`: the key is in no environment)."""
    if spec.stdin is not None and SEAL_KEY_ENV in env:
        raise OSError("a run with its own stdin cannot be handed a seal key")
    return seal_key_pipe(env)


#: The descriptor a run's wrapper finds the results pipe's write end on (one digit: a POSIX
#: shell's redirections name no other), whatever its number in this process; the wrapper keeps
#: it from every command it starts (``RESULTS_FD>&-``), the candidate's above all.
RESULTS_FD = 8


def _hand_over_results_pipe(write_end: int) -> None:
    """In the child, between fork and exec: the results pipe's write end on :data:`RESULTS_FD`
    and every other inheritable descriptor above 2 closed (the close-on-exec ones go at exec;
    Popen's own error pipe is one), so nothing of this process's reaches the run."""
    if write_end == RESULTS_FD:
        os.set_inheritable(RESULTS_FD, True)
    else:
        os.dup2(write_end, RESULTS_FD)  # inheritable
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # no /proc: close them all (an exec failure then reads as exit status 255)
        os.closerange(3, RESULTS_FD)
        os.closerange(RESULTS_FD + 1, 1 << 16)
        return
    for name in names:
        fd = int(name)
        if fd <= 2 or fd == RESULTS_FD:
            continue
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            if os.get_inheritable(fd):
                os.close(fd)


def _child_setup(limits: Limits, cgroup: RunCgroup | None, results_write_end: int | None = None
                 ) -> Callable[[], None]:
    """The function the child runs between fork and exec: join the cgroup, set rlimits, and
    (``results_write_end``) move the results pipe to :data:`RESULTS_FD`."""
    cpu = int(limits.cpu_seconds if limits.cpu_seconds is not None else limits.wall_seconds) + 1
    mem = limits.memory_mb * 1024 * 1024
    nproc = limits.processes
    fsize = limits.file_bytes

    def setup() -> None:
        if cgroup is not None:
            cgroup.join_self()
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if cgroup is None:
            # Fallbacks: per-process data size and the user's process count.
            resource.setrlimit(resource.RLIMIT_DATA, (mem, mem))
            if os.getuid() != 0:
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if results_write_end is not None:
            _hand_over_results_pipe(results_write_end)

    return setup


def read_results_archive(data: bytes) -> dict[str, bytes]:
    """Regular files of a tar archive (links, devices and odd names refused), as read_results."""
    return read_results_tar(io.BytesIO(data), stream=False)


def _read_bounded(fd: int, limit: int, sink: bytearray, on_exceed: Callable[[], None]) -> None:
    """Read ``fd`` to EOF into ``sink``; past ``limit`` bytes, call ``on_exceed`` and stop.

    Closes ``fd``.
    """
    try:
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                return
            if not data:
                return
            if len(sink) + len(data) > limit:
                on_exceed()
                return
            sink += data
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)


#: Most files taken from one run's results folder.
RESULTS_MAX_FILES = 4096


def read_results_dir(dir_fd: int) -> dict[str, bytes]:
    """Regular files under an open directory (links never followed), each at most
    MAX_RESULT_FILE_BYTES, at most RESULTS_MAX_FILES of them."""
    out: dict[str, bytes] = {}
    seen = 0
    for top, _dirs, files, top_fd in os.fwalk(".", dir_fd=dir_fd, follow_symlinks=False):
        for name in files:
            seen += 1
            if seen > RESULTS_MAX_FILES:
                return out
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=top_fd)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RESULT_FILE_BYTES:
                    continue
                with os.fdopen(fd, "rb", closefd=False) as fh:
                    out[os.path.normpath(os.path.join(top, name))] = fh.read(MAX_RESULT_FILE_BYTES)
            finally:
                os.close(fd)
    return out


def read_results(folder: Path) -> dict[str, bytes]:
    """Regular files under ``folder``, as :func:`read_results_dir`."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return {}
    try:
        return read_results_dir(dir_fd)
    finally:
        os.close(dir_fd)


class LocalSandbox(Sandbox):
    """Base of backends that run a host process (optionally wrapped, e.g. by bwrap)."""

    def prepare(self, spec: RunSpec, scratch: Path) -> Prepared:  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self, spec: RunSpec) -> RunResult:
        start = time.monotonic()
        compile_harness()
        try:
            scratch = Path(tempfile.mkdtemp(prefix="verify-run-"))
        except OSError as e:
            return RunResult(Verdict.INFRA_ERROR, self.name,
                             message=f"cannot create a scratch folder: {e}")
        try:
            return self._run(spec, scratch, start)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _run(self, spec: RunSpec, scratch: Path, start: float) -> RunResult:
        limits = spec.limits
        if spec.cancel is not None and spec.cancel.is_set():
            return RunResult(Verdict.INFRA_ERROR, self.name, message=CANCELLED_MESSAGE)
        try:
            prepared = self.prepare(spec, scratch)
        except OSError as e:
            return RunResult(Verdict.SETUP_ERROR, self.name, message=f"cannot prepare the run: {e}")
        manager = cgroup_manager()
        cgroup: RunCgroup | None = None
        if manager.available:
            try:
                cgroup = manager.create(memory_bytes=limits.memory_mb * 1024 * 1024,
                                        max_pids=limits.processes + 4)
            except OSError:
                cgroup = None
        stop = threading.Event()
        reason: dict[str, Verdict] = {}

        def on_flood() -> None:
            reason.setdefault("why", Verdict.OUTPUT_LIMIT)
            stop.set()

        out_cap = BoundedCapture(limits.output_bytes, on_flood)
        err_cap = BoundedCapture(limits.output_bytes, on_flood)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        archive_fds = list(prepared.results_pipe or ())
        try:
            proc = subprocess.Popen(
                prepared.argv,
                stdin=(prepared.key_stdin if prepared.key_stdin is not None
                       else subprocess.PIPE if spec.stdin is not None else subprocess.DEVNULL),
                stdout=out_w, stderr=err_w, env=prepared.env, cwd=prepared.cwd,
                # With a results pipe the child closes what it must not hold itself (a
                # passed descriptor keeps its number, and the wrapper names it by one digit).
                start_new_session=True, close_fds=not archive_fds,
                preexec_fn=_child_setup(limits, cgroup, archive_fds[1] if archive_fds else None))
        except OSError as e:
            for fd in (out_r, out_w, err_r, err_w, *archive_fds):
                os.close(fd)
            if prepared.key_stdin is not None:
                os.close(prepared.key_stdin)
            if cgroup:
                cgroup.remove()
            return RunResult(Verdict.SETUP_ERROR, self.name,
                             message=f"cannot start {prepared.argv[0]!r}: {e}")
        os.close(out_w)
        os.close(err_w)
        if prepared.key_stdin is not None:
            os.close(prepared.key_stdin)  # the run's wrapper holds it now
        drains = [start_drain(out_r, out_cap), start_drain(err_r, err_cap)]
        archive = bytearray()
        if archive_fds:
            os.close(archive_fds[1])
            drains.append(threading.Thread(
                target=_read_bounded, args=(archive_fds[0], prepared.results_archive_limit, archive,
                                            on_flood), daemon=True, name="sandbox-results"))
            drains[-1].start()
        if spec.stdin is not None and proc.stdin is not None:
            threading.Thread(target=_feed_stdin, args=(proc.stdin, spec.stdin), daemon=True).start()

        status: dict[str, object] = {}

        def waiter() -> None:
            _, st, usage = os.wait4(proc.pid, 0)
            status["status"] = st
            status["cpu"] = usage.ru_utime + usage.ru_stime
            stop.set()

        threading.Thread(target=waiter, daemon=True, name="sandbox-wait").start()

        def on_cancel() -> None:
            reason.setdefault("why", Verdict.INFRA_ERROR)
            stop.set()

        unsubscribe = spec.cancel.subscribe(on_cancel) if spec.cancel is not None else None
        if not stop.wait(limits.wall_seconds):
            reason.setdefault("why", Verdict.TIMEOUT)
        if unsubscribe is not None:
            unsubscribe()
        wall = time.monotonic() - start
        # Whatever happened, nothing of the run may outlive it.
        self._kill_tree(proc.pid, cgroup)
        deadline = time.monotonic() + 5
        while "status" not in status and time.monotonic() < deadline:
            time.sleep(0.005)
        for t in drains:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        oom = cgroup.oom_killed() if cgroup else False
        if cgroup:
            cgroup.remove()
        proc.returncode = 0  # reaped by wait4 above; keep Popen from waiting again
        if prepared.start_markers:
            missing = not_started(prepared, bytes(archive[:len(prepared.start_markers)]))
            if missing is not None:
                return RunResult(Verdict.INFRA_ERROR, self.name, exit_code=_exit_status(status),
                                 wall_seconds=wall, stdout=out_cap.result(), stderr=err_cap.result(),
                                 message=f"{missing}: {sandbox_failure_cause(err_cap.result())}")
            del archive[:len(prepared.start_markers)]
        if archive_fds:
            flooded = reason.get("why") is Verdict.OUTPUT_LIMIT
            results = {} if flooded else read_results_archive(bytes(archive))
        else:
            results = read_results(prepared.results_dir)
        return self._judge(prepared, status, reason.get("why"), oom, wall, out_cap, err_cap,
                           results)

    def _kill_tree(self, pid: int, cgroup: RunCgroup | None) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if cgroup is not None:
            cgroup.kill_all()

    def _judge(self, prepared: Prepared, status: Mapping[str, object], why: Verdict | None,
               oom: bool, wall: float, out_cap: BoundedCapture, err_cap: BoundedCapture,
               results: dict[str, bytes]) -> RunResult:
        raw = status.get("status")
        exit_code: int | None = None
        sig: int | None = None
        if isinstance(raw, int):
            if os.WIFSIGNALED(raw):
                sig = os.WTERMSIG(raw)
            elif os.WIFEXITED(raw):
                exit_code = os.WEXITSTATUS(raw)
                if prepared.signal_from_status and exit_code > 128 and exit_code - 128 < 65:
                    sig = exit_code - 128
        stderr = err_cap.result()
        stdout = out_cap.result()
        message = ""
        if why is not None:
            verdict = why
            message = ("exceeded the wall-clock limit" if why is Verdict.TIMEOUT
                       else CANCELLED_MESSAGE if why is Verdict.INFRA_ERROR
                       else "exceeded the output limit; the run was stopped")
        elif oom:
            verdict = Verdict.MEMORY_LIMIT
            message = "killed by the kernel's OOM killer (memory limit)"
        elif sig is not None:
            verdict, message = signal_verdict(sig)
        elif exit_code not in (0, None) and out_of_memory(stderr.head, stderr.tail):
            verdict, message = Verdict.MEMORY_LIMIT, "ran out of memory under the memory limit"
        elif exit_code == 0:
            verdict = Verdict.OK
        elif exit_code is None:
            verdict, message = Verdict.INFRA_ERROR, "lost track of the process"
        else:
            verdict = Verdict.NONZERO_EXIT
        return RunResult(verdict=verdict, backend=self.name, exit_code=exit_code, signal=sig,
                         wall_seconds=wall, cpu_seconds=float(status.get("cpu", 0.0) or 0.0),  # type: ignore[arg-type]
                         stdout=stdout, stderr=stderr, results=results, message=message)


def not_started(prepared: Prepared, head: bytes) -> str | None:
    """Which stage of a run's sandbox did not start (``head``: the first bytes of its results
    archive), as the first words of an ``infra_error`` message, or None when every one did."""
    markers = prepared.start_markers
    if head == markers:
        return None
    stage = next((i for i, (got, want) in enumerate(zip(head, markers, strict=False)) if got != want),
                 len(head))
    # What follows the last marker (the results archive, or nothing) says stage ``stage`` never
    # wrote its own: it did not start.
    names = prepared.start_stages
    what = names[stage] if stage < len(names) else f"stage {stage + 1} of the sandbox"
    return f"the sandbox did not start ({what} never began)"


#: Lines of a run's stderr that name the sandbox machinery's own failure, newest kept.
_CAUSE_PREFIXES = (b"bwrap:", b"verify_no_links:", b"sh:", b"cp:", b"tar:")


def sandbox_failure_cause(stderr: CapturedOutput) -> str:
    """The sandbox machinery's own words on why a run did not start (bwrap's ``Creating new
    namespace failed: ...``), from the run's stderr (a :class:`CapturedOutput`)."""
    lines = [ln.strip() for ln in (stderr.head + b"\n" + stderr.tail).splitlines() if ln.strip()]
    ours = [ln for ln in lines if ln.startswith(_CAUSE_PREFIXES)]
    chosen = ours or lines[-3:]
    seen: list[bytes] = []
    for ln in chosen:
        if ln not in seen:
            seen.append(ln)
    text = "; ".join(ln.decode("utf-8", "replace") for ln in seen[-3:])
    return text[:600] or "no error output"


def _exit_status(status: Mapping[str, object]) -> int | None:
    raw = status.get("status")
    if isinstance(raw, int) and os.WIFEXITED(raw):
        return os.WEXITSTATUS(raw)
    return None


def _feed_stdin(pipe: object, data: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):
        pipe.write(data)  # type: ignore[attr-defined]
        pipe.close()  # type: ignore[attr-defined]

