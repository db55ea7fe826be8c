"""What every request passes before a route sees it: a request id, bearer-token auth, the body
size limit, and one structured JSON log line when it is answered.

A pure ASGI middleware (no buffering), so streamed answers flow through untouched.
"""

from __future__ import annotations

import asyncio
import contextvars
import hmac
import json
import logging
import re
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

from verify_cli.service.metrics import ServiceMetrics

log = logging.getLogger("verify_cli.service")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")

#: Paths answered without a token (a load balancer's probe, the API's description).
OPEN_PATHS = frozenset({"/healthz", "/v1/ping", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
_GOOD_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def _query_token(query: bytes) -> bytes | None:
    """The ``token`` parameter of a query string (``?token=T``), else None."""
    for pair in query.split(b"&"):
        name, eq, value = pair.partition(b"=")
        if name == b"token" and eq:
            return urllib.parse.unquote_to_bytes(value.replace(b"+", b" "))
    return None


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, event, the request id, and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname.lower(),
                               "logger": record.name, "event": record.getMessage()}
        rid = getattr(record, "request_id", None) or request_id.get()
        if rid:
            out["request_id"] = rid
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class BodyTimeout(HTTPException):
    """Raised from the body stream when the body has not all arrived in time (a slow client)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(408, f"the request body did not arrive within {seconds:g} s")


class BodyTooLarge(HTTPException):
    """Raised from the body stream past the limit; FastAPI passes HTTPExceptions through its body
    parsing, so the app answers it (413, field /body)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the body is over the limit of {limit} bytes")


async def send_error(send: Send, status: int, code: str, message: str, field: str | None,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "field": field}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class Gate:
    def __init__(self, app: ASGIApp, *, token: str | None, max_body_bytes: int, metrics: ServiceMetrics,
                 body_timeout: float = 60.0) -> None:
        self.app = app
        self.body_timeout = body_timeout
        self.token = token.encode() if token else None
        self.max_body = max_body_bytes
        self.metrics = metrics

    def _authorised(self, scope: Scope) -> tuple[bool, str]:
        if self.token is None or scope.get("path") in OPEN_PATHS:
            return True, ""
        given_in_url = _query_token(scope.get("query_string", b""))
        if given_in_url is not None and not any(n == b"authorization" for n, _ in scope.get("headers", [])):
            # clients that cannot set a header (verl's SandboxFusion client takes only a URL)
            if hmac.compare_digest(given_in_url, self.token):
                return True, ""
            return False, "the token in the URL is wrong"
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                if scheme.lower() != b"bearer" or not given:
                    return False, "the Authorization header is not 'Bearer TOKEN'"
                if hmac.compare_digest(given.strip(), self.token):
                    return True, ""
                return False, "the bearer token is wrong"
        return False, "no bearer token (send 'Authorization: Bearer TOKEN', or add ?token=TOKEN to the URL)"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        given_id = headers.get(b"x-request-id", b"").decode("latin-1")
        rid = given_id if _GOOD_ID.match(given_id) else uuid.uuid4().hex
        token = request_id.set(rid)
        started = time.monotonic()
        state = {"status": 0, "sent": False}

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"], state["sent"] = message["status"], True
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode())]
            await send(message)

        try:
            ok, why = self._authorised(scope)
            if not ok:
                self.metrics.rejected.labels("auth").inc()
                await send_error(send_with_id, 401, "unauthorized", why, "/headers/authorization",
                                 [(b"www-authenticate", b"Bearer")])
                return
            declared = headers.get(b"content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.max_body:
                self.metrics.rejected.labels("body_too_large").inc()
                await send_error(send_with_id, 413, "body_too_large",
                                 f"the body has {int(declared)} bytes; the limit is {self.max_body}", "/body")
                return
            seen = 0
            body_done = False
            body_by = time.monotonic() + self.body_timeout

            async def counted() -> Message:
                nonlocal seen, body_done
                if body_done:
                    return await receive()  # a wait for the client to leave: not bounded
                try:
                    # a timer, not wait_for's task per message: a small body costs next to nothing
                    async with asyncio.timeout(max(0.0, body_by - time.monotonic())):
                        message = await receive()
                except TimeoutError:
                    self.metrics.body_timeouts.inc()
                    raise BodyTimeout(self.body_timeout) from None
                if message["type"] == "http.request":
                    seen += len(message.get("body", b""))
                    if seen > self.max_body:
                        raise BodyTooLarge(self.max_body)
                    body_done = not message.get("more_body", False)
                else:
                    body_done = True
                return message

            try:
                await self.app(scope, counted, send_with_id)
            except BodyTimeout as e:
                if not state["sent"]:
                    await send_error(send_with_id, 408, "body_timeout", str(e.detail), "/body")
            except BodyTooLarge:
                self.metrics.rejected.labels("body_too_large").inc()
                if not state["sent"]:
                    await send_error(send_with_id, 413, "body_too_large",
                                     f"the body is over the limit of {self.max_body} bytes", "/body")
        finally:
            seconds = time.monotonic() - started
            route = scope.get("path", "")
            if route in ("/v1/grade", "/run_code"):
                self.metrics.request_latency.labels(route).observe(seconds)
            log.info("request", extra={"request_id": rid, "fields": {
                "method": scope.get("method"), "path": route, "status": state["status"],
                "ms": round(seconds * 1000, 2)}})
            request_id.reset(token)
