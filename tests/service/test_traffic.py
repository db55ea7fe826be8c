"""The service under real traffic: small answers leave at once, large and slow requests are
bounded, odd text gets a JSON answer, and the journal neither grades an id twice nor replays a
score of a task that has changed since."""

from __future__ import annotations

import json
import shutil
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import SAMPLE_TASKS
from tests.service.conftest import Served, make_slow_task, reference_files, start_server

HEADER_TIMEOUT = 1.5
BODY_TIMEOUT = 2.0
MAX_CONNECTIONS = 24


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A service with short header/body timeouts, a small connection cap and a journal."""
    extra = tmp_path_factory.mktemp("slow")
    make_slow_task(extra)
    journal = tmp_path_factory.mktemp("journal") / "journal.jsonl"
    s = start_server([SAMPLE_TASKS, extra], "--jobs", "2", "--header-timeout", str(HEADER_TIMEOUT),
                     "--body-timeout", str(BODY_TIMEOUT), "--max-connections", str(MAX_CONNECTIONS),
                     journal=journal)
    yield s
    s.stop()


def _median_ms(call: object, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()  # type: ignore[operator]
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def test_small_answers_do_not_wait_for_a_delayed_ack(bounded: Served) -> None:
    # Without TCP_NODELAY on the accepted socket each answer waited ~40 ms (Nagle + the client's
    # delayed ACK): /healthz 45 ms, a session exec of `true` 51 ms.
    with httpx.Client(base_url=bounded.url) as c:
        c.get("/healthz")
        health = _median_ms(lambda: c.get("/healthz"), 30)
        sid = c.post("/v1/sessions", json={"task_id": "coding/interval-merge"}).json()["session_id"]
        try:
            c.post(f"/v1/sessions/{sid}/exec", json={"command": "true"})
            exec_ms = _median_ms(lambda: c.post(f"/v1/sessions/{sid}/exec", json={"command": "true"}), 15)
        finally:
            c.delete(f"/v1/sessions/{sid}")
    assert health < 20, f"/healthz took {health:.1f} ms (median)"
    assert exec_ms < 38, f"a session exec of true took {exec_ms:.1f} ms (median)"


def test_a_body_of_100k_candidates_is_refused_without_stalling_the_loop(bounded: Served) -> None:
    body = json.dumps({"candidates": [{"id": f"c{i}", "task_id": "coding/interval-merge",
                                       "files": {"intervals.py": "def merge(x):\n    return x\n"}}
                                      for i in range(100_000)]}).encode()
    assert len(body) > 5_000_000
    health: list[float] = []
    stop, ready = threading.Event(), threading.Event()

    def probe() -> None:
        # at least one probe overlaps the upload: the first answers before the post starts, and
        # the loop measures once more after the refusal (a fast refusal used to leave none)
        with httpx.Client(base_url=bounded.url) as c:
            while True:
                t0 = time.perf_counter()
                c.get("/healthz")
                health.append(time.perf_counter() - t0)
                ready.set()
                if stop.is_set():
                    return

    before = httpx.get(f"{bounded.url}/healthz").json()["loop_block_ms_max"]
    prober = threading.Thread(target=probe)
    prober.start()
    assert ready.wait(30), "the /healthz prober never got an answer"
    try:
        r = httpx.post(f"{bounded.url}/v1/grade", content=body, headers={"content-type": "application/json"},
                       timeout=60)
    finally:
        stop.set()
        prober.join()
    assert r.status_code == 422 and r.json()["error"]["code"] == "batch_too_large", r.text[:300]
    after = httpx.get(f"{bounded.url}/healthz").json()["loop_block_ms_max"]
    # the old service decoded and validated the body on the loop: /healthz waited 14 s
    assert max(health) < 0.5, f"/healthz waited {max(health):.2f} s"
    assert after == before or after < 100, f"the event loop stalled {after} ms"


def test_a_request_head_that_never_finishes_is_cut(bounded: Served) -> None:
    with socket.create_connection(("127.0.0.1", bounded.port), timeout=HEADER_TIMEOUT + 8) as s:
        s.sendall(b"POST /v1/grade HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        answer = s.recv(4096)
        assert b"408" in answer.split(b"\r\n", 1)[0], answer
        assert b"header_timeout" in answer
        assert s.recv(4096) == b""  # closed
    assert time.monotonic() - t0 < HEADER_TIMEOUT + 5


@pytest.mark.parametrize(("path", "start"), [(b"/v1/grade", b'{"candidates": ['),
                                             (b"/v1/sessions/0123/exec", b'{"command": ')],  # the fast lane
                         ids=["grade", "session-exec"])
def test_a_trickled_body_is_cut(bounded: Served, path: bytes, start: bytes) -> None:
    with socket.create_connection(("127.0.0.1", bounded.port), timeout=BODY_TIMEOUT + 8) as s:
        s.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                  b"content-length: 1000\r\n\r\n" + start)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b" 408 " in head.split(b"\r\n", 1)[0], answer
    assert json.loads(body)["error"]["code"] == "body_timeout"


def test_connections_past_the_cap_are_refused_and_the_service_recovers(bounded: Served) -> None:
    idle = [socket.create_connection(("127.0.0.1", bounded.port)) for _ in range(MAX_CONNECTIONS + 5)]
    try:
        time.sleep(0.3)
        with httpx.Client(base_url=bounded.url) as c:
            refused = c.get("/healthz")
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "too_many_connections"
    finally:
        for s in idle:
            s.close()
    time.sleep(0.5)
    assert httpx.get(f"{bounded.url}/healthz").status_code == 200
    # half-open connections that never send are closed by the header timeout
    lingering = [socket.create_connection(("127.0.0.1", bounded.port)) for _ in range(MAX_CONNECTIONS - 4)]
    try:
        time.sleep(HEADER_TIMEOUT + 1.5)
        assert httpx.get(f"{bounded.url}/healthz").status_code == 200
        for s in lingering:
            s.settimeout(2)
            assert b"408" in s.recv(4096)
    finally:
        for s in lingering:
            s.close()


def test_a_lone_surrogate_gets_a_json_error_not_a_500(bounded: Served) -> None:
    headers = {"content-type": "application/json"}
    with httpx.Client(base_url=bounded.url, headers=headers) as c:
        grade = c.post("/v1/grade", content=b'{"candidates": [{"task_id": "coding/interval-merge", '
                       b'"files": {"intervals.py": "x = \'\\ud800\'"}}]}')
        run = c.post("/run_code", content=b'{"code": "print(\\"\\ud800\\")", "language": "python"}')
        sid = c.post("/v1/sessions", json={"task_id": "coding/interval-merge"}).json()["session_id"]
        try:
            write = c.post(f"/v1/sessions/{sid}/write", content=b'{"path": "a.py", "content": "\\udfff"}')
        finally:
            c.delete(f"/v1/sessions/{sid}")
    for r in (grade, run, write):
        assert r.status_code == 400, r.text
        assert r.json()["error"]["code"] == "invalid_unicode"
    assert grade.json()["error"]["field"] == "/candidates/0/files/intervals.py"


def test_the_same_id_sent_twice_at_once_is_graded_once(bounded: Served) -> None:
    files = reference_files(SAMPLE_TASKS / "coding-interval-merge")
    slow = {"intervals.py": files["intervals.py"]}
    body = {"candidates": [{"id": "twice-at-once", "task_id": "test/slow-merge", "files": slow}]}
    graded_before = bounded.metric('verify_serve_runs_total{status="graded"}', None)
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: httpx.post(f"{bounded.url}/v1/grade", json=body, timeout=60).json(),
                                range(2)))
    results = [a["results"][0] for a in answers]
    assert [r["score"] for r in results] == [1.0, 1.0]
    assert sorted(r["replayed"] for r in results) == [False, True]
    assert bounded.metric('verify_serve_runs_total{status="graded"}', None) == graded_before + 1


def test_the_journal_grades_an_id_again_after_the_tasks_tests_changed(tmp_path: Path) -> None:
    task = tmp_path / "tasks" / "coding-interval-merge"
    shutil.copytree(SAMPLE_TASKS / "coding-interval-merge", task)
    files = reference_files(task)
    s = start_server([tmp_path / "tasks"], "--jobs", "1", journal=tmp_path / "journal.jsonl")
    try:
        body = {"candidates": [{"id": "stable-id", "task_id": "coding/interval-merge", "files": files}]}
        first = httpx.post(f"{s.url}/v1/grade", json=body, timeout=120).json()["results"][0]
        assert first["score"] == 1.0
        again = httpx.post(f"{s.url}/v1/grade", json=body, timeout=120).json()["results"][0]
        assert again["replayed"] is True  # unchanged task: answered from the journal
        (task / "tests" / "test_new_rule.py").write_text("def test_new_rule():\n    assert False\n")
        changed = httpx.post(f"{s.url}/v1/grade", json=body, timeout=120).json()["results"][0]
    finally:
        s.stop()
    assert changed["replayed"] is False
    assert changed["score"] < 1.0


def test_two_services_on_the_default_journal_both_start(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    first = start_server([SAMPLE_TASKS / "coding-interval-merge"], "--jobs", "1", env=env, default_journal=True)
    try:
        second = start_server([SAMPLE_TASKS / "coding-interval-merge"], "--jobs", "1", env=env,
                              default_journal=True)
        try:
            assert httpx.get(f"{second.url}/healthz").status_code == 200
        finally:
            second.stop()
    finally:
        first.stop()
    journals = sorted(p.name for p in (tmp_path / "state" / "verify-cli").iterdir())
    assert journals == ["serve-journal-2.jsonl", "serve-journal.jsonl"]
