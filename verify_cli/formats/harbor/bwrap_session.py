"""An agent's session in a Harbor task's environment on bwrap: a private writable root over the
task image's exported root file system (:mod:`verify_cli.sandbox.bwrap.writable_root`), kept for
the episode, each command a sandbox over it (:meth:`.bwrap.BwrapTrials.run_in_root`: the task's
workdir, the agent's user or the image's, its memory, no network).

What a command writes anywhere in the root stays for the next one, as in a container; what it
starts ends with it (the session contract of every backend; Harbor's docker session keeps it
running: :mod:`.session`). Files are read, written and listed through commands in the root (the
image's ``cat``, ``cp``, GNU ``find``). The work the grade gets is the workdir's changes, read on
the host from the root (:meth:`snapshot`), and graded by the isolated verifier in a fresh root.
"""

from __future__ import annotations

import posixpath
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from pathlib import Path

from verify_cli.formats.harbor.bwrap import BwrapTrials
from verify_cli.formats.harbor.spec import HarborSpec
from verify_cli.formats.harbor.verifier import MAX_WORK_BYTES, TrialInfraError, admit
from verify_cli.sandbox.base import RunResult, Verdict
from verify_cli.sandbox.bwrap.writable_root import TooMuchWork, WritableRoot
from verify_cli.sandbox.plumbing.captured import CapturedOutput
from verify_cli.sandbox.sessions.base import (
    ExecResult,
    ExecVerdict,
    FileEntry,
    Session,
    SessionFileError,
    SessionInfraError,
    SessionLimits,
    SessionState,
)
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import glob_matches

_VERDICTS = {Verdict.OK: ExecVerdict.OK, Verdict.NONZERO_EXIT: ExecVerdict.NONZERO_EXIT,
             Verdict.TIMEOUT: ExecVerdict.TIMEOUT, Verdict.MEMORY_LIMIT: ExecVerdict.MEMORY_LIMIT,
             Verdict.OUTPUT_LIMIT: ExecVerdict.OUTPUT_LIMIT, Verdict.SIGNAL: ExecVerdict.SIGNAL}
#: Where a file being written is bound for the command that puts it in place.
_WRITE_MOUNT = "/.verify-write"
#: Exit status of the file commands for "not a regular file" (a link, a folder, nothing).
_NOT_A_FILE = 3


def _kept(out: CapturedOutput, limit: int) -> CapturedOutput:
    """``out`` kept as a head and a tail of half ``limit`` each (the session's output_bytes)."""
    if out.total_bytes <= limit and not out.truncated:
        return out
    half = max(limit // 2, 1)
    tail = out.tail if out.truncated else (out.head + out.tail)
    return CapturedOutput(out.head[:half], tail[-half:], out.total_bytes, True)


class HarborBwrapSession(Session):
    """One episode's writable root. Open with :meth:`open`; one call at a time."""

    backend = "bwrap"

    def __init__(self, trials: BwrapTrials, root: WritableRoot, lower: Path, spec: HarborSpec, scratch: Path,
                 limits: SessionLimits) -> None:
        self.trials = trials
        self.root = root
        self.lower = lower
        self.spec = spec
        self.scratch = scratch
        self.limits = limits
        self.workdir = spec.workdir
        self._state = SessionState.OPEN
        self._lock = threading.Lock()
        #: When the task's ``[agent] timeout_sec`` is spent (monotonic), or None, as on docker.
        self.deadline = time.monotonic() + spec.agent_timeout_sec if spec.agent_timeout_sec else None

    @classmethod
    def open(cls, task: Task, lower: str, limits: SessionLimits, trials: BwrapTrials | None = None
             ) -> HarborBwrapSession:
        """A writable root over ``lower`` (the task image's exported root) for ``task``
        (SessionInfraError where it cannot be made, or the task's healthcheck never passes)."""
        spec = task.harbor
        if spec is None:
            raise SessionInfraError(f"{task.id} is not a Harbor task")
        trials = trials or BwrapTrials()
        if not Path(lower).is_dir():
            raise SessionInfraError(f"the exported root file system {lower} is gone")
        scratch = Path(tempfile.mkdtemp(prefix="verify-harbor-session-"))  # on disk, as a trial's
        root: WritableRoot | None = None
        try:
            root = WritableRoot(lower, parent=str(scratch), force_copy=trials.force_copy)
            trials.healthy(root, Path(lower), spec, scratch)
        except (TrialInfraError, OSError) as e:
            if root is not None:
                root.close()
            shutil.rmtree(scratch, ignore_errors=True)
            raise SessionInfraError(f"the session's root: {e}") from None
        return cls(trials, root, Path(lower), spec, scratch, limits)

    @property
    def state(self) -> SessionState:
        return self._state

    def _path(self, path: str) -> str:
        return posixpath.normpath(path if path.startswith("/") else posixpath.join(self.workdir, path))

    def _command(self, script: str, args: Sequence[str], *, wall: float, stdin: bytes | None = None,
                 env: Mapping[str, str] | None = None, binds: Sequence[tuple[str, str, bool]] = (),
                 output_bytes: int | None = None) -> RunResult:
        user = self.trials.user(self.lower, self.spec.agent_user)
        return self.trials.run_in_root(
            self.root, self.lower, self.spec, script, args=args, user=user, env=dict(env or {}), wall=wall,
            binds=binds, scratch=self.scratch, stdin=stdin, output_bytes=output_bytes or self.limits.max_output_bytes)

    def exec(self, command: str | Sequence[str], *, timeout: float | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             cwd: str | None = None, output_bytes: int | None = None) -> ExecResult:
        with self._lock:
            if self._state is not SessionState.OPEN:
                return ExecResult(ExecVerdict.SESSION_DEAD, message=f"the session is {self._state.value}")
            argv = ["bash", "-c", command] if isinstance(command, str) else list(command)
            limit = timeout or self.limits.command_seconds
            if self.deadline is not None:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    return ExecResult(ExecVerdict.TIMEOUT, message=(
                        f"the task's agent timeout ({self.spec.agent_timeout_sec:g}s) is spent: submit"))
                limit = min(limit, left)
            try:
                run = self._command('cd -- "$1" || exit 125\nshift\nexec "$@"', [self._path(cwd or "."), *argv],
                                    wall=limit, stdin=stdin, env=env)
            except TrialInfraError as e:
                self._state = SessionState.BROKEN
                return ExecResult(ExecVerdict.INFRA_ERROR, message=str(e))
            keep = output_bytes or self.limits.output_bytes
            verdict = _VERDICTS.get(run.verdict, ExecVerdict.NONZERO_EXIT)
            message = f"the command ran past {limit:g}s" if verdict is ExecVerdict.TIMEOUT else run.message
            return ExecResult(verdict, exit_code=run.exit_code, signal=run.signal, stdout=_kept(run.stdout, keep),
                              stderr=_kept(run.stderr, keep), wall_seconds=run.wall_seconds,
                              cpu_seconds=run.cpu_seconds, message=message)

    def _file_command(self, path: str, script: str, *, what: str, max_bytes: int = 1 << 20,
                      binds: Sequence[tuple[str, str, bool]] = (), extra: Sequence[str] = ()) -> bytes:
        full = self._path(path)
        with self._lock:
            if self._state is not SessionState.OPEN:
                raise SessionFileError(f"the session is {self._state.value}", path=path)
            try:
                run = self._command(script, [full, *extra], wall=self.limits.command_seconds, binds=binds,
                                    output_bytes=2 * max_bytes + 2)
            except TrialInfraError as e:
                self._state = SessionState.BROKEN
                raise SessionFileError(f"cannot {what} {path}: {e}", path=path) from None
        if run.verdict is Verdict.OUTPUT_LIMIT or run.stdout.total_bytes > max_bytes:
            raise SessionFileError(f"{path} holds more than {max_bytes} bytes", path=path)
        if run.exit_code == _NOT_A_FILE:
            raise SessionFileError(f"{path} is not a file", path=path)
        if run.verdict is not Verdict.OK:
            cause = (run.stderr.head + run.stderr.tail).decode("utf-8", "replace").strip()[-200:]
            raise SessionFileError(f"cannot {what} {path}: {cause or run.message}", path=path)
        return run.stdout.head + run.stdout.tail

    def read_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        return self._file_command(path, f'[ -f "$1" ] && [ ! -L "$1" ] || exit {_NOT_A_FILE}\nexec cat -- "$1"',
                                  what="read", max_bytes=max_bytes)

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        raw = data.encode() if isinstance(data, str) else data
        with tempfile.NamedTemporaryFile(dir=self.scratch, prefix="write-") as fh:
            fh.write(raw)
            fh.flush()
            self._file_command(path, 'mkdir -p -- "$(dirname -- "$1")" && rm -f -- "$1" && '
                               f'cp -- {_WRITE_MOUNT} "$1" && chmod "$2" "$1"', what="write",
                               binds=[(fh.name, _WRITE_MOUNT, False)], extra=[f"{mode & 0o7777:o}"])

    def list_files(self, path: str = ".", *, recursive: bool = True, max_entries: int = 10000) -> list[FileEntry]:
        depth = "" if recursive else "-maxdepth 1 "
        raw = self._file_command(path, f'[ -d "$1" ] || exit {_NOT_A_FILE}\n'
                                 f'exec find "$1" -mindepth 1 {depth}-printf "%y %s %P\\0"',
                                 what="list", max_bytes=64 << 20)
        kinds = {"f": "file", "d": "dir", "l": "link"}
        out: list[FileEntry] = []
        for item in raw.split(b"\0"):
            kind, _, rest = item.decode("utf-8", "replace").partition(" ")
            size, _, rel = rest.partition(" ")
            if not rel:
                continue
            out.append(FileEntry(rel, kinds.get(kind, "other"), int(size) if size.isdigit() else 0))
            if len(out) >= max_entries:
                break
        return sorted(out, key=lambda e: e.path)

    def snapshot(self, globs: Sequence[str] = ("**",), *, max_bytes: int = 64 * 1024 * 1024) -> dict[str, bytes]:
        """The workdir's changes (added or changed regular files), read from the root on the
        host, as the verifier gets them."""
        with self._lock:
            try:
                changes = self.root.changes(self.workdir, max_bytes=min(max_bytes, MAX_WORK_BYTES))
            except TooMuchWork:
                raise SessionFileError(f"the work holds more than {max_bytes} bytes", path=self.workdir) from None
            except OSError as e:
                raise SessionFileError(f"cannot read the work: {e}", path=self.workdir) from None
        files, _ = admit(changes.files)
        return {rel: data for rel, data in files.items() if any(glob_matches(g, rel) for g in globs)}

    def close(self) -> None:
        with self._lock:
            if self._state is SessionState.CLOSED:
                return
            self._state = SessionState.CLOSED
            with suppress(Exception):
                self.root.close()
            shutil.rmtree(self.scratch, ignore_errors=True)


__all__ = ["HarborBwrapSession"]
