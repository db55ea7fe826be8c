"""The host side of a session: talks to its exec server, enforces its limits, judges its commands.

Shared by every backend whose session runs ``verify_session_server.py`` (bwrap: as the init of
the session's namespaces; process: as a plain subprocess). The backend hands over the server's
socket, its host pid and the session's cgroup; from then on this module owns them. Nothing the
server says is trusted beyond being an observation: messages are bounded and decoded as plain
data, payloads come on pipes read up to a bound, and every limit is enforced from here (the
command's wall clock and output, the session's cgroup, the server's own liveness).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import shutil
import signal
import socket
import tarfile
import threading
import time
import weakref
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verify_cli.harness.candidate.verify_session_server import glob_regex
from verify_cli.sandbox.plumbing.cgroup import RunCgroup, oom_kills
from verify_cli.sandbox.plumbing.job_send import recv_with_pid as _recv_job
from verify_cli.sandbox.plumbing.job_send import send_job
from verify_cli.sandbox.plumbing.judging import out_of_memory, read_results_tar, signal_verdict
from verify_cli.sandbox.plumbing.killing import kill_all_but
from verify_cli.sandbox.plumbing.output import BoundedCapture
from verify_cli.sandbox.sessions.base import (
    ExecResult,
    ExecVerdict,
    FileEntry,
    Session,
    SessionDeadError,
    SessionFileError,
    SessionInfraError,
    SessionLimits,
    SessionState,
    Snapshot,
    Workspace,
    encode_text,
    session_executor,
)
from verify_cli.sandbox.sessions.steps import Blocking as _Blocking
from verify_cli.sandbox.sessions.steps import SessionLock as _SessionLock
from verify_cli.sandbox.sessions.steps import Step as _Step
from verify_cli.sandbox.sessions.steps import Wait as _Wait
from verify_cli.sandbox.sessions.steps import drive_steps as _drive_steps
from verify_cli.sandbox.sessions.steps import ready as _ready
from verify_cli.sandbox.sessions.steps import run_steps as _run_steps
from verify_cli.sandbox.sessions.steps import watches_descriptors as _watches_descriptors

if TYPE_CHECKING:
    pass

MAX_MESSAGE = 1 << 16
#: How long the server may take to answer a request that runs no command (a file call).
REPLY_TIMEOUT = 30.0
#: How long a killed command may take to be reported ended before the session counts as dead.
KILL_GRACE = 5.0
#: How long output may keep coming once a command ended (its pipes' other holders are killed).
DRAIN_GRACE = 2.0
_CHUNK = 1 << 16


class _ServerGone(Exception):
    """The exec server stopped answering or broke the protocol."""


def recv_with_pid(sock: socket.socket, max_fds: int = 0) -> tuple[bytes, list[int], int | None]:
    """One message of at most MAX_MESSAGE bytes, its descriptors and the sender's pid."""
    return _recv_job(sock, max_fds, max_bytes=MAX_MESSAGE)


def decode(data: bytes) -> dict[str, Any]:
    """A server message as plain data; anything else breaks the protocol."""
    try:
        msg = json.loads(data)
    except ValueError as e:
        raise _ServerGone(f"the exec server sent a message that is not JSON: {e}") from None
    if not isinstance(msg, dict):
        raise _ServerGone("the exec server sent a message that is not an object")
    return msg


def move_into(cgroup: RunCgroup, pid: int) -> None:
    """Move process ``pid`` (and the children it forks from now on) into ``cgroup``."""
    for f in cgroup.procs_files:
        fd = os.open(f, os.O_WRONLY)
        try:
            os.write(fd, str(pid).encode())
        finally:
            os.close(fd)


def workspace_tar(workspace: Workspace) -> bytes | None:
    """The starting files as a tar archive (None: an empty work folder)."""
    if workspace is None:
        return None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if isinstance(workspace, Path | str):
            root = Path(workspace)
            if not root.is_dir():
                raise SessionFileError(f"the workspace {root} is not a folder", path=str(root))
            for child in sorted(root.iterdir()):
                tar.add(str(child), arcname=child.name, recursive=True)
        else:
            for rel, data in sorted(workspace.items()):
                info = tarfile.TarInfo(rel)
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def load_workspace(session: ServerSession, archive: bytes | None, workspace: Workspace) -> ServerSession:
    """``session`` with the starting files of ``workspace`` (its :func:`workspace_tar`) copied
    in; a copy that fails closes the session and says so (SessionFileError)."""
    if archive is not None:
        try:
            session.load(archive)
        except SessionFileError as e:
            session.close()
            raise SessionFileError(f"the workspace could not be copied in: {e}", path=str(workspace)) from e
    return session


def command_environment(workdir: str, tmp: str, path: str,
                        extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a session's commands: pinned, nothing of the host's."""
    env = {"PATH": path, "HOME": workdir, "TMPDIR": tmp, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "TZ": "UTC", "PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "CI": "true", "TERM": "dumb",
           "USER": "sandbox"}
    if extra:
        env.update(extra)
    return env


def shell_argv(command: str | Sequence[str]) -> list[str]:
    if isinstance(command, str):
        shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
        return [shell, "-c", command]
    return [str(a) for a in command]


class ServerSession(Session):
    """A session whose commands its exec server runs (see the module's docstring)."""

    def __init__(self, *, backend: str, sock: socket.socket, server_pid: int,
                 cgroup: RunCgroup | None, limits: SessionLimits, env: Mapping[str, str],
                 owns_cgroup: bool = True,
                 workdir: str, on_close: Callable[[], None] | None = None,
                 machinery_alive: Callable[[], bool] | None = None) -> None:
        self.backend = backend
        self.workdir = workdir
        self.limits = limits
        self._sock = sock
        self._server_pid = server_pid
        self._cgroup = cgroup
        self._owns_cgroup = owns_cgroup
        self._env = dict(env)
        self._on_close = on_close
        self._machinery_alive = machinery_alive or (lambda: True)
        self._lock = _SessionLock()
        self._state = SessionState.OPEN
        self._why = ""
        self._closing = False
        self.opened_at = time.monotonic()
        self.last_used = self.opened_at
        self.commands = 0
        _REAPER.track(self)

    # --- life ------------------------------------------------------------------------------
    def begin(self, env: Mapping[str, str]) -> None:
        """Hand a ready session (a spare) to its user: its commands' environment, its clocks
        started now."""
        with self._lock:
            self._env = dict(env)
            self.opened_at = self.last_used = time.monotonic()

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def why(self) -> str:
        """Why the session is no longer open ("" while it is)."""
        return self._why

    def _end(self, state: SessionState, why: str) -> None:
        """Kill everything of the session and free what it holds (the caller holds the lock)."""
        if self._state is SessionState.OPEN:
            self._state, self._why = state, why
        with contextlib.suppress(OSError):
            self._sock.close()
        if self._cgroup is not None:
            with contextlib.suppress(OSError):
                if self._owns_cgroup:
                    remove_cgroup(self._cgroup)
                else:
                    kill_all_but(self._cgroup.pids, set(), timeout=KILL_GRACE)
            self._cgroup = None
        else:
            with contextlib.suppress(OSError):
                os.kill(self._server_pid, signal.SIGKILL)
        if self._on_close is not None:
            with contextlib.suppress(Exception):
                self._on_close()
            self._on_close = None

    def _died(self, why: str) -> SessionState:
        """The server is gone or broke the protocol: the session is dead, unless the machinery
        under it failed (then it is broken: infrastructure)."""
        state = SessionState.DEAD if self._machinery_alive() else SessionState.BROKEN
        if self._closing:
            state, why = SessionState.CLOSED, "closed"
        if state is SessionState.BROKEN:
            why = f"the sandbox under the session failed ({why})"
        self._end(state, why)
        return state

    def close(self) -> None:
        self._closing = True
        # A call in flight on another thread ends at once: its server is killed first.
        if self._state is SessionState.OPEN and self._cgroup is not None:
            with contextlib.suppress(OSError):
                kill_all_but(self._cgroup.pids, set(), timeout=KILL_GRACE)
        if self._lock.held_by_loop_here():
            # an aexec of this thread's event loop is in flight: it sees its server gone and
            # ends the session (closed) itself
            if self._cgroup is None:
                with contextlib.suppress(OSError):
                    os.kill(self._server_pid, signal.SIGKILL)
            return
        with self._lock:
            self._end(SessionState.CLOSED, "closed")

    def reclaim(self, why: str) -> bool:
        """End the session by the machinery's decision (idle or total wall limit), unless a call
        holds it; True when it was reclaimed."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self._state is not SessionState.OPEN:
                return False
            self._end(SessionState.RECLAIMED, why)
            return True
        finally:
            self._lock.release()

    def _gone(self) -> ExecVerdict:
        return (ExecVerdict.INFRA_ERROR if self._state is SessionState.BROKEN
                else ExecVerdict.SESSION_DEAD)

    def _raise_gone(self) -> None:
        msg = f"the session is {self._state.value}: {self._why}"
        if self._state is SessionState.BROKEN:
            raise SessionInfraError(msg)
        raise SessionDeadError(msg, state=self._state)

    # --- protocol --------------------------------------------------------------------------
    def _send(self, msg: dict[str, Any], fds: Sequence[int] = ()) -> None:
        # Never waits: the host has at most two small messages (a request, a kill) unread by
        # the server at a time, so a full socket is a server that stopped reading (and an
        # exec on an event loop must not block it).
        send_job(self._sock, msg, fds, flags=socket.MSG_DONTWAIT,
                 unreachable=lambda why: _ServerGone(f"cannot reach the exec server: {why}"))

    def _recv(self, deadline: float) -> dict[str, Any]:
        if not _readable(self._sock.fileno(), deadline - time.monotonic()):
            raise _ServerGone("the exec server did not answer in time")
        try:
            data = self._sock.recv(MAX_MESSAGE)
        except OSError as e:
            raise _ServerGone(f"the exec server's socket failed: {e}") from None
        if not data:
            raise _ServerGone("the exec server ended")
        return decode(data)

    def _kill_command(self) -> None:
        """Kill the running command and whatever else the session runs, but the server."""
        with contextlib.suppress(_ServerGone):
            self._send({"op": "kill"})
        if self._cgroup is not None:
            kill_all_but(self._cgroup.pids, {self._server_pid}, timeout=KILL_GRACE)

    def _sweep(self) -> None:
        """Nothing of a command outlives it (daemons, orphans): the server is all that is left."""
        if self._cgroup is not None:
            kill_all_but(self._cgroup.pids, {self._server_pid}, timeout=KILL_GRACE)

    # --- exec ------------------------------------------------------------------------------
    def _start_command(self) -> ExecResult | None:
        """Count a command in (its lock held): None to run it, or the answer of a session that
        is no longer open."""
        if self._state is not SessionState.OPEN:
            return ExecResult(self._gone(), message=f"the session is {self._state.value}: {self._why}")
        self.last_used = time.monotonic()
        self.commands += 1
        return None

    def exec(self, command: str | Sequence[str], *, timeout: float | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             cwd: str | None = None, output_bytes: int | None = None) -> ExecResult:
        with self._lock:
            refused = self._start_command()
            if refused is not None:
                return refused
            try:
                return _run_steps(self._exec_steps(command, timeout, stdin, env, cwd, output_bytes))
            except OSError as e:  # the host's own resources (pipes, descriptors)
                return ExecResult(ExecVerdict.INFRA_ERROR, message=f"the host failed: {e}")
            finally:
                self.last_used = time.monotonic()

    async def aexec(self, command: str | Sequence[str], *, timeout: float | None = None,
                    stdin: bytes | None = None, env: Mapping[str, str] | None = None,
                    cwd: str | None = None, output_bytes: int | None = None) -> ExecResult:
        """:meth:`exec` driven by the running event loop: the command's socket and pipes are
        watched by the loop itself, so a command costs no thread and no hand-over between
        threads (the floor of a small command's round trip through ``verify-cli serve``). What
        may block (killing a command, sweeping what it left, ending the session) runs in
        :func:`~verify_cli.sandbox.sessions.base.session_executor`. A cancelled caller does
        not stop the command: it ends as it would in a thread. With ``stdin``, or while another
        call holds the session, or on a loop that cannot watch descriptors, it is :meth:`exec`
        in a thread, as on every other backend."""
        import asyncio  # here: importing the sandbox layer does not pay for asyncio

        loop = asyncio.get_running_loop()
        if stdin is not None or not _watches_descriptors(loop) or not self._lock.acquire_for_loop():
            return await super().aexec(command, timeout=timeout, stdin=stdin, env=env, cwd=cwd,
                                       output_bytes=output_bytes)
        return await asyncio.shield(asyncio.ensure_future(
            self._aexec_held(command, timeout, env, cwd, output_bytes)))

    async def _aexec_held(self, command: str | Sequence[str], timeout: float | None,
                          env: Mapping[str, str] | None, cwd: str | None,
                          output_bytes: int | None) -> ExecResult:
        """The body of :meth:`aexec`, its lock held by the loop's thread (released here)."""
        import asyncio

        try:
            refused = self._start_command()
            if refused is not None:
                return refused
            try:
                return await _drive_steps(self._exec_steps(command, timeout, None, env, cwd, output_bytes))
            except OSError as e:  # the host's own resources (pipes, descriptors)
                return ExecResult(ExecVerdict.INFRA_ERROR, message=f"the host failed: {e}")
            except asyncio.CancelledError:
                # the loop is going away mid-command: the session cannot be left talking
                self._closing = True
                session_executor().submit(self.close)
                raise
            finally:
                self.last_used = time.monotonic()
        finally:
            self._lock.release_for_loop()

    def _strays(self) -> bool:
        """Whether the session runs anything but its server (a read of its cgroup's list)."""
        return self._cgroup is not None and bool(self._cgroup.pids() - {self._server_pid})

    def _exec_steps(self, command: str | Sequence[str], timeout: float | None, stdin: bytes | None,
                    env: Mapping[str, str] | None, cwd: str | None,
                    output_bytes: int | None) -> Generator[_Step, Any, ExecResult]:
        """One command, as steps that a driver runs (:func:`_run_steps` in the caller's thread,
        :func:`_drive_steps` on an event loop): each :class:`_Wait` is answered with the
        descriptors ready, each :class:`_Blocking` with its call's value (or its exception)."""
        limits = self.limits
        start = time.monotonic()
        wall = limits.command_seconds if timeout is None else timeout
        left = limits.wall_seconds - (start - self.opened_at)
        session_ends = left < wall
        wall = max(0.0, min(wall, left))
        cpu = limits.cpu_seconds if limits.cpu_seconds is not None else wall
        full_env = {**self._env, **(env or {})}
        request = {"op": "exec", "argv": shell_argv(command), "env": full_env,
                   "cwd": cwd or self.workdir, "cpu_seconds": int(cpu) + 1,
                   "file_bytes": limits.file_bytes}
        if self._cgroup is None:  # no cgroup here: the per-command fallbacks
            request.update(data_bytes=limits.memory_mb * 1024 * 1024, nproc=limits.processes)
        out_cap = BoundedCapture(output_bytes or limits.output_bytes)
        err_cap = BoundedCapture(output_bytes or limits.output_bytes)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        if stdin is None:
            in_r, in_w = os.open(os.devnull, os.O_RDONLY), -1
        else:
            in_r, in_w = os.pipe()
        feeder: threading.Thread | None = None
        ooms = oom_kills(self._cgroup)
        reason: ExecVerdict | None = None
        status: dict[str, Any] | None = None
        dead = ""
        open_fds = {out_r, err_r}
        try:
            try:
                self._send(request, [in_r, out_w, err_w])
            finally:
                for fd in (in_r, out_w, err_w):
                    os.close(fd)
            if in_w >= 0 and stdin is not None:
                feeder = _feed(in_w, stdin)
                in_w = -1
            deadline = start + wall
            killed_at: float | None = None
            caps = {out_r: out_cap, err_r: err_cap}
            while status is None:
                now = time.monotonic()
                flood = max(out_cap.total, err_cap.total) > limits.max_output_bytes
                if killed_at is None and (now >= deadline or flood):
                    reason = ExecVerdict.OUTPUT_LIMIT if flood else ExecVerdict.TIMEOUT
                    yield _Blocking(self._kill_command)
                    killed_at = time.monotonic()
                if killed_at is not None and time.monotonic() > killed_at + KILL_GRACE:
                    raise _ServerGone("the exec server did not report its killed command")
                until = deadline if killed_at is None else killed_at + KILL_GRACE
                ready = yield _Wait([self._sock.fileno(), *open_fds], until - time.monotonic())
                for fd in ready:
                    if fd == self._sock.fileno():
                        msg = self._recv(time.monotonic() + 1)
                        if msg.get("op") == "exit":
                            status = msg
                        elif msg.get("op") == "error":  # it refused a well-formed command
                            raise _ServerGone(f"the exec server refused the command: "
                                              f"{str(msg.get('message'))[:200]}")
                    elif not _drain_once(fd, caps[fd]):
                        open_fds.discard(fd)
                        os.close(fd)
            if self._strays():  # nothing of a command outlives it (daemons, orphans)
                yield _Blocking(self._sweep)
            drain_end = time.monotonic() + DRAIN_GRACE
            while open_fds and time.monotonic() < drain_end:
                for fd in (yield _Wait(list(open_fds), drain_end - time.monotonic())):
                    if not _drain_once(fd, caps[fd]):
                        open_fds.discard(fd)
                        os.close(fd)
        except _ServerGone as e:
            dead = str(e)
        finally:
            for fd in (*open_fds, in_w):
                if fd >= 0:
                    with contextlib.suppress(OSError):
                        os.close(fd)
            if feeder is not None:  # only in a thread's exec (aexec with stdin runs in one)
                feeder.join(timeout=1)
        elapsed = time.monotonic() - start
        if dead:
            state = yield _Blocking(self._died, dead)
            verdict = ExecVerdict.INFRA_ERROR if state is SessionState.BROKEN else ExecVerdict.SESSION_DEAD
            return ExecResult(verdict, stdout=out_cap.result(), stderr=err_cap.result(),
                              wall_seconds=elapsed, message=f"the session died: {self._why}")
        assert status is not None
        if self._closing:  # closed from another thread mid-command: the server may have reported
            # its killed command before it was killed itself; either way the session ended it
            yield _Blocking(self._end, SessionState.CLOSED, "closed")
            return ExecResult(ExecVerdict.SESSION_DEAD, stdout=out_cap.result(), stderr=err_cap.result(),
                              wall_seconds=elapsed, message="the session was closed during the command")
        oom = oom_kills(self._cgroup) > ooms
        if reason is ExecVerdict.TIMEOUT and session_ends:
            yield _Blocking(self._end, SessionState.RECLAIMED, "past the session's wall-clock limit")
        return _judge(status, reason, oom, elapsed, out_cap, err_cap)

    # --- files -----------------------------------------------------------------------------
    def _pull(self, msg: dict[str, Any], limit: int) -> tuple[bytes, dict[str, Any]]:
        """A request whose payload comes back on a pipe: (payload, reply). SessionFileError for
        an error reply or a payload over ``limit``."""
        with self._lock:
            if self._state is not SessionState.OPEN:
                self._raise_gone()
            self.last_used = time.monotonic()
            r, w = os.pipe()
            sink = bytearray()
            over = False
            try:
                try:
                    self._send(msg, [w])
                finally:
                    os.close(w)
                deadline = time.monotonic() + REPLY_TIMEOUT
                while True:
                    if not _ready([r], deadline - time.monotonic()):
                        raise _ServerGone("the exec server did not finish a file call in time")
                    chunk = os.read(r, _CHUNK)
                    if not chunk:
                        break
                    if len(sink) + len(chunk) > limit:
                        over = True
                        break
                    sink += chunk
                os.close(r)
                r = -1
                reply = self._recv(deadline)
            except _ServerGone as e:
                self._died(str(e))
                self._raise_gone()
            finally:
                if r >= 0:
                    os.close(r)
                self.last_used = time.monotonic()
            if over:
                raise SessionFileError(f"{msg.get('path') or 'the snapshot'}: more than {limit} "
                                       "bytes", path=str(msg.get("path", "")))
            _check(reply, str(msg.get("path", "")))
            return bytes(sink), reply

    def _push(self, msg: dict[str, Any], data: bytes) -> None:
        """A request whose payload goes to the server on a pipe."""
        with self._lock:
            if self._state is not SessionState.OPEN:
                self._raise_gone()
            self.last_used = time.monotonic()
            r, w = os.pipe()
            try:
                try:
                    self._send(msg, [r])
                finally:
                    os.close(r)
                deadline = time.monotonic() + REPLY_TIMEOUT
                os.set_blocking(w, False)
                view = memoryview(data)
                while view:
                    if not _ready([w], deadline - time.monotonic(), select.POLLOUT):
                        raise _ServerGone("the exec server did not take a file in time")
                    try:
                        view = view[os.write(w, view[:_CHUNK]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:
                        break  # it stopped reading: its reply says why
                os.close(w)
                w = -1
                reply = self._recv(deadline)
            except _ServerGone as e:
                self._died(str(e))
                self._raise_gone()
            finally:
                if w >= 0:
                    os.close(w)
                self.last_used = time.monotonic()
            _check(reply, str(msg.get("path", "")))

    def read_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        data, _ = self._pull({"op": "read", "path": path, "max_bytes": max_bytes}, max_bytes)
        return data

    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        payload = encode_text(data) if isinstance(data, str) else bytes(data)
        self._push({"op": "write", "path": path, "mode": mode}, payload)

    def load(self, archive: bytes) -> None:
        """Unpack a tar archive into the work folder (the starting workspace)."""
        self._push({"op": "untar"}, archive)

    def list_files(self, path: str = ".", *, recursive: bool = True,
                   max_entries: int = 10000) -> list[FileEntry]:
        data, _ = self._pull({"op": "list", "path": path, "recursive": recursive,
                              "max_entries": max_entries}, 256 * max_entries + 4096)
        try:
            raw = json.loads(data)
            entries = [FileEntry(str(p), str(k), int(s)) for p, k, s in raw][:max_entries]
        except (ValueError, TypeError) as e:
            with self._lock:
                self._died(f"the exec server sent a bad listing: {e}")
            self._raise_gone()
        return sorted(entries, key=lambda e: e.path)

    def snapshot(self, globs: Sequence[str] = ("**",), *,
                 max_bytes: int = 64 * 1024 * 1024) -> Snapshot:
        data, reply = self._pull({"op": "snapshot", "globs": list(globs)}, max_bytes + (1 << 20))
        return snapshot_of(read_results_tar(io.BytesIO(data), stream=False), globs, max_bytes,
                           reply.get("skipped"))

    def ping(self) -> bool:
        """True while the exec server answers."""
        with self._lock:
            if self._state is not SessionState.OPEN:
                return False
            try:
                self._send({"op": "ping"})
                return self._recv(time.monotonic() + REPLY_TIMEOUT).get("op") == "pong"
            except _ServerGone as e:
                self._died(str(e))
                return False


def snapshot_of(files: Mapping[str, bytes], globs: Sequence[str], max_bytes: int,
                said_skipped: object = None) -> Snapshot:
    """The :class:`Snapshot` of the files an exec server sent: only names the globs match (the
    server is not trusted to have filtered), none that is not valid UTF-8 (left out and named,
    as is what the server says it left out)."""
    if sum(len(body) for body in files.values()) > max_bytes:
        raise SessionFileError(f"the snapshot holds more than {max_bytes} bytes", path="")
    patterns = [glob_regex(g) for g in globs]
    taken: dict[str, bytes] = {}
    skipped: list[str] = []
    for name, body in sorted(files.items()):
        if not any(p.match(name) for p in patterns):
            continue
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            skipped.append(f"{name!a} (its name is not valid UTF-8)")
            continue
        taken[name] = body
    if isinstance(said_skipped, list):
        skipped += [f"{str(n)[:300]} (its name is not valid UTF-8)" for n in said_skipped[:100]]
    return Snapshot(taken, skipped)


def _check(reply: dict[str, Any], path: str) -> None:
    if reply.get("op") == "done":
        return
    code = reply.get("errno")
    raise SessionFileError(f"{path or 'the session'}: {str(reply.get('message', 'failed'))[:500]}",
                           path=path, errno=code if isinstance(code, int) else None)


def _judge(status: Mapping[str, Any], reason: ExecVerdict | None, oom: bool, wall: float,
           out_cap: BoundedCapture, err_cap: BoundedCapture) -> ExecResult:
    raw = status.get("status")
    cpu = status.get("cpu")
    cpu_s = float(cpu) if isinstance(cpu, int | float) else 0.0
    exit_code: int | None = None
    sig: int | None = None
    if isinstance(raw, int) and 0 <= raw < 1 << 16:
        if os.WIFSIGNALED(raw):
            sig = os.WTERMSIG(raw)
        elif os.WIFEXITED(raw):
            exit_code = os.WEXITSTATUS(raw)
    stdout, stderr = out_cap.result(), err_cap.result()
    message = str(status.get("message") or "")[:500]
    verdict: ExecVerdict
    if reason is ExecVerdict.TIMEOUT:
        verdict, message = reason, "exceeded the command's wall-clock limit"
    elif reason is ExecVerdict.OUTPUT_LIMIT:
        verdict, message = reason, "exceeded the output limit; the command was stopped"
    elif oom:
        verdict, message = ExecVerdict.MEMORY_LIMIT, "killed by the OOM killer (session memory limit)"
    elif sig is not None:
        v, message = signal_verdict(sig)
        verdict = ExecVerdict(v.value)
    elif exit_code == 0:
        verdict = ExecVerdict.OK
    elif exit_code is None:
        verdict, message = ExecVerdict.SESSION_DEAD, "the exec server sent no exit status"
    elif out_of_memory(stderr.head, stderr.tail):
        verdict, message = ExecVerdict.MEMORY_LIMIT, "ran out of memory under the session's limit"
    else:
        verdict = ExecVerdict.NONZERO_EXIT
    return ExecResult(verdict, exit_code=exit_code, signal=sig, stdout=stdout, stderr=stderr,
                      wall_seconds=wall, cpu_seconds=cpu_s, message=message)


def _readable(fd: int, timeout: float) -> bool:
    return bool(_ready([fd], timeout))


def _drain_once(fd: int, capture: BoundedCapture) -> bool:
    """Read what ``fd`` holds into ``capture``; False at its end."""
    try:
        data = os.read(fd, _CHUNK)
    except OSError:
        return False
    if not data:
        return False
    capture.feed(data)
    return True


def _feed(fd: int, data: bytes) -> threading.Thread:
    def run() -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)

    t = threading.Thread(target=run, daemon=True, name="session-stdin")
    t.start()
    return t


class _Reaper:
    """Reclaims sessions past their idle or total wall limit (one daemon thread per process)."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        #: How often it looks (seconds); at most a quarter of the shortest idle limit.
        self.period = 1.0

    def track(self, session: ServerSession) -> None:
        with self._lock:
            self._sessions.add(session)
            self.period = max(0.05, min(self.period, session.limits.idle_seconds / 4))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="session-reaper")
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.period)
            self._wake.clear()
            now = time.monotonic()
            with self._lock:
                live = [s for s in self._sessions if s.state is SessionState.OPEN]
                for s in list(self._sessions):
                    if s.state is not SessionState.OPEN:
                        self._sessions.discard(s)
            for s in live:
                if now - s.last_used > s.limits.idle_seconds:
                    s.reclaim(f"idle for more than {s.limits.idle_seconds:g}s")
                elif now - s.opened_at > s.limits.wall_seconds:
                    s.reclaim(f"past the session's wall-clock limit of {s.limits.wall_seconds:g}s")


_REAPER = _Reaper()


def remove_cgroup(cgroup: RunCgroup) -> None:
    """Kill every process of ``cgroup`` (waiting on pidfds, not sleeping) and remove it."""
    kill_all_but(cgroup.pids, set(), timeout=KILL_GRACE)
    for d in cgroup.dirs:
        for _ in range(100):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.002)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


__all__ = [
    "ServerSession",
    "command_environment",
    "decode",
    "load_workspace",
    "move_into",
    "oom_kills",
    "recv_with_pid",
    "shell_argv",
    "workspace_tar",
]
