"""Reading a ``/v1/grade`` body off the event loop, bounded before it is all decoded.

FastAPI would decode and validate the whole body on the event loop before the route runs: a
body of 100,000 candidates held every other request (``/healthz`` included) for seconds. Here
the route reads the bytes and hands them to a worker thread, which decodes the top-level object
one value at a time (each candidate on its own, so the thread gives the interpreter back
between them) and stops as soon as the candidates outnumber the service's capacity: a body too
large to be admitted costs a scan of what fits, never the whole body.

A string holding a lone UTF-16 surrogate (``"\\ud800"``: valid JSON, but no UTF-8 text) is
refused here with the field that holds it, as are other malformed bodies; nothing is graded.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from verify_cli.service.core import ServiceError, pointer
from verify_cli.service.models import Candidate, GradeBody

_WS = re.compile(r"[ \t\n\r]*")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_DECODER = json.JSONDecoder()


class _Syntax(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.pos = pos


def lone_surrogate(value: Any, *path: object) -> str | None:
    """The JSON pointer of the first string (key or value) in ``value`` that holds a lone
    surrogate, else None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return pointer(*path) or "/"
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            found = lone_surrogate(k, *path, k) or lone_surrogate(v, *path, k)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = lone_surrogate(v, *path, i)
            if found:
                return found
    return None


def surrogate_error(where: str) -> ServiceError:
    return ServiceError(400, "invalid_unicode", "a string holds a lone UTF-16 surrogate (such as \\ud800), "
                        "which no UTF-8 text can carry", field=where,
                        hint="send text as UTF-8, or binary content base64-encoded (files_base64)")


def _value(text: str, pos: int) -> tuple[Any, int]:
    try:
        return _DECODER.scan_once(text, pos)  # type: ignore[attr-defined]
    except StopIteration as e:
        raise _Syntax("Expecting value", int(e.value)) from None
    except json.JSONDecodeError as e:
        raise _Syntax(e.msg, e.pos) from None


def _skip(text: str, pos: int, char: str | None = None) -> int:
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if char is not None:
        if text[pos:pos + 1] != char:
            raise _Syntax(f"Expecting {char!r}", pos)
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
    return pos


def _candidates(text: str, pos: int, capacity: int) -> tuple[list[Any], int]:
    """The candidates array from ``pos`` (at its ``[``); past ``capacity`` items, batch_too_large."""
    pos = _skip(text, pos, "[")
    items: list[Any] = []
    if text[pos:pos + 1] == "]":
        return items, pos + 1
    while True:
        if len(items) >= capacity:
            raise ServiceError(422, "batch_too_large", f"more than {capacity} candidates exceed the service's "
                               f"capacity of {capacity} (jobs + queue size)", field="/candidates",
                               hint=f"send at most {capacity} per request (the Python client splits batches)")
        start = pos
        item, pos = _value(text, pos)
        if _SURROGATE_ESCAPE.search(text, start, pos):
            where = lone_surrogate(item, "candidates", len(items))
            if where:
                raise surrogate_error(where)
        items.append(item)
        pos = _skip(text, pos)
        if text[pos:pos + 1] == ",":
            pos = _skip(text, pos + 1)
            continue
        if text[pos:pos + 1] == "]":
            return items, pos + 1
        raise _Syntax("Expecting ',' delimiter", pos)


def _top(text: str, capacity: int) -> dict[str, Any]:
    pos = _skip(text, 0, "{")
    out: dict[str, Any] = {}
    if text[pos:pos + 1] == "}":
        return out
    while True:
        if text[pos:pos + 1] != '"':
            raise _Syntax("Expecting property name enclosed in double quotes", pos)
        key, pos = _value(text, pos)
        pos = _skip(text, pos, ":")
        if key == "candidates" and text[pos:pos + 1] == "[":
            out[key], pos = _candidates(text, pos, capacity)
        else:
            start = pos
            out[key], pos = _value(text, pos)
            if _SURROGATE_ESCAPE.search(text, start, pos):
                where = lone_surrogate(out[key], key)
                if where:
                    raise surrogate_error(where)
        pos = _skip(text, pos)
        if text[pos:pos + 1] == ",":
            pos = _skip(text, pos + 1)
            continue
        if text[pos:pos + 1] == "}":
            if _skip(text, pos + 1) != len(text):
                raise _Syntax("Extra data", pos + 1)
            return out
        raise _Syntax("Expecting ',' delimiter", pos)


def parse_grade_body(raw: bytes | list[bytes], capacity: int) -> GradeBody:
    """The body (its bytes, or the chunks it came in) as a GradeBody (blocking: run it on a
    worker thread). Raises ServiceError (invalid JSON, a lone surrogate, batch_too_large) or
    RequestValidationError (a field)."""
    if isinstance(raw, list):
        raw = b"".join(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ServiceError(422, "invalid_json", f"the body is not valid JSON: not UTF-8 at byte {e.start}",
                           field="/body") from None
    if not text.strip():
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required",
                                       "input": None}])
    try:
        start = _skip(text, 0)
        if text[start:start + 1] == "{":
            data: Any = _top(text, max(1, capacity))
        else:
            data, end = _value(text, start)
            if _skip(text, end) != len(text):
                raise _Syntax("Extra data", end)
    except _Syntax as e:
        raise ServiceError(422, "invalid_json", f"the body is not valid JSON: {e} at character {e.pos}",
                           field="/body") from None
    try:
        if isinstance(data, dict) and isinstance(data.get("candidates"), list):
            cands = []
            for i, item in enumerate(data["candidates"]):
                try:
                    cands.append(Candidate.model_validate(item))
                except ValidationError as e:
                    raise RequestValidationError([{**err, "loc": ("body", "candidates", i, *err["loc"])}
                                                  for err in e.errors()]) from None
            data = {**data, "candidates": cands}
        return GradeBody.model_validate(data)
    except ValidationError as e:
        raise RequestValidationError([{**err, "loc": ("body", *err["loc"])} for err in e.errors()]) from None
