"""The service's agent sessions: a trainer's own agent loop drives a task's sandbox session
(``exec``, ``read``, ``write``, ``run_tests``) and ends it with ``submit``, whose answer is the
trusted grade of the editable files (:class:`verify_cli.agents.TaskEnvironment`).

Sessions are counted against ``max_sessions`` (a full table answers 429 with Retry-After),
reclaimed after ``idle_seconds`` without a call, and all closed when the service stops. An
ended session (submitted, deleted, reclaimed) is remembered for a while, so that a late call
learns why it is gone (410) and a retried ``submit`` gets the same reward again.

Infrastructure failures stay their own state: an open that cannot build a sandbox is 503
(retry); an ``exec`` the machinery failed answers ``verdict: infra_error``; ``submit`` then
answers ``status: infra_error`` with ``score: null``, never a 0.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from verify_cli.agents.environment import TaskEnvironment, VisibleTests, candidate_error
from verify_cli.grading.failure_text import is_collection_failure
from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.sessions.base import (
    ExecResult,
    ExecVerdict,
    SessionDeadError,
    SessionFileError,
    SessionInfraError,
    SessionsUnsupportedError,
    Snapshot,
)
from verify_cli.service.core import ServiceError
from verify_cli.service.metrics import ServiceMetrics
from verify_cli.tasks.model import Task

log = logging.getLogger("verify_cli.service")
T = TypeVar("T")

#: How many ended sessions are remembered (their reason, and a submitted one's reward).
ENDED_MEMORY = 4096


@dataclass
class _Live:
    id: str
    env: TaskEnvironment
    opened: float
    last_used: float
    busy: int = 0
    visible: VisibleTests | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class SessionManager:
    """The live sessions of one service, and the ones that ended lately."""

    def __init__(self, *, sandbox: Callable[[], Sandbox], grader: Callable[[], Grader], metrics: ServiceMetrics,
                 max_sessions: int,
                 idle_seconds: float, max_command_seconds: float) -> None:
        #: Callables giving the sandbox and the grader (made on first use).
        self._sandbox = sandbox
        self._grader = grader
        self.metrics = metrics
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.max_command_seconds = max_command_seconds
        self._live: dict[str, _Live] = {}
        self._opening = 0
        self._ended: OrderedDict[str, tuple[str, dict[str, Any] | None]] = OrderedDict()
        self._lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=max(1, max_sessions), thread_name_prefix="serve-session")
        self._reaper: asyncio.Task[None] | None = None
        self.closed = False

    # -- bookkeeping ----------------------------------------------------------------------------

    @property
    def open_count(self) -> int:
        return len(self._live)

    def _gauge(self) -> None:
        self.metrics.sessions_open.set(len(self._live))

    async def _blocking(self, fn: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, fn, *args)

    def _remember(self, sid: str, reason: str, reward: dict[str, Any] | None = None) -> None:
        with self._lock:
            self._ended[sid] = (reason, reward)
            while len(self._ended) > ENDED_MEMORY:
                self._ended.popitem(last=False)

    def _take(self, sid: str) -> _Live:
        """The live session ``sid``, marked busy (the caller :meth:`_done`s it)."""
        with self._lock:
            live = self._live.get(sid)
            if live is not None:
                live.busy += 1
                live.last_used = time.monotonic()
                return live
            ended = self._ended.get(sid)
        if ended is not None:
            raise ServiceError(410, "session_ended", f"session {sid!r} has ended ({ended[0]})",
                               field="/path_params/session_id", hint="open a new session")
        raise ServiceError(404, "unknown_session", f"no session {sid!r}", field="/path_params/session_id",
                           hint="open one with POST /v1/sessions")

    def _done(self, live: _Live) -> None:
        with self._lock:
            live.busy -= 1
            live.last_used = time.monotonic()

    def _drop(self, sid: str, reason: str, reward: dict[str, Any] | None = None) -> _Live | None:
        with self._lock:
            live = self._live.pop(sid, None)
        if live is not None:
            self._remember(sid, reason, reward)
            self.metrics.sessions_ended.labels(reason).inc()
        self._gauge()
        return live

    def _close_env(self, live: _Live) -> None:
        try:
            live.env.close()
        finally:
            if live.visible is not None:
                live.visible.close()

    # -- the calls ------------------------------------------------------------------------------

    async def open(self, task: Task, *, draining: bool) -> dict[str, Any]:
        if draining:
            raise ServiceError(503, "draining", "the service is shutting down", retry_after=5,
                               hint="retry against another replica or after the restart")
        with self._lock:
            if len(self._live) + self._opening >= self.max_sessions:
                self.metrics.rejected.labels("sessions_full").inc()
                raise ServiceError(429, "sessions_full", f"{self.max_sessions} sessions are open, the most this "
                                   "service keeps", retry_after=5,
                                   hint="close sessions you are done with (DELETE), or retry after Retry-After")
            self._opening += 1
        try:
            env = await self._blocking(self._open_env, task)
        except SessionsUnsupportedError as e:
            raise ServiceError(501, "sessions_unsupported", str(e), hint=e.hint or
                               "serve with --sandbox bwrap, docker or process") from None
        except SessionInfraError as e:
            self.metrics.sessions_ended.labels("open_failed").inc()
            raise ServiceError(503, "session_infra_error", f"the sandbox could not open a session: {e}",
                               retry_after=1, hint="retry; this is the machinery's failure, not the agent's") from None
        finally:
            with self._lock:
                self._opening -= 1
        sid = uuid.uuid4().hex
        now = time.monotonic()
        with self._lock:
            self._live[sid] = _Live(sid, env, now, now)
        self.metrics.sessions_opened.inc()
        self._gauge()
        log.info("session opened", extra={"fields": {"session_id": sid, "task_id": task.id}})
        return {"session_id": sid, "task_id": task.id, "editable": list(task.editable),
                "workdir": env.session.workdir, "idle_seconds": self.idle_seconds,
                "files": sorted(e.path for e in await self._blocking(env.session.list_files) if e.kind == "file")}

    def _open_env(self, task: Task) -> TaskEnvironment:
        return TaskEnvironment.open(task, self._sandbox(), self._grader())

    async def _call(self, sid: str, fn: Any, *args: Any) -> Any:
        live = self._take(sid)
        try:
            return await self._blocking(self._locked, live, fn, *args)
        finally:
            self._done(live)

    @staticmethod
    def _locked(live: _Live, fn: Any, *args: Any) -> Any:
        with live.lock:
            return fn(live, *args)

    async def exec(self, sid: str, command: str, timeout: float | None) -> dict[str, Any]:
        if timeout is not None and timeout > self.max_command_seconds:
            raise ServiceError(422, "invalid_field", f"timeout {timeout} exceeds the service's most, "
                               f"{self.max_command_seconds} s", field="/timeout")
        live = self._take(sid)
        try:
            if not live.lock.acquire(blocking=False):
                # another call of this session runs: wait for it in a thread, as every call does
                out: dict[str, Any] = await self._blocking(self._locked, live, self._exec, command, timeout)
                return out
            try:
                # On the event loop itself (a bwrap, process or docker session): no thread per
                # command, no hand-over between threads; another backend's runs in a thread.
                result = await live.env.session.aexec(command, timeout=timeout or live.env.command_seconds)
            finally:
                live.lock.release()
            return self._exec_answer(live, result)
        finally:
            self._done(live)

    @classmethod
    def _exec(cls, live: _Live, command: str, timeout: float | None) -> dict[str, Any]:
        env = live.env
        return cls._exec_answer(live, env.session.exec(command, timeout=timeout or env.command_seconds))

    @staticmethod
    def _exec_answer(live: _Live, result: ExecResult) -> dict[str, Any]:
        env = live.env
        if result.verdict is ExecVerdict.SESSION_DEAD:
            env.dead = result.message or "the session's exec server died"
        elif result.verdict is ExecVerdict.INFRA_ERROR:
            env.broken = result.message or "the sandbox failed"
        return {"verdict": result.verdict.value, "exit_code": result.exit_code, "signal": result.signal,
                "stdout": result.stdout.text, "stderr": result.stderr.text,
                "stdout_truncated": result.stdout.truncated, "stderr_truncated": result.stderr.truncated,
                "wall_seconds": round(result.wall_seconds, 4), "message": result.message}

    async def read(self, sid: str, path: str) -> dict[str, Any]:
        out: dict[str, Any] = await self._call(sid, self._read, path)
        return out

    @staticmethod
    def _read(live: _Live, path: str) -> dict[str, Any]:
        data = _file_call(live, lambda: live.env.session.read_file(path))
        return {"path": path, "content": data.decode("utf-8", "replace"), "bytes": len(data)}

    async def write(self, sid: str, path: str, content: str) -> dict[str, Any]:
        out: dict[str, Any] = await self._call(sid, self._write, path, content)
        return out

    @staticmethod
    def _write(live: _Live, path: str, content: str) -> dict[str, Any]:
        _file_call(live, lambda: live.env.session.write_file(path, content))
        return {"path": path, "bytes": len(content.encode())}

    async def run_tests(self, sid: str) -> dict[str, Any]:
        out: dict[str, Any] = await self._call(sid, self._run_tests)
        return out

    @staticmethod
    def _run_tests(live: _Live) -> dict[str, Any]:
        """The visible tests against the session's editable files, graded by the trusted grader."""
        env = live.env
        if live.visible is None:
            live.visible = VisibleTests(env.task)
        if live.visible.count == 0:
            return {"status": "graded", "score": None, "passed": 0, "failed": 0, "tests": [], "problems": [
                "this task has no visible tests"]}
        files = _file_call(live, env.editable_files)
        result = env.grader.grade(GradeRequest(task=live.visible.task, phase=Phase.CANDIDATE, candidate=files,
                                               label="run_tests"))
        if result.status is GradeStatus.INFRA_ERROR:
            env.broken = "; ".join(result.problems) or "the grader failed"
        loaded = bool(result.tests) and not any(is_collection_failure(t.message) for t in result.tests)
        why = "" if loaded else candidate_error(result.run.stdout.text + "\n" + result.run.stderr.text, files)
        return {"status": result.status.value, "score": result.score,
                "passed": sum(t.outcome.ok for t in result.tests),
                "failed": sum(not t.outcome.ok for t in result.tests),
                "tests": [t.to_dict() for t in result.tests], "problems": list(result.problems),
                **({"why": why} if why else {}),
                **({"left_out": list(files.skipped)} if isinstance(files, Snapshot) and files.skipped else {})}

    async def submit(self, sid: str) -> dict[str, Any]:
        """The trusted grade of the editable files; the session ends. A retried submit of a
        session already submitted answers the same reward."""
        with self._lock:
            ended = self._ended.get(sid)
        if ended is not None and ended[1] is not None:
            return {**ended[1], "replayed": True}
        live = self._take(sid)
        try:
            outcome = await self._blocking(self._locked, live, lambda lv: lv.env.outcome())
        finally:
            self._done(live)
        grade = outcome.grade
        reward = {"session_id": sid, "task_id": live.env.task.id, "status": outcome.status, "score": outcome.score,
                  "reason": outcome.reason, "tests": [t.to_dict() for t in grade.tests] if grade else [],
                  "problems": list(grade.problems) if grade else [], "replayed": False}
        self.metrics.runs.labels(f"session_{outcome.status}").inc()
        dropped = self._drop(sid, "submitted", reward)
        if dropped is not None:
            await self._blocking(self._close_env, dropped)
        log.info("session submitted", extra={"fields": {"session_id": sid, "status": outcome.status,
                                                        "score": outcome.score}})
        return reward

    async def delete(self, sid: str) -> dict[str, Any]:
        live = self._drop(sid, "deleted")
        if live is None:
            self._take(sid)  # raises: unknown or ended
            raise AssertionError("unreachable")  # pragma: no cover
        await self._blocking(self._close_env, live)
        return {"session_id": sid, "closed": True}

    # -- reclaiming and closing ------------------------------------------------------------------

    def reclaim_idle(self) -> list[str]:
        """Close the sessions idle longer than ``idle_seconds`` (none busy); their ids."""
        now = time.monotonic()
        with self._lock:
            stale = [s for s, lv in self._live.items() if lv.busy == 0 and now - lv.last_used > self.idle_seconds]
        gone: list[str] = []
        for sid in stale:
            live = self._drop(sid, "reclaimed")
            if live is not None:
                self._close_env(live)
                gone.append(sid)
                log.info("session reclaimed", extra={"fields": {"session_id": sid, "idle_seconds": self.idle_seconds}})
        return gone

    def start_reaper(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.ensure_future(self._reap_forever())

    async def _reap_forever(self) -> None:
        period = max(0.2, min(10.0, self.idle_seconds / 4))
        while not self.closed:
            await asyncio.sleep(period)
            await self._blocking(self.reclaim_idle)

    def close_all(self) -> int:
        """Close every session (the service is stopping); how many were open."""
        self.closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        with self._lock:
            ids = list(self._live)
        for sid in ids:
            live = self._drop(sid, "shutdown")
            if live is not None:
                self._close_env(live)
        self.pool.shutdown(wait=False, cancel_futures=True)
        return len(ids)


def _file_call(live: _Live, fn: Any) -> Any:
    """A session file call: the agent's file mistakes are 4xx naming the path; a dead session is
    410 (the episode failed), the machinery's failure 503 (never scored)."""
    try:
        return fn()
    except SessionFileError as e:
        raise ServiceError(422, "file_error", str(e), field="/path") from None
    except SessionDeadError as e:
        live.env.dead = str(e)
        raise ServiceError(409, "session_dead", f"the session has died because of what ran in it: {e}",
                           hint="submit to have it graded (a dead session scores 0), or DELETE it") from None
    except SessionInfraError as e:
        live.env.broken = str(e)
        raise ServiceError(500, "session_infra_error", f"the sandbox failed (not the agent's fault): {e}",
                           hint="submit answers infra_error for this session; open a new one") from None


__all__ = ["SessionManager"]
