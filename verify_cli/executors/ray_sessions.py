"""Sessions on a Ray cluster: each held by one node's sandbox-pool actor, driven from the driver.

A session lives on one node, inside the sandbox of that node's
:class:`~verify_cli.executors.ray_pool.SandboxPool` actor (:class:`SessionHost` is the part of
the actor that holds them). On the driver, :class:`RaySession` is a thin proxy: each call is one
actor call, awaited with ``ray.get`` under a timeout (the command's own limit plus
:data:`CALL_MARGIN`), so a session's state stays where its commands run.

The session's faults travel as values, never as Ray's wrapped exceptions: a file call that
fails, a session the agent killed (``session_dead``: a graded failure) come back as the same
typed errors a local session raises. Only the actor or its node going away (killed, the node
lost, no answer within the timeout) is the machinery failing: the session is then *broken*,
``exec`` answers :attr:`ExecVerdict.INFRA_ERROR` and the other calls raise
:class:`SessionInfraError`, never scored. The node is struck as for a failed grade run, and a
dead actor on a live node is replaced (for the sessions opened after).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verify_cli.sandbox.sessions.base import (
    ExecResult,
    ExecVerdict,
    FileEntry,
    Session,
    SessionDeadError,
    SessionError,
    SessionFileError,
    SessionInfraError,
    SessionLimits,
    SessionState,
    SessionsUnsupportedError,
    Workspace,
    in_session_thread,
)

if TYPE_CHECKING:
    from verify_cli.sandbox.base import Sandbox

#: Seconds a session call may take beyond its command's own limit before its node counts as lost.
CALL_MARGIN = 60.0
#: Seconds opening a session (building its sandbox, an image's first start) may take.
OPEN_TIMEOUT = 300.0
#: Seconds a file call, a look at the state or a close may take.
FILE_TIMEOUT = 120.0

#: The calls a proxy may make on the session the actor holds.
_CALLS = frozenset({"exec", "read_file", "write_file", "list_files", "snapshot"})

#: A session's error as a value: (kind, message, hint, state, path, errno).
WireError = tuple[str, str, str, str, str, int | None]


def to_wire(error: SessionError) -> WireError:
    state = getattr(error, "state", None)
    return (type(error).__name__, error.message,
            str(getattr(error, "hint", "") or ""), state.value if state is not None else "",
            str(getattr(error, "path", "") or ""), getattr(error, "errno", None))


def from_wire(wire: WireError) -> SessionError:
    """The typed error a local session would have raised (an unknown kind: the base class)."""
    kind, message, hint, state, path, errno = wire
    if kind == "SessionDeadError":
        return SessionDeadError(message, state=SessionState(state or "dead"))
    if kind == "SessionFileError":
        return SessionFileError(message, path=path, errno=errno)
    if kind == "SessionsUnsupportedError":
        return SessionsUnsupportedError(message, hint=hint or None)
    if kind == "SessionInfraError":
        return SessionInfraError(message, hint=hint or None)
    return SessionError(message, hint=hint or None)


def workspace_files(workspace: Workspace) -> Mapping[str, bytes] | None:
    """A workspace as files by relative path (a host folder is read here, on the driver: the
    nodes cannot see it). Links and special files are left out."""
    if workspace is None or not isinstance(workspace, Path):
        return workspace
    return {p.relative_to(workspace).as_posix(): p.read_bytes()
            for p in sorted(workspace.rglob("*")) if p.is_file() and not p.is_symlink()}


class SessionHost:
    """The sessions one actor holds, by id (a mixin of the sandbox-pool actor; ``box`` is its
    sandbox). Every method answers ``("ok", value)`` or ``("error", WireError)``."""

    box: Sandbox
    sessions: dict[str, Session]

    async def open_session(self, workspace: Mapping[str, bytes] | None, limits: SessionLimits,
                           env: Mapping[str, str] | None, image: str | None,
                           labels: Mapping[str, str] | None) -> tuple[str, Any]:
        try:
            session = await in_session_thread(self.box.open_session, workspace, limits, env=env, image=image,
                                              labels=labels)
        except SessionError as e:
            return "error", to_wire(e)
        sid = uuid.uuid4().hex
        self.sessions[sid] = session
        return "ok", (sid, session.backend, session.workdir)

    async def session_call(self, sid: str, name: str, args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> tuple[str, Any]:
        session = self.sessions.get(sid)
        if session is None:
            return "error", to_wire(SessionDeadError("the session was closed", state=SessionState.CLOSED))
        if name not in _CALLS:
            raise ValueError(f"no session call {name!r}")
        try:
            value = await in_session_thread(getattr(session, name), *args, **kwargs)
        except SessionError as e:
            return "error", to_wire(e)
        return "ok", value

    def session_state(self, sid: str) -> str:
        session = self.sessions.get(sid)
        return session.state.value if session is not None else SessionState.CLOSED.value

    async def close_session(self, sid: str) -> None:
        session = self.sessions.pop(sid, None)
        if session is not None:
            await in_session_thread(session.close)

    def open_sessions(self) -> int:
        return len(self.sessions)

    def close_sessions(self) -> None:
        for sid in list(self.sessions):
            session = self.sessions.pop(sid, None)
            if session is not None:
                session.close()


class RaySession(Session):
    """The driver's proxy of a session held by ``actor`` on ``node`` (see the module's
    docstring). ``on_lost(error)`` is told once when the actor or node goes away, ``on_close``
    once when the session ends."""

    def __init__(self, ray: Any, actor: Any, sid: str, *, node: str, backend: str, workdir: str,
                 limits: SessionLimits, on_lost: Callable[[BaseException], None],
                 on_close: Callable[[], None]) -> None:
        self._ray = ray
        self._actor = actor
        self._sid = sid
        self.node = node
        self.backend = backend
        self.workdir = workdir
        self.limits = limits
        self._on_lost = on_lost
        self._on_close = on_close
        self._broken: str | None = None
        self._closed = False
        self._lock = threading.Lock()

    def _lose(self, error: BaseException) -> str:
        from verify_cli.executors.ray_executor import _cause

        first = self._broken is None
        if first:
            self._broken = (f"node {self.node} was lost under the session "
                            f"({type(error).__name__}: {_cause(error)})")
            self._on_lost(error)
        return self._broken or ""

    def _call(self, name: str, *args: Any, wait: float, **kwargs: Any) -> Any:
        with self._lock:
            if self._broken is not None:
                raise SessionInfraError(self._broken)
            if self._closed:
                raise SessionDeadError("the session was closed", state=SessionState.CLOSED)
            try:
                tag, value = self._ray.get(self._actor.session_call.remote(self._sid, name, args, kwargs),
                                           timeout=wait)
            except self._ray.exceptions.RayError as e:
                raise SessionInfraError(self._lose(e)) from None
        if tag == "error":
            raise from_wire(value)
        return value

    @property
    def state(self) -> SessionState:
        if self._broken is not None:
            return SessionState.BROKEN
        if self._closed:
            return SessionState.CLOSED
        try:
            return SessionState(self._ray.get(self._actor.session_state.remote(self._sid), timeout=FILE_TIMEOUT))
        except self._ray.exceptions.RayError as e:
            self._lose(e)
            return SessionState.BROKEN

    def exec(self, command: str | Sequence[str], *, timeout: float | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             cwd: str | None = None, output_bytes: int | None = None) -> ExecResult:
        wait = (timeout or self.limits.command_seconds) + CALL_MARGIN
        try:
            result: ExecResult = self._call("exec", command, wait=wait, timeout=timeout, stdin=stdin,
                                            env=env, cwd=cwd, output_bytes=output_bytes)
        except SessionInfraError as e:
            return ExecResult(ExecVerdict.INFRA_ERROR, message=str(e))
        except SessionDeadError as e:  # pragma: no cover - a local session answers session_dead itself
            return ExecResult(ExecVerdict.SESSION_DEAD, message=str(e))
        return result

    def read_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        data: bytes = self._call("read_file", path, wait=FILE_TIMEOUT, max_bytes=max_bytes)
        return data

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        self._call("write_file", path, data, wait=FILE_TIMEOUT, mode=mode)

    def list_files(self, path: str = ".", *, recursive: bool = True,
                   max_entries: int = 10000) -> list[FileEntry]:
        entries: list[FileEntry] = self._call("list_files", path, wait=FILE_TIMEOUT, recursive=recursive,
                                              max_entries=max_entries)
        return entries

    def snapshot(self, globs: Sequence[str] = ("**",), *,
                 max_bytes: int = 64 * 1024 * 1024) -> dict[str, bytes]:
        files: dict[str, bytes] = self._call("snapshot", list(globs), wait=FILE_TIMEOUT, max_bytes=max_bytes)
        return files

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:  # a broken session too: an actor that stopped answering may still hold it
            self._ray.get(self._actor.close_session.remote(self._sid),
                          timeout=FILE_TIMEOUT if self._broken is None else 30.0)
        except Exception:  # a lost actor has nothing left to close
            pass
        finally:
            self._on_close()


__all__ = ["CALL_MARGIN", "RaySession", "SessionHost", "from_wire", "to_wire", "workspace_files"]
