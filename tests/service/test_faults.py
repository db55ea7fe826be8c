"""Load and faults: 429 when full, deadlines, a drain on SIGTERM, SIGKILL and a restart."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.conftest import SLOW_SECONDS, Served, make_slow_task, reference_files, start_server
from verify_cli.client import VerifyClient

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

SLOW = "test/slow-merge"


def slow_candidates(task_dir: Path, n: int, prefix: str) -> list[dict[str, Any]]:
    files = reference_files(task_dir)
    return [{"id": f"{prefix}-{i}", "task_id": SLOW, "files": files, "seed": i} for i in range(n)]


def wait_for(predicate: Any, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


@pytest.fixture
def slow_set(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    root.mkdir()
    make_slow_task(root)
    return root


def test_a_full_queue_answers_429_and_the_client_retries_until_answered(slow_set: Path) -> None:
    s = start_server([slow_set], "--jobs", "1", "--queue-size", "1")
    task = slow_set / "test-slow-merge"
    try:
        first: list[httpx.Response] = []
        t = threading.Thread(target=lambda: first.append(httpx.post(
            f"{s.url}/v1/grade", json={"candidates": slow_candidates(task, 2, "fill")}, timeout=120)))
        t.start()
        wait_for(lambda: httpx.get(f"{s.url}/healthz").json()["running"] == 1)
        r = httpx.post(f"{s.url}/v1/grade", json={"candidates": slow_candidates(task, 1, "over")})
        assert r.status_code == 429, r.text
        assert int(r.headers["retry-after"]) >= 1 and r.json()["error"]["code"] == "queue_full"
        too_big = httpx.post(f"{s.url}/v1/grade", json={"candidates": slow_candidates(task, 3, "big")})
        assert too_big.status_code == 422 and too_big.json()["error"]["field"] == "/candidates"
        with VerifyClient(s.url, max_wait=5) as client:
            result = client.grade(SLOW, files=reference_files(task))
            assert client.throttled >= 1
        assert (result["status"], result["score"]) == ("graded", 1.0)
        t.join(120)
        assert [x["score"] for x in first[0].json()["results"]] == [1.0, 1.0]
        assert s.metric('verify_serve_rejected_total{reason="queue_full"}', token=None) >= 2
    finally:
        s.stop()


def test_a_deadline_answers_infra_error_never_a_score(slow_set: Path) -> None:
    s = start_server([slow_set], "--jobs", "1")
    task = slow_set / "test-slow-merge"
    try:
        r = httpx.post(f"{s.url}/v1/grade", timeout=60, json={
            "candidates": slow_candidates(task, 2, "late"), "deadline_seconds": SLOW_SECONDS * 0.6})
        results = r.json()["results"]
        assert [(x["status"], x["score"]) for x in results] == [("infra_error", None)] * 2, results
        assert all("deadline" in x["problems"][0] for x in results)
    finally:
        s.stop()


def test_sigterm_drains_in_flight_work_then_answers_the_rest_infra_error(slow_set: Path) -> None:
    # One worker: the slow candidate finishes within the drain, the one queued behind it (25 s of
    # tests) cannot, and the service still exits soon after the drain.
    make_slow_task(slow_set, "test/very-slow", seconds=25)
    s = start_server([slow_set], "--jobs", "1", "--drain-seconds", "8")
    task = slow_set / "test-slow-merge"
    batch = [*slow_candidates(task, 1, "drain"),
             {"task_id": "test/very-slow", "files": reference_files(slow_set / "test-very-slow")}]
    lines: list[dict[str, Any]] = []

    def stream() -> None:
        with httpx.stream("POST", f"{s.url}/v1/grade", timeout=120, json={"candidates": batch, "stream": True}) as r:
            for line in r.iter_lines():
                if line.strip():
                    lines.append(json.loads(line))

    t = threading.Thread(target=stream)
    t.start()
    wait_for(lambda: httpx.get(f"{s.url}/healthz").json()["running"] == 1)
    s.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    t.join(120)
    assert s.proc.wait(60) == 0
    assert time.monotonic() - signalled < 20
    assert lines[-1] == {"end": True, "count": 2}
    by_index = {x["index"]: x for x in lines[:-1]}
    assert (by_index[0]["status"], by_index[0]["score"]) == ("graded", 1.0)
    assert (by_index[1]["status"], by_index[1]["score"]) == ("infra_error", None)
    assert "shut down" in by_index[1]["problems"][0]
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{s.url}/healthz")


def _kill_mid_batch(slow_set: Path, journal: Path, n: int,
                    seen_before_kill: int) -> tuple[Served, list[dict[str, Any]]]:
    s = start_server([slow_set], "--jobs", "1", journal=journal)
    task = slow_set / "test-slow-merge"
    acknowledged: list[dict[str, Any]] = []
    killed = threading.Event()

    def stream() -> None:
        try:
            with httpx.stream("POST", f"{s.url}/v1/grade", timeout=120,
                              json={"candidates": slow_candidates(task, n, "kill"), "stream": True}) as r:
                for line in r.iter_lines():
                    if line.strip():
                        acknowledged.append(json.loads(line))
                        if len(acknowledged) == seen_before_kill:
                            s.proc.send_signal(signal.SIGKILL)
                            killed.set()
        except httpx.TransportError:
            pass

    t = threading.Thread(target=stream)
    t.start()
    t.join(120)
    assert killed.is_set() and s.proc.wait(30) == -signal.SIGKILL
    return s, acknowledged


def test_sigkill_mid_batch_loses_no_acknowledged_result(slow_set: Path, tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    n = 4
    killed, acknowledged = _kill_mid_batch(slow_set, journal, n, seen_before_kill=2)
    assert len(acknowledged) == 2
    s = start_server([slow_set], "--jobs", "1", port=killed.port, journal=journal)
    task = slow_set / "test-slow-merge"
    try:
        started = time.monotonic()
        r = httpx.post(f"{s.url}/v1/grade", timeout=120, json={"candidates": slow_candidates(task, n, "kill")})
        results = r.json()["results"]
        assert [x["id"] for x in results] == [f"kill-{i}" for i in range(n)]
        for before in acknowledged:
            again = results[before["index"]]
            assert again["replayed"] is True
            assert {k: v for k, v in again.items() if k != "replayed"} == {
                k: v for k, v in before.items() if k != "replayed"}
        assert all(x["score"] == 1.0 for x in results)
        graded_again = [x for x in results if not x["replayed"]]
        assert len(graded_again) <= n - 2  # the acknowledged two were not graded again
        assert time.monotonic() - started < SLOW_SECONDS * (n - 1) + 20
        reused = httpx.post(f"{s.url}/v1/grade", json={"candidates": [
            {"id": "kill-0", "task_id": SLOW, "files": {"intervals.py": "x = 1\n"}}]})
        assert reused.status_code == 409 and reused.json()["error"]["field"] == "/candidates/0/id"
    finally:
        s.stop()


def test_the_client_rides_out_a_restart_without_losing_or_repeating_a_result(slow_set: Path,
                                                                             tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    s = start_server([slow_set], "--jobs", "1", journal=journal)
    task = slow_set / "test-slow-merge"
    got: list[dict[str, Any]] = []
    restarted: list[Served] = []
    n = 4

    def grade() -> None:
        with VerifyClient(s.url, max_retries=60, max_wait=1.0) as client:
            for r in client.iter_grade(slow_candidates(task, n, "ride")):
                got.append(r)

    t = threading.Thread(target=grade)
    t.start()
    try:
        wait_for(lambda: len(got) >= 1)
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(30)
        restarted.append(start_server([slow_set], "--jobs", "1", port=s.port, journal=journal))
        t.join(180)
        assert sorted(r["index"] for r in got) == list(range(n))
        assert sorted(r["id"] for r in got) == [f"ride-{i}" for i in range(n)]
        assert all((r["status"], r["score"]) == ("graded", 1.0) for r in got)
    finally:
        for r in restarted:
            r.stop()
