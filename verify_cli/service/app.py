"""The HTTP face of :class:`~verify_cli.service.core.GradingService`: routes, error bodies, OpenAPI.

FastAPI, because the request and response bodies are pydantic models that give the OpenAPI
schema and the field-by-field validation (each error names its field) for free; it runs on
Starlette, whose streaming answers carry the NDJSON batches, and SandboxFusion itself is a
FastAPI app, so ``/run_code`` takes the very same model.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from verify_cli._version import __version__
from verify_cli.sandbox.base import Cancellation
from verify_cli.service.bodies import parse_grade_body, surrogate_error
from verify_cli.service.core import GradingService, ServiceError, pointer
from verify_cli.service.fastlane import FastLane, error_response
from verify_cli.service.gate import Gate
from verify_cli.service.models import (
    ErrorBody,
    ExecBody,
    ExecOut,
    GradeBody,
    GradeResponse,
    Health,
    ReadBody,
    ReadOut,
    Reward,
    RunCodeRequest,
    RunCodeResponse,
    RunTestsOut,
    SessionClosed,
    SessionInfo,
    SessionOpen,
    WriteBody,
    WriteOut,
)
from verify_cli.service.run_code import check_request, run_code
from verify_cli.service.taskstore import TaskLookupError

NDJSON = "application/x-ndjson"
_ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"model": ErrorBody} for s in (401, 409, 413, 422, 429, 503)}
_SESSION_ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"model": ErrorBody} for s in (401, 404, 409, 410, 413, 422, 500, 503)}
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large", 400: "bad_request",
               408: "body_timeout"}


_error = error_response


def _validation_error(e: RequestValidationError) -> JSONResponse:
    errors = list(e.errors())
    first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request", "type": ""}
    loc = list(first.get("loc", ()))
    if loc and loc[0] == "body":
        loc = loc[1:]
    if first.get("type") == "json_invalid":
        field, code = "/body", "invalid_json"
        ctx = first.get("ctx")
        detail = ctx.get("error") if isinstance(ctx, dict) else first.get("msg")
        message = f"the body is not valid JSON: {detail}"
    else:
        field, code = (pointer(*loc) if loc else "/body"), "invalid_field"
        message = str(first.get("msg", "invalid"))
        if first.get("type") == "missing":
            code = "missing_field"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem(s))"
    return JSONResponse({"error": {"code": code, "message": message, "field": field}}, status_code=422)


async def _watch_disconnect(request: Request, gone: asyncio.Event) -> None:
    """Set ``gone`` when the client closes its connection (its body has been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


def create_app(service: GradingService) -> Gate:
    """The ASGI app serving ``service`` (wrapped in the auth/size/log gate)."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        service.sessions.start_reaper()
        watcher = asyncio.ensure_future(service.watch_loop())
        try:
            yield
        finally:
            watcher.cancel()
            await service.wait_idle()
            service.close()

    app = FastAPI(title="verify-cli serve", version=__version__, lifespan=lifespan, description=(
        "Trusted grading of LLM-written code in verify-cli's sandboxes: /v1/grade for task sets, "
        "/v1/sessions for a trainer's own agent loop, /run_code for SandboxFusion clients (verl)."))
    app.state.service = service

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description,
                                 routes=app.routes)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            body = GradeBody.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(body.pop("$defs", {}))
            components["GradeBody"] = body
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(ServiceError)
    async def _service_error(_r: Request, e: ServiceError) -> JSONResponse:
        return _error(e)

    @app.exception_handler(UnicodeEncodeError)
    async def _surrogate(_r: Request, _e: UnicodeEncodeError) -> JSONResponse:
        # a lone surrogate (valid JSON "\ud800") reached a field that must become UTF-8
        return _error(surrogate_error("/body"))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, e: RequestValidationError) -> JSONResponse:
        return _validation_error(e)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_r: Request, e: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(e.status_code, "http_error")
        field = "/body" if e.status_code in (408, 413) else None
        return JSONResponse({"error": {"code": code, "message": str(e.detail), "field": field}},
                            status_code=e.status_code)

    @app.post("/v1/grade", response_model=GradeResponse, responses={
        **_ERRORS, 400: {"model": ErrorBody}, 200: {"content": {NDJSON: {"schema": {"type": "string"}}},
                         "description": "JSON, or NDJSON lines (GradeOut ... then StreamEnd) when streamed"}},
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/GradeBody"}}}}})
    async def grade(request: Request) -> Any:
        """Grade one or more candidates; with ``stream`` (or ``Accept: application/x-ndjson``)
        each result is a line as soon as it is graded, then ``{"end": true, "count": N}``.
        The body is a ``GradeBody``; more candidates than the service's capacity (jobs + queue
        size) are refused (422 ``batch_too_large``) before the rest is read."""
        chunks = [chunk async for chunk in request.stream()]
        # Joining, decoding, validating and looking the tasks up run on a worker thread: a large
        # body never holds the event loop (and with it every other request).
        body = await asyncio.to_thread(parse_grade_body, chunks, service.capacity)
        answers = await service.grade_stream(body)
        if body.stream or NDJSON in request.headers.get("accept", ""):
            async def lines() -> AsyncIterator[bytes]:
                n = 0
                async for answer in answers:
                    n += 1
                    yield (json.dumps(answer) + "\n").encode()
                yield (json.dumps({"end": True, "count": n}) + "\n").encode()

            return StreamingResponse(lines(), media_type=NDJSON)
        results = [a async for a in answers]
        results.sort(key=lambda a: a["index"])
        return JSONResponse({"results": results})

    @app.get("/v1/tasks")
    async def tasks() -> dict[str, Any]:
        """The served tasks (id, folder, language, editable globs) and the folders that do not load."""
        return {"tasks": [{"id": t.id, "path": str(t.root), "language": t.language, "editable": list(t.editable)}
                          for t in service.store.tasks()],
                "failures": [{"path": str(p), "error": str(e)} for p, e in service.store.failures()]}

    @app.post("/run_code", response_model=RunCodeResponse, responses={**_ERRORS, 504: {"model": ErrorBody}})
    async def run_code_route(req: RunCodeRequest, request: Request) -> Any:
        """SandboxFusion's run_code: run ``code`` in a verify-cli sandbox. Never 429: a request
        waits for a free worker (first come, first served) up to the service's
        ``--run-code-hold`` (and ``compile_timeout + 8`` s), then answers 504, which verl's
        client retries. A request whose client has left is dropped before it runs, and a run
        whose client leaves is killed (its worker freed at once)."""
        check_request(req)
        gone = asyncio.Event()
        watch = asyncio.ensure_future(_watch_disconnect(request, gone))
        try:
            hold = min(service.config.run_code_hold_seconds, max(1.0, req.compile_timeout + 8.0))
            if not await service.hold_for_worker(hold, gone):
                if gone.is_set():
                    service.metrics.rejected.labels("client_gone").inc()
                    return Response(status_code=499)
                service.metrics.rejected.labels("run_code_hold_timeout").inc()
                raise ServiceError(504, "no_worker_in_time", f"no worker was free within {hold:g} s",
                                   retry_after=1, hint="retry; or serve with more --jobs")
            cancelled = Cancellation()
            gone_now = asyncio.ensure_future(gone.wait())
            work = asyncio.ensure_future(service.on_worker(run_code, service.run_sandbox(), req, service.config,
                                                           cancelled, service.toolchains, cancelled=cancelled))
            work.add_done_callback(lambda _f: service.release(1))
            await asyncio.wait({work, gone_now}, return_when=asyncio.FIRST_COMPLETED)
            gone_now.cancel()
            if not work.done():
                # Not started yet: it never runs. Running: the sandbox kills it now, and its
                # worker (with its place) is free as soon as the kill is done.
                cancelled.set()
                service.metrics.rejected.labels("client_gone").inc()
                return Response(status_code=499)
            response, _started, _took = work.result()
        finally:
            watch.cancel()
        service.metrics.runs.labels(f"run_code_{response.status.value}").inc()
        out: RunCodeResponse = response
        return out

    @app.post("/v1/sessions", response_model=SessionInfo, responses={**_SESSION_ERRORS, 429: {"model": ErrorBody},
                                                                     501: {"model": ErrorBody}})
    async def open_session(body: SessionOpen) -> Any:
        """Open an agent session: a sandbox over the task's starter files and visible tests
        (never its hidden tests or reference). 429 when ``--max-sessions`` are open."""
        try:
            task = (service.store.by_id(body.task_id) if body.task_id is not None
                    else service.store.by_path(body.task_path or ""))
        except TaskLookupError as e:
            raise ServiceError(422, e.code, e.message, field="/task_id" if body.task_id is not None else "/task_path",
                               hint=e.hint) from None
        return await service.sessions.open(task, draining=service.draining)

    @app.post("/v1/sessions/{session_id}/exec", response_model=ExecOut, responses=_SESSION_ERRORS)
    async def session_exec(session_id: str, body: ExecBody) -> Any:
        """Run a bash command in the session's work folder; its files persist between calls."""
        return await service.sessions.exec(session_id, body.command, body.timeout)

    @app.post("/v1/sessions/{session_id}/read", response_model=ReadOut, responses=_SESSION_ERRORS)
    async def session_read(session_id: str, body: ReadBody) -> Any:
        """A file of the session's work folder, as text."""
        return await service.sessions.read(session_id, body.path)

    @app.post("/v1/sessions/{session_id}/write", response_model=WriteOut, responses=_SESSION_ERRORS)
    async def session_write(session_id: str, body: WriteBody) -> Any:
        """Write (create or replace) a file of the session's work folder."""
        return await service.sessions.write(session_id, body.path, body.content)

    @app.post("/v1/sessions/{session_id}/run_tests", response_model=RunTestsOut, responses=_SESSION_ERRORS)
    async def session_run_tests(session_id: str) -> Any:
        """The task's visible tests against the session's editable files (trusted grading)."""
        return await service.sessions.run_tests(session_id)

    @app.post("/v1/sessions/{session_id}/submit", response_model=Reward, responses=_SESSION_ERRORS)
    async def session_submit(session_id: str) -> Any:
        """End the episode: the editable files graded by the task's full tests (the reward).
        The session is closed; submitting it again answers the same reward."""
        return await service.sessions.submit(session_id)

    @app.delete("/v1/sessions/{session_id}", response_model=SessionClosed, responses=_SESSION_ERRORS)
    async def close_session(session_id: str) -> Any:
        """Close a session without grading it."""
        return await service.sessions.delete(session_id)

    @app.get("/v1/ping")
    async def ping() -> str:
        """SandboxFusion's liveness probe: the JSON string ``"pong"``, as SandboxFusion answers
        (no token needed)."""
        return "pong"

    @app.get("/healthz", response_model=Health, responses={503: {"model": Health}})
    async def healthz() -> JSONResponse:
        """Liveness and load; 503 while draining."""
        h = service.health()
        return JSONResponse(h, status_code=503 if service.draining else 200)

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> PlainTextResponse:
        """Prometheus text format."""
        return PlainTextResponse(service.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    # exec, read and write, well-formed, skip FastAPI's stack (the rest, and the schema, are its)
    return Gate(FastLane(app, service.sessions), token=service.config.token,
                max_body_bytes=service.config.max_body_bytes, metrics=service.metrics,
                body_timeout=service.config.body_timeout)
