"""/v1/grade bodies read off the event loop: decoded one candidate at a time, refused as soon as
they outnumber the capacity, and every malformed body a JSON error naming its field."""

from __future__ import annotations

import json
import time

import pytest
from fastapi.exceptions import RequestValidationError

from verify_cli.service.bodies import lone_surrogate, parse_grade_body
from verify_cli.service.core import ServiceError

CAND = {"task_id": "t/1", "files": {"a.py": "x = 1\n"}}


def body(n: int, **extra: object) -> bytes:
    return json.dumps({"candidates": [dict(CAND, id=f"c{i}") for i in range(n)], **extra}).encode()


def test_a_body_within_capacity_parses_as_the_model() -> None:
    parsed = parse_grade_body(body(3, stream=True, deadline_seconds=5), capacity=3)
    assert [c.id for c in parsed.candidates] == ["c0", "c1", "c2"] and parsed.stream and parsed.deadline_seconds == 5
    assert parse_grade_body([b'{"candidates": [', json.dumps(CAND).encode(), b"]}"], capacity=1).candidates


def test_more_candidates_than_capacity_are_refused_without_reading_the_rest() -> None:
    huge = body(100_000)
    started = time.perf_counter()
    with pytest.raises(ServiceError) as e:
        parse_grade_body(huge, capacity=66)
    assert time.perf_counter() - started < 1.0
    assert (e.value.status, e.value.code, e.value.field) == (422, "batch_too_large", "/candidates")
    # the rest is never decoded: garbage after the 67th candidate does not matter
    cut = huge[:huge.index(b'"c70"')] + b"not json at all"
    with pytest.raises(ServiceError) as e:
        parse_grade_body(cut, capacity=66)
    assert e.value.code == "batch_too_large"


@pytest.mark.parametrize(("raw", "where"), [
    (b'{"candidates": [{"task_id": "t/1", "files": {"a.py": "\\ud800"}}]}', "/candidates/0/files/a.py"),
    (b'{"candidates": [{"task_id": "t/1", "files": {"\\udfff.py": "x"}}]}', "/candidates/0/files/\udfff.py"),
    (b'{"candidates": [], "label": "\\ud800"}', "/label"),
])
def test_a_lone_surrogate_is_named_by_its_field(raw: bytes, where: str) -> None:
    with pytest.raises(ServiceError) as e:
        parse_grade_body(raw, capacity=4)
    assert (e.value.status, e.value.code) == (400, "invalid_unicode")
    assert e.value.field == where


def test_a_surrogate_pair_is_text_not_an_error() -> None:
    parsed = parse_grade_body(b'{"candidates": [{"task_id": "t/1", "files": {"a.py": "\\ud83d\\ude00"}}]}', 2)
    assert parsed.candidates[0].files == {"a.py": "\U0001F600"}
    assert lone_surrogate({"a": ["ok", "\ud800"]}) == "/a/1"


@pytest.mark.parametrize("raw", [b'{"candidates": [1,', b'{"candidates": []} x', b"\xff\xfe", b"[1, 2"])
def test_malformed_json_is_invalid_json_on_body(raw: bytes) -> None:
    with pytest.raises(ServiceError) as e:
        parse_grade_body(raw, capacity=4)
    assert (e.value.code, e.value.field) == ("invalid_json", "/body")


def test_a_bad_field_is_a_validation_error_with_its_place() -> None:
    with pytest.raises(RequestValidationError) as e:
        parse_grade_body(json.dumps({"candidates": [CAND, {"task_id": "t/1"}]}).encode(), capacity=4)
    assert e.value.errors()[0]["loc"][:3] == ("body", "candidates", 1)
    with pytest.raises(RequestValidationError):
        parse_grade_body(b"", capacity=4)
