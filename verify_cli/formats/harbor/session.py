"""An agent's session in a Harbor task's environment: a container of the task's image, as
Harbor opens one (its working directory, the agent's user, its memory and CPUs; no network).

As in Harbor, what the agent starts keeps running between its commands (a service it brings up
stays up). Its work is the working directory's changes (docker's own record of the container):
that is what :meth:`HarborSession.snapshot` hands to the grade, which runs the verifier in a
fresh container (:mod:`~verify_cli.formats.harbor.verifier`), never in this one.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress

from verify_cli.formats.harbor.spec import HarborSpec
from verify_cli.formats.harbor.verifier import HarborTrials, TrialInfraError, _Exec, _tar, captured
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


class HarborSession(Session):
    """One episode's container. Open with :meth:`open`; thread-safe enough for one agent."""

    backend = "docker"

    def __init__(self, trials: HarborTrials, container_id: str, spec: HarborSpec, limits: SessionLimits) -> None:
        self.trials = trials
        self.container_id = container_id
        self.spec = spec
        self.limits = limits
        self.workdir = spec.workdir
        self._state = SessionState.OPEN
        self._lock = threading.Lock()
        #: When the task's ``[agent] timeout_sec`` is spent (monotonic), or None: commands are then
        #: refused with a timeout and the work so far is what gets graded, as in Harbor.
        self.deadline = time.monotonic() + spec.agent_timeout_sec if spec.agent_timeout_sec else None

    @classmethod
    def open(cls, task: Task, image: str, limits: SessionLimits, trials: HarborTrials | None = None) -> HarborSession:
        """A running container of ``image`` for ``task`` (SessionInfraError when docker fails,
        or the task's healthcheck never passes)."""
        spec = task.harbor
        if spec is None:
            raise SessionInfraError(f"{task.id} is not a Harbor task")
        trials = trials or HarborTrials()
        try:
            cid = trials._create(image, spec, ["/bin/sh", "-c", "exec sleep infinity"], user=spec.agent_user,
                                 phase="session")
            trials.client.api.start(cid)
            trials._healthy(cid, spec)
        except TrialInfraError as e:
            raise SessionInfraError(str(e)) from None
        except Exception as e:
            raise SessionInfraError(f"the session's container did not start: {type(e).__name__}: {e}") from None
        return cls(trials, cid, spec, limits)

    @property
    def state(self) -> SessionState:
        return self._state

    def _path(self, path: str) -> str:
        return posixpath.normpath(path if path.startswith("/") else posixpath.join(self.workdir, path))

    def exec(self, command: str | Sequence[str], *, timeout: float | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             cwd: str | None = None, output_bytes: int | None = None) -> ExecResult:
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
        started = time.monotonic()
        try:
            ex = _Exec(self.trials.client.api, self.container_id, argv, user=self.spec.agent_user,
                       workdir=self._path(cwd or "."), env=dict(env or {}))
            code, done = ex.run(limit)
        except Exception as e:
            self._state = SessionState.BROKEN
            return ExecResult(ExecVerdict.INFRA_ERROR, message=f"{type(e).__name__}: {e}")
        wall = time.monotonic() - started
        if not done:
            return ExecResult(ExecVerdict.TIMEOUT, wall_seconds=wall, message=f"the command ran past {limit:g}s")
        verdict = ExecVerdict.OK if code == 0 else ExecVerdict.NONZERO_EXIT
        return ExecResult(verdict, exit_code=code, stdout=captured(ex.output), wall_seconds=wall)

    def _archive(self, path: str) -> tarfile.TarFile:
        try:
            stream, _ = self.trials.client.api.get_archive(self.container_id, path)
        except Exception as e:
            raise SessionFileError(f"cannot read {path}: {e}", path=path) from None
        return tarfile.open(fileobj=io.BytesIO(b"".join(stream)), mode="r")

    def read_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        full = self._path(path)
        with self._archive(full) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise SessionFileError(f"{path} is not a file", path=path)
            if member.size > max_bytes:
                raise SessionFileError(f"{path} holds more than {max_bytes} bytes", path=path)
            fh = tar.extractfile(member)
            return fh.read() if fh is not None else b""

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        full = self._path(path)
        raw = data.encode() if isinstance(data, str) else data
        folder, name = posixpath.split(full)
        made = self.exec(["mkdir", "-p", folder])
        if not made.ok:
            raise SessionFileError(f"cannot make {folder}", path=path)
        try:
            self.trials.client.api.put_archive(self.container_id, folder, _tar({name: raw}, mode))
        except Exception as e:
            raise SessionFileError(f"cannot write {path}: {e}", path=path) from None

    def list_files(self, path: str = ".", *, recursive: bool = True, max_entries: int = 10000) -> list[FileEntry]:
        full = self._path(path)
        top = posixpath.basename(full.rstrip("/"))
        out: list[FileEntry] = []
        with self._archive(full) as tar:
            for member in tar:
                rel = member.name[len(top) + 1:] if member.name.startswith(top + "/") else ""
                if not rel or (not recursive and "/" in rel):
                    continue
                kind = "file" if member.isfile() else "dir" if member.isdir() else \
                    "link" if member.issym() or member.islnk() else "other"
                out.append(FileEntry(rel, kind, member.size))
                if len(out) >= max_entries:
                    break
        return sorted(out, key=lambda e: e.path)

    def snapshot(self, globs: Sequence[str] = ("**",), *, max_bytes: int = 64 * 1024 * 1024) -> dict[str, bytes]:
        """The working directory's changes (added or changed regular files), as the verifier
        gets them."""
        try:
            files, _, _ = self.trials._workdir_changes(self.container_id, self.workdir)
        except TrialInfraError as e:
            raise SessionFileError(str(e), path=self.workdir) from None
        taken = {rel: data for rel, data in files.items() if any(glob_matches(g, rel) for g in globs)}
        if sum(len(d) for d in taken.values()) > max_bytes:
            raise SessionFileError(f"the work holds more than {max_bytes} bytes", path=self.workdir)
        return taken

    def close(self) -> None:
        with self._lock:
            if self._state is SessionState.CLOSED:
                return
            self._state = SessionState.CLOSED
        with suppress(Exception):
            self.trials.client.api.remove_container(self.container_id, force=True)


def open_harbor_session(task: Task, image: str, limits: SessionLimits) -> HarborSession:
    """:meth:`HarborSession.open` with the task's own agent timeout as each command's bound."""
    return HarborSession.open(task, image, limits)


__all__ = ["HarborSession", "open_harbor_session"]
