"""The grading service without HTTP: admission (a bounded queue), the worker pool, deadlines,
drain, the journal, and turning candidates into grade requests and results into answers.

Everything here runs on the service's event loop except the grading itself, which runs on
``jobs`` worker threads through the executor (``local`` or ``ray``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import functools
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from verify_cli.executors import Executor, create_executor
from verify_cli.grading.candidate_patch import CandidatePatchError, apply_candidate_patch
from verify_cli.grading.grader import Grader, GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.models.prompts import extract_for_task, files_to_candidate
from verify_cli.sandbox.base import Cancellation, Sandbox, WarmStats
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.service.journal import (
    DEFAULT_JOURNAL_SPARES,
    JournalConflict,
    candidate_digest,
    journal_key,
    open_journal,
)
from verify_cli.service.languages import Toolchains
from verify_cli.service.metrics import ServiceMetrics
from verify_cli.service.models import Candidate, GradeBody, GradeStatusOut
from verify_cli.service.taskstore import TaskLookupError, TaskStore
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import unsafe_relative_path

log = logging.getLogger("verify_cli.service")

#: Extra seconds a candidate's answer may take past its deadline (laying out, judging) before
#: the service stops waiting for it.
DEADLINE_GRACE = 5.0


def pointer(*parts: object) -> str:
    """A JSON pointer (RFC 6901) of ``parts``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class ServiceError(Exception):
    """A request the service refuses, answered as ``{"error": {...}}`` with ``status``."""

    def __init__(self, status: int, code: str, message: str, *, field: str | None = None,
                 hint: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.hint = hint
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message, "field": self.field}
        if self.hint:
            err["hint"] = self.hint
        return {"error": err}


@dataclass(frozen=True)
class ServiceConfig:
    """How a service runs (``verify-cli serve`` options)."""

    roots: tuple[Path, ...]
    executor: str = "local"
    sandbox: str = "auto"
    jobs: int = 2
    #: Candidates that may wait for a worker beyond the ``jobs`` running; more get 429.
    queue_size: int = 64
    warm: bool = True
    #: The backend's options by config field (``pool_size``, ``mode`` for docker), checked by it.
    sandbox_options: Mapping[str, Any] = field(default_factory=dict)
    ray_address: str = "auto"
    token: str | None = None
    max_body_bytes: int = 16 * 1024 * 1024
    #: Deadline of a request that names none, and the most one may ask for.
    default_deadline: float = 600.0
    max_deadline: float = 3600.0
    #: On SIGTERM: how long in-flight work may take before it is answered infra_error.
    drain_seconds: float = 30.0
    journal: Path | None = None
    journal_fsync: bool = False
    #: ``journal`` is the default one (not named by the user): held by another service, the
    #: next free one beside it is taken.
    journal_is_default: bool = False
    #: The longest run_timeout /run_code grants, and its memory when the request says -1
    #: (SandboxFusion: no limit; None: the machine's physical memory).
    max_run_seconds: float = 120.0
    default_memory_mb: int | None = None
    #: Agent sessions open at once (more: 429), and how long one may sit without a call.
    max_sessions: int = 16
    session_idle_seconds: float = 600.0
    #: A connection must send its request head within this many seconds, and its body within
    #: ``body_timeout`` of the head (else 408 and closed).
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    #: Connections open at once (more are answered 503 and closed); None: half the open-file limit.
    max_connections: int | None = None
    #: The longest /run_code holds a request for a free worker (SandboxFusion clients do not
    #: retry a 429): past it, 504, which verl's client retries. A request's own hold is also
    #: cut to ``compile_timeout + 8`` s, so that its answer arrives inside verl's request
    #: timeout of compile + run + 10 s.
    run_code_hold_seconds: float = 18.0
    #: Compiled languages whose toolchains /run_code has on docker (one image of their Debian
    #: packages, built once at start); local backends use the host's toolchains.
    run_code_languages: tuple[str, ...] = ()


@dataclass
class Prepared:
    """A candidate checked and ready: what to grade, or its answer already (replayed, parse error)."""

    index: int
    candidate: Candidate
    task: Task
    digest: str
    #: The journal's key: the client's id and the task's content, so that an id graded before
    #: the task's files changed is graded again rather than replayed.
    key: str | None = None
    request: GradeRequest | None = None
    answer: dict[str, Any] | None = None


@dataclass
class _Counters:
    admitted: int = 0
    running: int = 0
    mean_seconds: float = 0.5
    lock: threading.Lock = field(default_factory=threading.Lock)


class GradingService:
    """The service's state; built in the app's lifespan, closed when it ends."""

    def __init__(self, config: ServiceConfig, *, executor: Executor | None = None) -> None:
        self.config = config
        self.store = TaskStore(config.roots)
        if executor is None:
            executor = create_executor(config.executor, sandbox=config.sandbox,
                                       sandbox_options=dict(config.sandbox_options), warm=config.warm,
                                       ray_address=config.ray_address)
        self.executor = executor
        for warning in executor.warnings:
            log.warning("executor", extra={"fields": {"warning": warning}})
        self.executor.reserve(config.jobs)
        self.capacity = config.jobs + config.queue_size
        self.pool = ThreadPoolExecutor(max_workers=config.jobs, thread_name_prefix="serve-grade")
        self.journal = (open_journal(config.journal, fsync=config.journal_fsync,
                                     spares=DEFAULT_JOURNAL_SPARES if config.journal_is_default else 0)
                        if config.journal else None)
        self.metrics = ServiceMetrics(self.warm_stats)
        self.metrics.workers.set(config.jobs)
        self.metrics.capacity.set(self.capacity)
        self._counters = _Counters()
        #: /run_code requests held for a free worker, first come first served.
        self._held: collections.deque[asyncio.Future[bool]] = collections.deque()
        #: Candidates being graded now by journal key: (digest, their answer to come).
        self._inflight: dict[str, tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        self.loop_block_max = 0.0
        #: (loop time, seconds late) of the monitor's late wake-ups in the last 10 s.
        self._stalls: collections.deque[tuple[float, float]] = collections.deque()
        self._run_sandbox: Sandbox | None = None
        self._sandbox_lock = threading.Lock()
        self.draining = False
        self._stop: asyncio.Event | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._session_grader: Grader | None = None
        from verify_cli.service.sessions import SessionManager

        #: Where /run_code's compiled languages find their toolchains: built now where asked
        #: for, else looked up on the first /run_code (the run sandbox is opened then).
        self._toolchains: Toolchains | None = None
        if config.run_code_languages or isinstance(getattr(executor, "sandbox", None), Sandbox):
            self._toolchains = Toolchains(self.run_sandbox(), config.run_code_languages)
            if config.run_code_languages and not self._toolchains.in_image:
                log.warning("toolchains", extra={"fields": {"warning": (
                    f"--run-code-languages builds images for --sandbox docker only; the "
                    f"{self._toolchains.backend} backend uses this machine's compilers")}})
            self._toolchains.prepare(say=lambda text: log.info("toolchains", extra={"fields": {"step": text}}))

        self.sessions = SessionManager(sandbox=self.run_sandbox, grader=self.session_grader, metrics=self.metrics,
                                       max_sessions=config.max_sessions, idle_seconds=config.session_idle_seconds,
                                       max_command_seconds=config.max_run_seconds)

    # -- state --------------------------------------------------------------------------------

    def warm_stats(self) -> WarmStats | None:
        grader = getattr(self.executor, "grader", None)
        return getattr(grader, "warm_stats", None)

    @property
    def running(self) -> int:
        return self._counters.running

    @property
    def queued(self) -> int:
        c = self._counters
        return max(0, c.admitted - c.running)

    def _update_gauges(self) -> None:
        self.metrics.queue_depth.set(self.queued)
        self.metrics.running.set(self._counters.running)

    def _refuse_draining(self) -> None:
        if self.draining:
            self.metrics.rejected.labels("draining").inc()
            raise ServiceError(503, "draining", "the service is shutting down", retry_after=5,
                               hint="retry against another replica or after the restart")

    def admit(self, n: int) -> None:
        """Reserve ``n`` places or refuse: 503 while draining, 429 with Retry-After when full
        (or while /run_code requests are held for a worker: they go first)."""
        self._refuse_draining()
        if n > self.capacity:
            raise ServiceError(422, "batch_too_large", f"{n} candidates exceed the service's capacity of "
                               f"{self.capacity} (jobs + queue size)", field="/candidates",
                               hint=f"send at most {self.capacity} per request")
        c = self._counters
        with c.lock:
            if c.admitted + n > self.capacity or self._held:
                # Until the candidates waiting now have a worker: the queue is worth retrying then.
                waiting = max(1, c.admitted - self.config.jobs)
                wait = max(1, math.ceil(waiting * c.mean_seconds / max(1, self.config.jobs)))
                self.metrics.rejected.labels("queue_full").inc()
                raise ServiceError(429, "queue_full", f"the queue is full ({c.admitted} admitted, capacity "
                                   f"{self.capacity})", retry_after=min(wait, 60), hint="retry after Retry-After")
            c.admitted += n
        self._update_gauges()

    def release(self, n: int = 1) -> None:
        """Give ``n`` places back (on the event loop's thread): held /run_code requests get them."""
        c = self._counters
        with c.lock:
            c.admitted -= n
            while self._held and c.admitted < self.config.jobs:
                waiter = self._held.popleft()
                if not waiter.done():
                    c.admitted += 1
                    waiter.set_result(True)
        self._update_gauges()

    async def hold_for_worker(self, seconds: float, gone: asyncio.Event) -> bool:
        """A place for one /run_code run, waiting (first come, first served) up to ``seconds``
        for a worker to be free rather than refusing. False when the time ran out or the client
        left (``gone``); 503 while draining."""
        self._refuse_draining()
        c = self._counters
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        with c.lock:
            if not self._held and c.admitted < self.config.jobs:
                c.admitted += 1
                waiter.set_result(True)
            else:
                self._held.append(waiter)
        self._update_gauges()
        if waiter.done():
            return True
        left: asyncio.Future[Any] = asyncio.ensure_future(gone.wait())
        try:
            await asyncio.wait({waiter, left}, timeout=max(0.0, seconds), return_when=asyncio.FIRST_COMPLETED)
        finally:
            left.cancel()
        granted = waiter.done() and not waiter.cancelled() and waiter.result()
        if not granted:
            waiter.cancel()
            with c.lock:
                if waiter in self._held:
                    self._held.remove(waiter)
            return False
        if gone.is_set():
            self.release(1)
            return False
        return True

    @property
    def held(self) -> int:
        """/run_code requests waiting for a worker."""
        return len(self._held)

    def _blocking(self, fn: Any, *args: Any, cancelled: threading.Event | Cancellation | None = None
                  ) -> tuple[Any, float, float]:
        """Run ``fn`` on a worker: (its value, seconds it waited, seconds it took); (None, ...)
        without running it when ``cancelled`` was set while it waited for the worker."""
        started = time.monotonic()
        if cancelled is not None and cancelled.is_set():
            return None, started, 0.0
        c = self._counters
        with c.lock:
            c.running += 1
        self._update_gauges()
        try:
            value = fn(*args)
        finally:
            took = time.monotonic() - started
            with c.lock:
                c.running -= 1
                c.mean_seconds = 0.9 * c.mean_seconds + 0.1 * took
        return value, started, took

    async def on_worker(self, fn: Any, *args: Any, cancelled: threading.Event | Cancellation | None = None
                        ) -> tuple[Any, float, float]:
        """``fn(*args)`` on a worker thread; (value, started at, seconds). ``cancelled`` set
        before a worker takes it: not run, value None."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(self._blocking, cancelled=cancelled),
                                          fn, *args)

    # -- drain --------------------------------------------------------------------------------

    def begin_drain(self) -> None:
        """Refuse new work; after ``drain_seconds`` answer what is still in flight infra_error.
        Safe to call from a signal handler on the loop's thread."""
        if self.draining:
            return
        self.draining = True
        log.info("draining", extra={"fields": {"in_flight": self._counters.admitted,
                                               "drain_seconds": self.config.drain_seconds}})
        loop = asyncio.get_event_loop()
        loop.call_soon_threadsafe(loop.call_later, self.config.drain_seconds, self._stop_now)

    def _stop_now(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def _stop_event(self) -> asyncio.Event:
        if self._stop is None:
            self._stop = asyncio.Event()
        return self._stop

    # -- grading ------------------------------------------------------------------------------

    def resolve_task(self, cand: Candidate, index: int) -> Task:
        try:
            if cand.task_id is not None:
                return self.store.by_id(cand.task_id)
            return self.store.by_path(cand.task_path or "")
        except TaskLookupError as e:
            where = "task_id" if cand.task_id is not None else "task_path"
            raise ServiceError(422, e.code, e.message, field=pointer("candidates", index, where),
                               hint=e.hint) from None

    @staticmethod
    def _files(cand: Candidate, index: int) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for key, table in (("files", cand.files), ("files_base64", cand.files_base64)):
            for path, content in (table or {}).items():
                where = pointer("candidates", index, key, path)
                why = unsafe_relative_path(path.replace("\\", "/"))
                if why:
                    raise ServiceError(422, "invalid_path", f"file path {path!r} {why}", field=where)
                if key == "files":
                    out[path] = content.encode("utf-8")
                    continue
                try:
                    out[path] = decode_base64(content)
                except (binascii.Error, ValueError):
                    raise ServiceError(422, "invalid_base64", f"{path!r} is not valid base64", field=where) from None
        return out

    def prepare(self, body: GradeBody) -> list[Prepared]:
        """Check every candidate before anything is graded: a bad one refuses the whole request.
        Blocking (task look-ups stat the task folders): call it on a worker thread."""
        out: list[Prepared] = []
        tasks: dict[tuple[str | None, str | None], Task] = {}
        for i, cand in enumerate(body.candidates):
            named = (cand.task_id, cand.task_path)
            task = tasks.get(named)
            if task is None:
                task = tasks[named] = self.resolve_task(cand, i)
            files = self._files(cand, i)
            ident: dict[str, Any] = {"task": task.id, "seed": cand.seed,
                                     "files": {k: base64.b64encode(v).decode() for k, v in sorted(files.items())},
                                     "completion": cand.completion}
            if cand.patch is not None:  # (only then: the digests of other candidates stay as journalled)
                ident["patch"] = cand.patch
            digest = candidate_digest(ident)
            prep = Prepared(i, cand, task, digest)
            if cand.id is not None:
                prep.key = journal_key(cand.id, self.store.content_hash(task))
            if prep.key is not None and self.journal is not None:
                found = self._journalled(prep)
                if found is not None:
                    prep.answer = found
                    out.append(prep)
                    continue
            if cand.completion is not None:
                extraction = extract_for_task(task, cand.completion)
                if not extraction.ok:
                    prep.answer = self._parse_error(prep, extraction.error or "parse error")
                    out.append(prep)
                    continue
                files = files_to_candidate(extraction.files)
            if cand.patch is not None:
                try:
                    files = apply_candidate_patch(task, cand.patch)[0]
                except CandidatePatchError as e:  # the candidate's answer, never the service's fault
                    prep.answer = self._parse_error(prep, f"the patch does not apply: {e.message}")
                    out.append(prep)
                    continue
            prep.request = GradeRequest(task=task, phase=Phase.CANDIDATE, candidate=files, seed=cand.seed,
                                        label=cand.label)
            out.append(prep)
        return out

    def _journalled(self, prep: Prepared) -> dict[str, Any] | None:
        """The journal's answer for ``prep`` (replayed), None, or 409 for an id reused."""
        assert self.journal is not None and prep.key is not None
        try:
            found = self.journal.get(prep.key, prep.digest)
        except JournalConflict:
            raise self._id_reused(prep) from None
        return None if found is None else {**found, "index": prep.index, "replayed": True}

    @staticmethod
    def _id_reused(prep: Prepared) -> ServiceError:
        return ServiceError(409, "id_reused", f"id {prep.candidate.id!r} was already graded for a different "
                            "candidate", field=pointer("candidates", prep.index, "id"),
                            hint="give every distinct candidate its own id")

    @staticmethod
    def _parse_error(prep: Prepared, why: str) -> dict[str, Any]:
        return {"index": prep.index, "id": prep.candidate.id, "task_id": prep.task.id,
                "status": GradeStatusOut.PARSE_ERROR.value, "score": 0.0, "passed": False, "tests": [],
                "problems": [why], "ignored_files": [], "isolation": "", "seed": prep.candidate.seed,
                "label": prep.candidate.label,
                "timings": {"queue_seconds": 0.0, "grade_seconds": 0.0, "total_seconds": 0.0}, "replayed": False}

    @staticmethod
    def _infra(prep: Prepared, why: str, queued: float, total: float) -> dict[str, Any]:
        return {"index": prep.index, "id": prep.candidate.id, "task_id": prep.task.id,
                "status": GradeStatusOut.INFRA_ERROR.value, "score": None, "passed": False, "tests": [],
                "problems": [why], "ignored_files": [], "isolation": "", "seed": prep.candidate.seed,
                "label": prep.candidate.label,
                "timings": {"queue_seconds": round(queued, 4), "grade_seconds": 0.0,
                            "total_seconds": round(total, 4)}, "replayed": False}

    @staticmethod
    def answer_of(prep: Prepared, result: GradeResult, queued: float, took: float, total: float,
                  include_output: bool) -> dict[str, Any]:
        run: dict[str, Any] = {"verdict": result.run.verdict.value, "exit_code": result.run.exit_code,
                               "wall_seconds": round(result.run.wall_seconds, 4)}
        if include_output:
            run.update(stdout=result.run.stdout.text, stderr=result.run.stderr.text)
        return {"index": prep.index, "id": prep.candidate.id, "task_id": result.task_id,
                "status": result.status.value, "score": result.score, "passed": result.passed,
                "tests": [t.to_dict() for t in result.tests], "problems": list(result.problems),
                "ignored_files": list(result.ignored_files), "isolation": result.isolation,
                "seed": result.seed, "label": result.label,
                "timings": {"queue_seconds": round(queued, 4), "grade_seconds": round(took, 4),
                            "total_seconds": round(total, 4)}, "run": run, "replayed": False}

    def _grade_before(self, request: GradeRequest, deadline_at: float) -> GradeResult | None:
        """Grade ``request`` unless its deadline passed while it waited (None then); a deadline
        nearer than the task's wall limit tightens the run's limit."""
        left = deadline_at - time.monotonic()
        if left <= 0:
            return None
        if left < request.task.limits.wall_seconds:
            request = replace(request, wall_seconds=left)
        return self.executor.grade(request)

    async def _grade_one(self, prep: Prepared, arrived: float, deadline_at: float,
                         include_output: bool) -> dict[str, Any]:
        """Grade one admitted candidate (its place is released when its worker is done) and
        journal the answer before anyone sees it."""
        assert prep.request is not None
        request = prep.request
        work = asyncio.ensure_future(self.on_worker(self._grade_before, request, deadline_at))
        work.add_done_callback(lambda _f: self.release(1))
        stop = asyncio.ensure_future(self._stop_event().wait())
        timeout = max(0.0, deadline_at - time.monotonic()) + DEADLINE_GRACE
        try:
            done, _ = await asyncio.wait({work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        now = time.monotonic()
        if work not in done:
            why = ("the service shut down before this candidate was graded; retry it" if stop in done
                   else "the request's deadline passed before grading finished; retry with a later deadline")
            answer = self._infra(prep, why, now - arrived, now - arrived)
        else:
            try:
                result, started, took = work.result()
            except Exception as e:  # an executor failure is never a score
                answer = self._infra(prep, f"{type(e).__name__}: {e}", now - arrived, now - arrived)
            else:
                if result is None:
                    answer = self._infra(prep, "the request's deadline passed while it waited for a worker",
                                         started - arrived, now - arrived)
                else:
                    cut = request.task.limits.wall_seconds > (deadline_at - started)
                    if cut and result.run.verdict.value == "timeout":
                        result = GradeResult(task_id=result.task_id, phase=result.phase,
                                             status=GradeStatus.INFRA_ERROR, score=None, passed=False, tests=(),
                                             run=result.run, problems=(
                                                 "the request's deadline, shorter than the task's wall limit, "
                                                 "ended the run",), seed=result.seed, label=result.label)
                    self.metrics.queue_latency.observe(started - arrived)
                    self.metrics.grade_latency.observe(took)
                    answer = self.answer_of(prep, result, started - arrived, took, now - arrived, include_output)
        if self.journal is not None and prep.key is not None and answer["status"] != "infra_error":
            stored = {k: v for k, v in answer.items() if k not in ("index", "replayed")}
            await asyncio.to_thread(self.journal.put, prep.key, prep.digest, stored)
        self.metrics.runs.labels(answer["status"]).inc()
        log.info("graded", extra={"fields": {"task_id": answer["task_id"], "status": answer["status"],
                                             "score": answer["score"], "index": prep.index,
                                             "seconds": answer["timings"]["total_seconds"]}})
        return answer

    async def grade_stream(self, body: GradeBody) -> AsyncIterator[dict[str, Any]]:
        """Answers in completion order. This prepares the body (on a worker thread) and admits
        it (raising ServiceError before anything runs), and returns an iterator over answers.
        A candidate whose id and content are being graded by another request now waits for
        that grade instead of grading again (answered ``replayed``)."""
        prepared = await asyncio.to_thread(self.prepare, body)
        to_grade: list[Prepared] = []
        # (a candidate, the grade it waits for: another request's, or None: an earlier one's here)
        following: list[tuple[Prepared, asyncio.Future[dict[str, Any]] | None]] = []
        leading: dict[str, Prepared] = {}
        for p in prepared:
            if p.request is None:
                continue
            if p.key is not None:
                running = self._inflight.get(p.key)
                first = leading.get(p.key)
                if running is not None:
                    if running[0] != p.digest:
                        raise self._id_reused(p)
                    following.append((p, running[1]))
                    continue
                if first is not None:
                    if first.digest != p.digest:
                        raise self._id_reused(p)
                    following.append((p, None))
                    continue
                if self.journal is not None:  # graded since prepare() looked
                    found = self._journalled(p)
                    if found is not None:
                        p.answer, p.request = found, None
                        continue
                leading[p.key] = p
            to_grade.append(p)
        if to_grade:
            self.admit(len(to_grade))
        arrived = time.monotonic()
        deadline = min(body.deadline_seconds or self.config.default_deadline, self.config.max_deadline)
        deadline_at = arrived + deadline
        tasks: list[asyncio.Task[dict[str, Any]]] = []
        for p in to_grade:
            t = asyncio.ensure_future(self._grade_one(p, arrived, deadline_at, body.include_output))
            self._background.add(t)  # the work goes on (and is journalled) if the client leaves
            t.add_done_callback(self._background.discard)
            if p.key is not None:
                self._track(p.key, p.digest, t)
            tasks.append(t)
        for p, leader in following:
            assert p.key is not None
            tasks.append(asyncio.ensure_future(self._follow(p, leader or self._inflight[p.key][1])))
        ready = [p.answer for p in prepared if p.answer is not None]
        for answer in ready:
            if answer.get("replayed"):
                self.metrics.replayed.inc()
            else:
                self.metrics.runs.labels(answer["status"]).inc()
        return self._answers(ready, tasks)

    def _track(self, key: str, digest: str, task: asyncio.Task[dict[str, Any]]) -> None:
        """``key`` is being graded by ``task`` until it is done (and journalled)."""
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._inflight[key] = (digest, fut)

        def done(t: asyncio.Task[dict[str, Any]]) -> None:
            if self._inflight.get(key, (None, None))[1] is fut:
                del self._inflight[key]
            if t.cancelled():
                fut.cancel()
            elif t.exception() is not None:
                fut.set_exception(t.exception())  # type: ignore[arg-type]
            else:
                fut.set_result(t.result())

        task.add_done_callback(done)

    async def _follow(self, prep: Prepared, leader: asyncio.Future[dict[str, Any]]) -> dict[str, Any]:
        """The answer of the same id and candidate graded by another request, as a replay."""
        answer = await asyncio.shield(leader)
        self.metrics.replayed.inc()
        return {**answer, "index": prep.index, "replayed": True}

    @staticmethod
    async def _answers(ready: list[dict[str, Any]],
                       tasks: list[asyncio.Task[dict[str, Any]]]) -> AsyncIterator[dict[str, Any]]:
        for answer in ready:
            yield answer
        for fut in asyncio.as_completed(tasks):
            yield await fut

    # -- run_code -----------------------------------------------------------------------------

    @property
    def toolchains(self) -> Toolchains:
        """Where /run_code's compiled languages find their compilers on this service."""
        if self._toolchains is None:
            self._toolchains = Toolchains(self.run_sandbox())
        return self._toolchains

    def run_sandbox(self) -> Sandbox:
        """The sandbox /run_code runs in: the local executor's own, else one opened here."""
        own = getattr(self.executor, "sandbox", None)
        if isinstance(own, Sandbox):
            return own
        with self._sandbox_lock:
            if self._run_sandbox is None:
                self._run_sandbox = create_sandbox(self.config.sandbox, **self.config.sandbox_options)
                self._run_sandbox.start()
            return self._run_sandbox

    def session_grader(self) -> Grader:
        """The grader of agent sessions' run_tests and submit: the local executor's, else one
        over :meth:`run_sandbox` (sessions live on this machine)."""
        own = getattr(self.executor, "grader", None)
        if isinstance(own, Grader):
            return own
        with self._sandbox_lock:
            if self._session_grader is None:
                self._session_grader = Grader(self.run_sandbox())
            return self._session_grader

    # -- lifecycle ----------------------------------------------------------------------------

    async def watch_loop(self, period: float = 0.005) -> None:
        """Measure the event loop's longest stall for ever (run it as a task): each wake-up
        later than asked is time every request waited."""
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time()
            await asyncio.sleep(period)
            late = loop.time() - asked - period
            if late > 0.001:
                self._stalls.append((asked, late))
                while self._stalls and self._stalls[0][0] < asked - 10.0:
                    self._stalls.popleft()
            if late > self.loop_block_max:
                self.loop_block_max = late
                self.metrics.loop_block.set(late)

    async def wait_idle(self) -> None:
        """Until every admitted candidate's worker is done (used at shutdown)."""
        while self._background:
            await asyncio.wait(set(self._background), timeout=1.0)

    def health(self) -> dict[str, Any]:
        return {"status": "draining" if self.draining else "ok", "tasks": len(self.store.tasks()),
                "task_load_failures": len(self.store.failures()), "backend": self.executor.backend,
                "executor": self.config.executor, "workers": self.config.jobs,
                "queue_capacity": self.capacity, "queued": self.queued, "running": self.running,
                "sessions_open": self.sessions.open_count, "max_sessions": self.config.max_sessions,
                "run_code_held": self.held,
                "run_code_languages": (self._toolchains.available() if self._toolchains is not None
                                       else ["python", "pytest", "nodejs", "bash"]),
                "loop_block_ms_max": round(self.loop_block_max * 1000, 2),
                "loop_block_ms_recent": round(max((late for _, late in self._stalls), default=0.0) * 1000, 2)}

    def close(self) -> None:
        closed = self.sessions.close_all()
        if closed:
            log.info("sessions closed", extra={"fields": {"sessions": closed}})
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.executor.close()
        if self._session_grader is not None:
            self._session_grader.close()
        if self._run_sandbox is not None:
            self._run_sandbox.close()
        if self.journal is not None:
            self.journal.close()


_BASE64_SPACE = str.maketrans("", "", " \t\r\n")


def decode_base64(text: str) -> bytes:
    """Strict base64, line breaks and spaces allowed (MIME-style, 76-character lines);
    ValueError when it is not base64."""
    return base64.b64decode(text.translate(_BASE64_SPACE), validate=True)


def decode_files(files: Mapping[str, str | None], field_name: str) -> dict[str, bytes]:
    """SandboxFusion's ``files`` (path -> base64, MIME line breaks allowed; None: an empty
    file), checked."""
    out: dict[str, bytes] = {}
    for path, content in files.items():
        where = pointer(field_name, path)
        why = unsafe_relative_path(path.replace("\\", "/"))
        if why:
            raise ServiceError(422, "invalid_path", f"file path {path!r} {why}", field=where)
        try:
            out[path] = decode_base64(content or "")
        except (binascii.Error, ValueError):
            raise ServiceError(422, "invalid_base64", f"{path!r} is not valid base64", field=where) from None
    return out
