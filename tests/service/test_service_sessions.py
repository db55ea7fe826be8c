"""The session and episode API of verify-cli serve: a real uvicorn on loopback, the real bwrap
sandbox, sample_tasks; the trainer's agent loop played by the Python client and httpx."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import SAMPLE_TASKS
from tests.service.conftest import Served, reference_files, start_server
from verify_cli.client import AsyncVerifyClient, ServiceRequestError, VerifyClient
from verify_cli.grading import Grader, GradeRequest, Phase
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

ROMAN = SAMPLE_TASKS / "coding-roman-numerals"
IDLE = 2.0


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    s = start_server([SAMPLE_TASKS], "--jobs", "2", "--max-sessions", "2", "--session-idle-seconds", str(IDLE))
    yield s
    s.stop()


def test_an_episode_written_to_the_reference_is_rewarded_one(served: Served) -> None:
    with VerifyClient(served.url) as client:
        info = client.open_session("coding/roman-numerals")
        sid = info["session_id"]
        assert info["editable"] == ["roman.py"]
        assert "roman.py" in info["files"] and "tests/test_roman.py" in info["files"]
        assert not any(f.startswith(("hidden_tests", "solution")) for f in info["files"])
        probe = client.session_exec(sid, "ls hidden_tests solution; echo out; echo err >&2; exit 3")
        assert probe["verdict"] == "nonzero_exit" and probe["exit_code"] == 3
        assert "out" in probe["stdout"] and "err" in probe["stderr"]
        client.session_write(sid, "roman.py", reference_files(ROMAN)["roman.py"])
        assert client.session_read(sid, "roman.py") == reference_files(ROMAN)["roman.py"]
        state = client.session_exec(sid, "echo kept > notes.txt && cat notes.txt")
        assert state["stdout"] == "kept\n"
        assert client.session_read(sid, "notes.txt") == "kept\n"  # the session's state persists
        tests = client.session_run_tests(sid)
        assert tests["status"] == "graded" and tests["failed"] == 0 and tests["passed"] >= 1
        assert all(t["id"].startswith("tests.") for t in tests["tests"])  # the visible tests only
        reward = client.session_submit(sid)
        assert reward["status"] == "passed" and reward["score"] == 1.0 and not reward["replayed"]
        assert any(t["id"].startswith("hidden_tests.") for t in reward["tests"])  # graded by the full tests
        again = client.session_submit(sid)
        assert again["replayed"] and again["score"] == 1.0 and again["tests"] == reward["tests"]
        with pytest.raises(ServiceRequestError) as ended:
            client.session_exec(sid, "true")
        assert ended.value.status == 410 and ended.value.code == "session_ended"


def test_the_starter_is_rewarded_its_in_process_grade_through_the_async_client(served: Served) -> None:
    task = load_task(ROMAN)
    with Grader(create_sandbox("bwrap")) as grader:
        expected = grader.grade(GradeRequest(task=task, phase=Phase.STARTER)).score

    async def episode() -> dict[str, object]:
        async with AsyncVerifyClient(served.url) as client:
            sid = (await client.open_session("coding/roman-numerals"))["session_id"]
            assert "NotImplementedError" in await client.session_read(sid, "roman.py")
            ran = await client.session_run_tests(sid)
            assert ran["failed"] >= 1 and ran["passed"] == 0
            return await client.session_submit(sid)

    reward = asyncio.run(episode())
    assert reward["status"] == "failed" and reward["score"] == expected


def test_bad_requests_name_their_field_and_a_full_table_answers_429(served: Served) -> None:
    u = served.url
    r = httpx.post(f"{u}/v1/sessions", json={"task_id": "no/such-task"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "/task_id"
    r = httpx.post(f"{u}/v1/sessions", json={"task_id": "coding/roman-numerals", "image": "x"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "/image"
    r = httpx.post(f"{u}/v1/sessions/0123/exec", json={"command": "true"})
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_session"
    with VerifyClient(served.url) as client:
        a = client.open_session("coding/roman-numerals")["session_id"]
        b = client.open_session(task_path=str(SAMPLE_TASKS / "coding-interval-merge"))["session_id"]
        try:
            r = httpx.post(f"{u}/v1/sessions/{a}/exec", json={"cmd": "ls"})
            assert r.status_code == 422 and r.json()["error"]["field"] == "/command"
            r = httpx.post(f"{u}/v1/sessions/{a}/exec", json={"command": "true", "timeout": 10_000})
            assert r.status_code == 422 and r.json()["error"]["field"] == "/timeout"
            r = httpx.post(f"{u}/v1/sessions/{a}/read", json={"path": "missing.py"})
            assert r.status_code == 422 and r.json()["error"]["code"] == "file_error"
            full = httpx.post(f"{u}/v1/sessions", json={"task_id": "coding/roman-numerals"})
            assert full.status_code == 429 and full.json()["error"]["code"] == "sessions_full"
            assert int(full.headers["retry-after"]) >= 1
            assert served.metric("verify_serve_sessions_open") == 2
        finally:
            client.close_session(a)
            client.close_session(b)
        assert served.metric("verify_serve_sessions_open") == 0
        with pytest.raises(ServiceRequestError) as gone:
            client.session_read(a, "roman.py")
        assert gone.value.status == 410 and "deleted" in gone.value.message


def test_an_idle_session_is_reclaimed(served: Served) -> None:
    before = served.metric('verify_serve_sessions_ended_total{reason="reclaimed"}')
    with VerifyClient(served.url) as client:
        sid = client.open_session("coding/roman-numerals")["session_id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and served.metric("verify_serve_sessions_open") > 0:
            time.sleep(0.5)
        with pytest.raises(ServiceRequestError) as gone:
            client.session_exec(sid, "true")
    assert gone.value.status == 410 and "reclaimed" in gone.value.message
    assert served.metric('verify_serve_sessions_ended_total{reason="reclaimed"}') == before + 1


def test_sessions_are_in_the_openapi_schema(served: Served) -> None:
    schema = httpx.get(f"{served.url}/openapi.json").json()
    for path in ("/v1/sessions", "/v1/sessions/{session_id}/exec", "/v1/sessions/{session_id}/read",
                 "/v1/sessions/{session_id}/write", "/v1/sessions/{session_id}/run_tests",
                 "/v1/sessions/{session_id}/submit", "/v1/sessions/{session_id}"):
        assert path in schema["paths"], path
    assert "delete" in schema["paths"]["/v1/sessions/{session_id}"]
    reward = schema["components"]["schemas"]["Reward"]
    assert {"status", "score", "tests"} <= set(reward["properties"])


def test_the_sessions_still_open_are_closed_on_drain(tmp_path: Path) -> None:
    s = start_server([SAMPLE_TASKS], "--max-sessions", "2")
    try:
        with VerifyClient(s.url) as client:
            client.open_session("coding/roman-numerals")
            client.open_session("coding/interval-merge")
        assert s.stop(signal.SIGTERM) == 0
    finally:
        s.stop(signal.SIGKILL)
    events = [json.loads(line) for line in s.stderr_lines if line.startswith("{")]
    closed = [e for e in events if e.get("event") == "sessions closed"]
    assert closed and closed[0]["sessions"] == 2


def test_run_tests_over_the_service_says_why_the_candidate_did_not_load(served: Served) -> None:
    with VerifyClient(served.url) as client:
        sid = client.open_session("coding/roman-numerals")["session_id"]
        client.session_write(sid, "roman.py", "TABLE = missing_table()\n")
        ran = client.session_run_tests(sid)
        assert ran["status"] == "graded" and ran["passed"] == 0, ran
        assert 'File "roman.py", line 1' in ran["why"] and "NameError" in ran["why"], ran
        client.session_submit(sid)


def test_session_calls_answer_alike_on_the_fast_lane_and_through_fastapi(served: Served) -> None:
    """A well-formed exec, read or write (application/json) skips FastAPI's stack; a JSON body
    of another declared type (``+json``) goes through the route: the answers are the same."""
    u = served.url
    lanes = {"fast": {"content-type": "application/json"}, "route": {"content-type": "application/vnd.api+json"}}
    with VerifyClient(served.url) as client:
        sid = client.open_session("coding/roman-numerals")["session_id"]
        try:
            answers: dict[str, list[tuple[int, object]]] = {}
            for lane, headers in lanes.items():
                got = answers.setdefault(lane, [])
                for path, body in ((f"/v1/sessions/{sid}/write", {"path": "n.txt", "content": "é\n"}),
                                   (f"/v1/sessions/{sid}/read", {"path": "n.txt"}),
                                   (f"/v1/sessions/{sid}/exec", {"command": "cat n.txt; echo e >&2; exit 4"}),
                                   (f"/v1/sessions/{sid}/exec", {"command": "true", "timeout": 10_000}),
                                   (f"/v1/sessions/{sid}/read", {"path": "missing.txt"}),
                                   ("/v1/sessions/0123/exec", {"command": "true"})):
                    r = httpx.post(f"{u}{path}", content=json.dumps(body).encode(), headers=headers)
                    assert r.headers.get("x-request-id")
                    data = r.json()
                    if isinstance(data, dict):
                        data.pop("wall_seconds", None)
                    got.append((r.status_code, data))
                bad = httpx.post(f"{u}/v1/sessions/{sid}/exec", content=b'{"command": ', headers=headers)
                got.append((bad.status_code, bad.json()["error"]["code"]))
        finally:
            client.close_session(sid)
    assert answers["fast"] == answers["route"]
    statuses = [status for status, _ in answers["fast"]]
    assert statuses == [200, 200, 200, 422, 422, 404, 422]
    assert answers["fast"][2][1]["stdout"] == "é\n" and answers["fast"][2][1]["exit_code"] == 4  # type: ignore[index]


def test_a_large_file_written_and_read_through_the_fast_lane_is_whole(served: Served) -> None:
    """Bodies and answers past fastlane.LARGE are decoded and encoded on a worker thread."""
    text = "".join(f"line {i} é\n" for i in range(120_000))  # about 1.4 MB
    with VerifyClient(served.url) as client:
        sid = client.open_session("coding/roman-numerals")["session_id"]
        try:
            client.session_write(sid, "big.txt", text)
            assert client.session_read(sid, "big.txt") == text
            counted = client.session_exec(sid, "wc -l < big.txt")
        finally:
            client.close_session(sid)
    assert counted["stdout"].strip() == "120000"
