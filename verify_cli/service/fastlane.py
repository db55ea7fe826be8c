"""The session calls an agent makes dozens of times an episode (``exec``, ``read``, ``write``),
answered without FastAPI's middleware stack, routing, dependency solving and response
validation: about a third of the service's CPU for a small call, and with it much of what a
call waits for on a loaded machine.

Only a well-formed request takes the fast lane: a JSON body (read through the gate, so its size
and time bounds hold) that the route's own model accepts, answered by the very
:class:`~verify_cli.service.sessions.SessionManager` call the route makes, its errors by the
same error bodies. Anything else (a body that is not JSON, a field error, another content type)
goes on to FastAPI with its body replayed, so that its answer is the route's. The routes stay
in the app for the OpenAPI schema and for those requests.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from verify_cli.service.bodies import surrogate_error
from verify_cli.service.core import ServiceError
from verify_cli.service.gate import ASGIApp, Message, Receive, Scope, Send
from verify_cli.service.models import ExecBody, ReadBody, WriteBody
from verify_cli.service.sessions import SessionManager

_PATH = re.compile(r"^/v1/sessions/([^/]+)/(exec|read|write)$")
#: Bodies and answers larger than this are decoded and encoded on a worker thread, never on the
#: event loop (a 16 MB file written or read would hold every other request meanwhile).
LARGE = 256 * 1024


def error_response(e: ServiceError) -> JSONResponse:
    """A ServiceError's JSON answer (with Retry-After where it has one)."""
    headers = {"Retry-After": str(int(e.retry_after))} if e.retry_after is not None else None
    return JSONResponse(e.body(), status_code=e.status, headers=headers)


def _is_json(scope: Scope) -> bool:
    """No content type, or a JSON one (what FastAPI decodes as JSON without asking more)."""
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            kind = value.split(b";", 1)[0].strip().lower()
            return kind == b"application/json"
    return True


class FastLane:
    """An ASGI app in front of the FastAPI ``app``: the hot session calls, else ``app``."""

    def __init__(self, app: ASGIApp, sessions: SessionManager) -> None:
        self.app = app
        s = sessions
        self.calls: dict[str, tuple[type[BaseModel], Callable[[str, Any], Awaitable[dict[str, Any]]]]] = {
            "exec": (ExecBody, lambda sid, b: s.exec(sid, b.command, b.timeout)),
            "read": (ReadBody, lambda sid, b: s.read(sid, b.path)),
            "write": (WriteBody, lambda sid, b: s.write(sid, b.path, b.content)),
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = (_PATH.match(scope.get("path", "")) if scope["type"] == "http" and scope.get("method") == "POST"
                 else None)
        if found is None or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left mid-body: as FastAPI would
                await self.app(scope, _replay(chunks, receive, last=message), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        model, call = self.calls[found.group(2)]
        raw = b"".join(chunks)
        try:
            body = (model.model_validate(json.loads(raw)) if len(raw) <= LARGE
                    else await asyncio.to_thread(lambda: model.model_validate(json.loads(raw))))
        except (ValueError, ValidationError):  # FastAPI's own answer (422, the field named)
            await self.app(scope, _replay(chunks, receive), send)
            return
        response: JSONResponse
        try:
            out = await call(found.group(1), body)
            large = len(str(out.get("content", ""))) > LARGE
            response = await asyncio.to_thread(JSONResponse, out) if large else JSONResponse(out)
        except ServiceError as e:
            response = error_response(e)
        except UnicodeEncodeError:  # a lone surrogate reached text that must become UTF-8
            response = error_response(surrogate_error("/body"))
        await response(scope, receive, send)


def _replay(chunks: list[bytes], receive: Receive, last: Message | None = None) -> Receive:
    """``receive`` with the body already read given again first (then ``last``, if given)."""
    pending: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": last is not None}]
    if last is not None:
        pending.append(last)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


__all__ = ["FastLane", "error_response"]
