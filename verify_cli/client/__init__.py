"""A Python client of ``verify-cli serve``, sync (:class:`VerifyClient`) and async
(:class:`AsyncVerifyClient`), on httpx (no extra needed)::

    from verify_cli.client import VerifyClient

    with VerifyClient("http://127.0.0.1:8000", token=None) as client:
        r = client.grade("coding/roman-numerals", files={"roman.py": source})
        r["status"], r["score"]                     # "graded" 1.0 | "infra_error" None | "parse_error" 0.0
        for r in client.iter_grade([{"task_id": ..., "completion": text}, ...]):   # as they finish
            ...
        client.run_code("print(1)", language="python")   # SandboxFusion's /run_code
        s = client.open_session("coding/roman-numerals")["session_id"]   # an agent session
        client.session_exec(s, "python -c 'import roman'"); client.session_write(s, "roman.py", source)
        client.session_submit(s)                      # the reward: status, score, tests

What it retries, so that a caller sees each candidate's result exactly once:

- 429 and 503 (a full queue, a draining service): after the ``Retry-After`` the service sent;
- a connection refused, reset or cut mid-stream (a restart): with backoff, only the candidates
  still unanswered. Every candidate carries an ``id`` (a fresh UUID unless the caller gave one),
  so a service with a journal answers the ones it had already graded from the journal, and the
  results of a batch are never duplicated.

Other 4xx answers raise :class:`ServiceRequestError` (code, field, message): nothing was graded.
``infra_error`` results are returned as they are (score None): retry or mask them, never score.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any

import httpx

RETRY_STATUSES = frozenset({429, 502, 503, 504})
#: Candidates per request when the service's capacity cannot be asked.
_FALLBACK_BATCH = 64
_CONNECTION_ERRORS = (httpx.TransportError,)


class ServiceRequestError(Exception):
    """The service refused a request (a 4xx): ``code``, ``field`` (a JSON pointer) and ``message``."""

    def __init__(self, status: int, code: str, message: str, field: str | None, hint: str | None = None) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else "")
                         + (f"; {hint}" if hint else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.hint = hint


class ServiceUnavailableError(Exception):
    """The service did not answer within the client's retries."""


def candidate(task_id: str | None = None, *, task_path: str | None = None, files: Mapping[str, str] | None = None,
              files_base64: Mapping[str, str] | None = None, completion: str | None = None, seed: int | None = None,
              id: str | None = None, label: str = "", patch: str | None = None) -> dict[str, Any]:
    """One candidate as ``/v1/grade`` takes it (``patch``: a unified diff against the task's starter)."""
    out: dict[str, Any] = {"id": id or uuid.uuid4().hex, "label": label}
    if task_id is not None:
        out["task_id"] = task_id
    if task_path is not None:
        out["task_path"] = task_path
    if files is not None:
        out["files"] = dict(files)
    if files_base64 is not None:
        out["files_base64"] = dict(files_base64)
    if completion is not None:
        out["completion"] = completion
    if patch is not None:
        out["patch"] = patch
    if seed is not None:
        out["seed"] = seed
    return out


def _with_ids(candidates: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**c, "id": c.get("id") or uuid.uuid4().hex} for c in candidates]


def _raise_for(response: httpx.Response) -> None:
    try:
        err = response.json().get("error", {})
    except (ValueError, AttributeError):
        err = {}
    raise ServiceRequestError(response.status_code, str(err.get("code", "http_error")),
                              str(err.get("message", response.text[:500])), err.get("field"), err.get("hint"))


def _retry_after(response: httpx.Response, fallback: float) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return fallback


class _Policy:
    def __init__(self, max_retries: int, max_wait: float) -> None:
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.tries = 0

    def next_wait(self, response: httpx.Response | None, error: BaseException | None) -> float:
        """Seconds to wait before the next try; ServiceUnavailableError when the tries are spent."""
        self.tries += 1
        if self.tries > self.max_retries:
            why = f"HTTP {response.status_code}" if response is not None else f"{type(error).__name__}: {error}"
            raise ServiceUnavailableError(f"the service did not answer after {self.max_retries} retries ({why})")
        backoff = min(self.max_wait, 0.25 * 2 ** min(self.tries, 8)) * (0.5 + random.random() / 2)
        if response is not None and response.status_code in (429, 503):
            # Never before Retry-After; spread over half as long again, so that the clients
            # turned away together do not all come back in the same instant.
            after = _retry_after(response, backoff)
            return min(self.max_wait, after * (1 + random.random() / 2))
        return backoff


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class VerifyClient:
    """Blocking client. ``max_retries``: tries after the first, per request (a batch's stream
    cut and resumed counts one)."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 900.0, max_retries: int = 20,
                 max_wait: float = 30.0, transport: httpx.BaseTransport | None = None,
                 max_batch: int | None = None) -> None:
        self.max_retries = max_retries
        self.max_wait = max_wait
        #: Candidates per /v1/grade request (None: the service's capacity, asked once).
        self.max_batch = max_batch
        self._http = httpx.Client(base_url=base_url, headers=_headers(token), timeout=timeout, transport=transport)
        #: Requests answered 429 (a caller's view of backpressure).
        self.throttled = 0

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> VerifyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        policy = _Policy(self.max_retries, self.max_wait)
        while True:
            try:
                r = self._http.post(path, json=body)
            except _CONNECTION_ERRORS as e:
                time.sleep(policy.next_wait(None, e))
                continue
            if r.status_code in RETRY_STATUSES:
                self.throttled += r.status_code == 429
                time.sleep(policy.next_wait(r, None))
                continue
            if r.status_code >= 400:
                _raise_for(r)
            out: dict[str, Any] = r.json()
            return out

    def batch_limit(self) -> int:
        """The most candidates one request may carry: the service's capacity (jobs + queue size,
        from /healthz), or ``max_batch`` when given."""
        if self.max_batch is None:
            try:
                self.max_batch = int(self.health()["queue_capacity"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                return _FALLBACK_BATCH  # asked again next time
        return max(1, self.max_batch)

    def iter_grade(self, candidates: Iterable[Mapping[str, Any]], *, deadline_seconds: float | None = None,
                   include_output: bool = False) -> Iterator[dict[str, Any]]:
        """Each candidate's result once, in completion order (``index``: its place in
        ``candidates``). Any number of candidates: they are sent in requests of at most
        :meth:`batch_limit`, each streamed, the next sent as soon as one is answered."""
        batch = _with_ids(candidates)
        offset = 0
        while offset < len(batch):
            size = self.batch_limit()
            chunk = batch[offset:offset + size]
            try:
                for item in self._iter_chunk(chunk, deadline_seconds, include_output):
                    yield {**item, "index": item["index"] + offset}
            except ServiceRequestError as e:
                if e.code != "batch_too_large" or size <= 1:
                    raise
                self.max_batch = max(1, size // 2)  # the service shrank (restarted smaller): split finer
                continue
            offset += len(chunk)

    def _iter_chunk(self, batch: list[dict[str, Any]], deadline_seconds: float | None,
                    include_output: bool) -> Iterator[dict[str, Any]]:
        pending = dict(enumerate(batch))
        policy = _Policy(self.max_retries, self.max_wait)
        while pending:
            order = sorted(pending)
            body: dict[str, Any] = {"candidates": [pending[i] for i in order], "stream": True,
                                    "include_output": include_output}
            if deadline_seconds is not None:
                body["deadline_seconds"] = deadline_seconds
            try:
                with self._http.stream("POST", "/v1/grade", json=body) as r:
                    if r.status_code in RETRY_STATUSES:
                        r.read()
                        self.throttled += r.status_code == 429
                        time.sleep(policy.next_wait(r, None))
                        continue
                    if r.status_code >= 400:
                        r.read()
                        _raise_for(r)
                    for line in r.iter_lines():
                        if not line.strip():
                            continue
                        item = json.loads(line)
                        if item.get("end"):
                            break
                        original = order[item["index"]]
                        if pending.pop(original, None) is not None:
                            yield {**item, "index": original}
            except _CONNECTION_ERRORS as e:
                time.sleep(policy.next_wait(None, e))
                continue
            if pending:  # the stream ended without answering every candidate
                time.sleep(policy.next_wait(None, ConnectionError("the result stream ended early")))

    def grade_batch(self, candidates: Iterable[Mapping[str, Any]], **options: Any) -> list[dict[str, Any]]:
        """Every candidate's result, in the order given."""
        results = list(self.iter_grade(candidates, **options))
        return sorted(results, key=lambda r: r["index"])

    def grade(self, task_id: str | None = None, **fields: Any) -> dict[str, Any]:
        """Grade one candidate (:func:`candidate`'s fields); its result."""
        deadline = fields.pop("deadline_seconds", None)
        include_output = fields.pop("include_output", False)
        body: dict[str, Any] = {"candidates": [candidate(task_id, **fields)], "include_output": include_output}
        if deadline is not None:
            body["deadline_seconds"] = deadline
        result: dict[str, Any] = self._post("/v1/grade", body)["results"][0]
        return result

    def run_code(self, code: str, *, language: str = "python", stdin: str | None = None, run_timeout: float = 10,
                 memory_limit_mb: int = -1, files: Mapping[str, str] | None = None,
                 fetch_files: Iterable[str] = ()) -> dict[str, Any]:
        """SandboxFusion's run_code (files: path -> base64)."""
        return self._post("/run_code", {"code": code, "language": language, "stdin": stdin,
                                        "run_timeout": run_timeout, "memory_limit_MB": memory_limit_mb,
                                        "files": dict(files or {}), "fetch_files": list(fetch_files)})

    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = self._http.get("/healthz").json()
        return out

    # -- agent sessions ------------------------------------------------------------------------

    def _session_call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A session request: retried after 429/503 (nothing was done) and when the connection
        was refused (nothing was sent), never after it was sent (an exec may not run twice)."""
        policy = _Policy(self.max_retries, self.max_wait)
        while True:
            try:
                r = self._http.request(method, path, json=body)
            except httpx.ConnectError as e:
                time.sleep(policy.next_wait(None, e))
                continue
            if r.status_code in (429, 503):
                self.throttled += r.status_code == 429
                time.sleep(policy.next_wait(r, None))
                continue
            if r.status_code >= 400:
                _raise_for(r)
            out: dict[str, Any] = r.json()
            return out

    def open_session(self, task_id: str | None = None, *, task_path: str | None = None) -> dict[str, Any]:
        """Open an agent session over a task (``session_id``, ``editable``, ``files``, ...)."""
        body = {"task_id": task_id} if task_id is not None else {"task_path": task_path}
        return self._session_call("POST", "/v1/sessions", body)

    def session_exec(self, session_id: str, command: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Run a command: ``verdict``, ``exit_code``, ``stdout``, ``stderr``, ..."""
        return self._session_call("POST", f"/v1/sessions/{session_id}/exec", {"command": command, "timeout": timeout})

    def session_read(self, session_id: str, path: str) -> str:
        return str(self._session_call("POST", f"/v1/sessions/{session_id}/read", {"path": path})["content"])

    def session_write(self, session_id: str, path: str, content: str) -> dict[str, Any]:
        return self._session_call("POST", f"/v1/sessions/{session_id}/write", {"path": path, "content": content})

    def session_run_tests(self, session_id: str) -> dict[str, Any]:
        """The visible tests against the session's files: ``passed``, ``failed``, ``tests``."""
        return self._session_call("POST", f"/v1/sessions/{session_id}/run_tests")

    def session_submit(self, session_id: str) -> dict[str, Any]:
        """The reward: ``status`` (passed, failed, infra_error), ``score`` (None on
        infra_error: retry or mask, never 0), ``tests``. Retried after a cut connection too
        (a repeated submit answers the same reward)."""
        policy = _Policy(self.max_retries, self.max_wait)
        while True:
            try:
                return self._session_call("POST", f"/v1/sessions/{session_id}/submit")
            except httpx.TransportError as e:
                time.sleep(policy.next_wait(None, e))

    def close_session(self, session_id: str) -> None:
        """Close a session without grading it (an ended one is left as it is)."""
        try:
            self._session_call("DELETE", f"/v1/sessions/{session_id}")
        except ServiceRequestError as e:
            if e.status != 410:
                raise

    def tasks(self) -> list[dict[str, Any]]:
        r = self._http.get("/v1/tasks")
        if r.status_code >= 400:
            _raise_for(r)
        out: list[dict[str, Any]] = r.json()["tasks"]
        return out


class AsyncVerifyClient:
    """:class:`VerifyClient` for asyncio callers (the same retries)."""

    def __init__(self, base_url: str, *, token: str | None = None, timeout: float = 900.0, max_retries: int = 20,
                 max_wait: float = 30.0, transport: httpx.AsyncBaseTransport | None = None,
                 max_batch: int | None = None) -> None:
        self.max_retries = max_retries
        self.max_wait = max_wait
        self.max_batch = max_batch
        self._http = httpx.AsyncClient(base_url=base_url, headers=_headers(token), timeout=timeout,
                                       transport=transport)
        self.throttled = 0

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncVerifyClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        policy = _Policy(self.max_retries, self.max_wait)
        while True:
            try:
                r = await self._http.post(path, json=body)
            except _CONNECTION_ERRORS as e:
                await asyncio.sleep(policy.next_wait(None, e))
                continue
            if r.status_code in RETRY_STATUSES:
                self.throttled += r.status_code == 429
                await asyncio.sleep(policy.next_wait(r, None))
                continue
            if r.status_code >= 400:
                _raise_for(r)
            out: dict[str, Any] = r.json()
            return out

    async def batch_limit(self) -> int:
        """As :meth:`VerifyClient.batch_limit`."""
        if self.max_batch is None:
            try:
                self.max_batch = int((await self.health())["queue_capacity"])
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                return _FALLBACK_BATCH
        return max(1, self.max_batch)

    async def iter_grade(self, candidates: Iterable[Mapping[str, Any]], *, deadline_seconds: float | None = None,
                         include_output: bool = False) -> AsyncIterator[dict[str, Any]]:
        """Each candidate's result once, in completion order; any number (split as
        :meth:`VerifyClient.iter_grade` splits them)."""
        batch = _with_ids(candidates)
        offset = 0
        while offset < len(batch):
            size = await self.batch_limit()
            chunk = batch[offset:offset + size]
            try:
                async for item in self._iter_chunk(chunk, deadline_seconds, include_output):
                    yield {**item, "index": item["index"] + offset}
            except ServiceRequestError as e:
                if e.code != "batch_too_large" or size <= 1:
                    raise
                self.max_batch = max(1, size // 2)
                continue
            offset += len(chunk)

    async def _iter_chunk(self, batch: list[dict[str, Any]], deadline_seconds: float | None,
                          include_output: bool) -> AsyncIterator[dict[str, Any]]:
        pending = dict(enumerate(batch))
        policy = _Policy(self.max_retries, self.max_wait)
        while pending:
            order = sorted(pending)
            body: dict[str, Any] = {"candidates": [pending[i] for i in order], "stream": True,
                                    "include_output": include_output}
            if deadline_seconds is not None:
                body["deadline_seconds"] = deadline_seconds
            wait: float | None = None
            try:
                async with self._http.stream("POST", "/v1/grade", json=body) as r:
                    if r.status_code in RETRY_STATUSES:
                        await r.aread()
                        self.throttled += r.status_code == 429
                        wait = policy.next_wait(r, None)
                    elif r.status_code >= 400:
                        await r.aread()
                        _raise_for(r)
                    else:
                        async for line in r.aiter_lines():
                            if not line.strip():
                                continue
                            item = json.loads(line)
                            if item.get("end"):
                                break
                            original = order[item["index"]]
                            if pending.pop(original, None) is not None:
                                yield {**item, "index": original}
            except _CONNECTION_ERRORS as e:
                wait = policy.next_wait(None, e)
            if wait is None and pending:  # the stream ended without answering every candidate
                wait = policy.next_wait(None, ConnectionError("the result stream ended early"))
            if wait is not None:
                await asyncio.sleep(wait)

    async def grade_batch(self, candidates: Iterable[Mapping[str, Any]], **options: Any) -> list[dict[str, Any]]:
        results = [r async for r in self.iter_grade(candidates, **options)]
        return sorted(results, key=lambda r: r["index"])

    async def grade(self, task_id: str | None = None, **fields: Any) -> dict[str, Any]:
        deadline = fields.pop("deadline_seconds", None)
        include_output = fields.pop("include_output", False)
        body: dict[str, Any] = {"candidates": [candidate(task_id, **fields)], "include_output": include_output}
        if deadline is not None:
            body["deadline_seconds"] = deadline
        result: dict[str, Any] = (await self._post("/v1/grade", body))["results"][0]
        return result

    async def run_code(self, code: str, *, language: str = "python", stdin: str | None = None,
                       run_timeout: float = 10, memory_limit_mb: int = -1, files: Mapping[str, str] | None = None,
                       fetch_files: Iterable[str] = ()) -> dict[str, Any]:
        return await self._post("/run_code", {"code": code, "language": language, "stdin": stdin,
                                              "run_timeout": run_timeout, "memory_limit_MB": memory_limit_mb,
                                              "files": dict(files or {}), "fetch_files": list(fetch_files)})

    async def health(self) -> dict[str, Any]:
        out: dict[str, Any] = (await self._http.get("/healthz")).json()
        return out

    # -- agent sessions (as VerifyClient's) -----------------------------------------------------

    async def _session_call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        policy = _Policy(self.max_retries, self.max_wait)
        while True:
            try:
                r = await self._http.request(method, path, json=body)
            except httpx.ConnectError as e:
                await asyncio.sleep(policy.next_wait(None, e))
                continue
            if r.status_code in (429, 503):
                self.throttled += r.status_code == 429
                await asyncio.sleep(policy.next_wait(r, None))
                continue
            if r.status_code >= 400:
                _raise_for(r)
            out: dict[str, Any] = r.json()
            return out

    async def open_session(self, task_id: str | None = None, *, task_path: str | None = None) -> dict[str, Any]:
        body = {"task_id": task_id} if task_id is not None else {"task_path": task_path}
        return await self._session_call("POST", "/v1/sessions", body)

    async def session_exec(self, session_id: str, command: str, *, timeout: float | None = None) -> dict[str, Any]:
        return await self._session_call("POST", f"/v1/sessions/{session_id}/exec",
                                        {"command": command, "timeout": timeout})

    async def session_read(self, session_id: str, path: str) -> str:
        out = await self._session_call("POST", f"/v1/sessions/{session_id}/read", {"path": path})
        return str(out["content"])

    async def session_write(self, session_id: str, path: str, content: str) -> dict[str, Any]:
        return await self._session_call("POST", f"/v1/sessions/{session_id}/write",
                                        {"path": path, "content": content})

    async def session_run_tests(self, session_id: str) -> dict[str, Any]:
        return await self._session_call("POST", f"/v1/sessions/{session_id}/run_tests")

    async def session_submit(self, session_id: str) -> dict[str, Any]:
        policy = _Policy(self.max_retries, self.max_wait)
        while True:
            try:
                return await self._session_call("POST", f"/v1/sessions/{session_id}/submit")
            except httpx.TransportError as e:
                await asyncio.sleep(policy.next_wait(None, e))

    async def close_session(self, session_id: str) -> None:
        try:
            await self._session_call("DELETE", f"/v1/sessions/{session_id}")
        except ServiceRequestError as e:
            if e.status != 410:
                raise


__all__ = ["AsyncVerifyClient", "ServiceRequestError", "ServiceUnavailableError", "VerifyClient", "candidate"]
