"""verl's SandboxFusion reward against ``serve --jobs 2`` at 32 and 128 requests at once: its
client treats a 429 as a failed case and gives up after compile + run + 10 s, so the service
holds requests for a worker (and answers 504, which verl retries, when none frees in time):
every case gets its true result, round after round."""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.adapters.framework_extras import run_child
from tests.conftest import SAMPLE_TASKS
from tests.service.conftest import Served, start_server

CHILD = Path(__file__).with_name("verl_sandbox_fusion_child.py")


@pytest.fixture(scope="module")
def two_jobs() -> Iterator[Served]:
    s = start_server([SAMPLE_TASKS / "coding-interval-merge"], "--jobs", "2", "--queue-size", "4")
    yield s
    s.stop()


@pytest.mark.parametrize(("parallel", "rounds"), [(1, 2), (4, 1)], ids=["32-at-once", "128-at-once"])
def test_verls_sandbox_fusion_reward_gets_every_case_right(two_jobs: Served, tmp_path: Path, parallel: int,
                                                           rounds: int) -> None:
    out = run_child("verl", CHILD, {"url": f"{two_jobs.url}/run_code", "cases": 32, "parallel": parallel,
                                    "rounds": rounds}, tmp_path / "out.json", timeout=600)
    for r in out["rounds"]:
        # before: 22 of 32 cases passed (0.688), then 0.375 (abandoned runs stayed queued)
        assert r["scores"] == [1.0] * parallel, r
        assert r["statuses"] == ["success"], r
    assert two_jobs.metric('verify_serve_rejected_total{reason="queue_full"}', None) == 0


def test_verls_check_correctness_gets_each_verdict_right_under_load(two_jobs: Served, tmp_path: Path) -> None:
    """verl's own high-load case: 100 cases at once, some wrong, some past the time limit (each
    holding a worker for the whole limit), against two workers: every case its true verdict."""
    out = run_child("verl", CHILD, {"mode": "mixed", "url": f"{two_jobs.url}/run_code", "cases": 100,
                                    "slow": [5, 30, 60, 90], "wrong": [10, 25, 50], "timeout": 3},
                    tmp_path / "out.json", timeout=600)
    wrong = [(i, got, want, status) for i, (got, want, status)
             in enumerate(zip(out["results"], out["expected"], out["statuses"], strict=True)) if got != want]
    assert wrong == [], wrong[:5]


def test_run_code_never_answers_429_and_drops_work_whose_client_left(two_jobs: Served) -> None:
    sleeper = {"code": "import time; time.sleep(3)", "language": "python", "run_timeout": 10}
    # fill both workers, then queue requests whose clients hang up at once
    socks = []
    for _ in range(2):
        s = socket.create_connection(("127.0.0.1", two_jobs.port))
        body = httpx.Request("POST", "http://x/run_code", json=sleeper).read()
        s.sendall(b"POST /run_code HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        socks.append(s)
    time.sleep(0.5)
    quitters = []
    for _ in range(6):
        s = socket.create_connection(("127.0.0.1", two_jobs.port))
        body = httpx.Request("POST", "http://x/run_code", json={"code": "print(1)", "language": "python"}).read()
        s.sendall(b"POST /run_code HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        quitters.append(s)
    time.sleep(0.3)
    for s in quitters:
        s.close()
    answered = httpx.post(f"{two_jobs.url}/run_code", json={"code": "print(7)", "language": "python"},
                          timeout=40)
    assert answered.status_code == 200 and answered.json()["run_result"]["stdout"] == "7\n"
    for s in socks:
        s.settimeout(20)
        assert b" 200 " in s.recv(65536).split(b"\r\n", 1)[0]
        s.close()
    assert two_jobs.metric('verify_serve_rejected_total{reason="client_gone"}', None) >= 6
    assert two_jobs.metric('verify_serve_rejected_total{reason="queue_full"}', None) == 0


def test_verls_client_reaches_a_service_with_a_token_through_its_url(served: Served, tmp_path: Path) -> None:
    """verl's SandboxFusion client sends no headers of its own: the token rides in the URL."""
    from tests.service.conftest import TOKEN

    good = run_child("verl", CHILD, {"url": f"{served.url}/run_code?token={TOKEN}", "cases": 3, "parallel": 1,
                                     "rounds": 1}, tmp_path / "good.json", timeout=300)
    assert good["rounds"][0]["scores"] == [1.0]
    bad = run_child("verl", CHILD, {"url": f"{served.url}/run_code?token=wrong", "cases": 3, "parallel": 1,
                                    "rounds": 1}, tmp_path / "bad.json", timeout=300)
    assert bad["rounds"][0]["scores"] == [0.0] and bad["rounds"][0]["statuses"] == ["api_error"]
    assert httpx.post(f"{served.url}/run_code?token=wrong", json={"code": "print(1)", "language": "python"}
                      ).status_code == 401


def test_a_running_run_whose_client_left_is_killed_and_its_worker_freed(two_jobs: Served) -> None:
    """Both workers busy with runs of 60 s whose clients hang up after 1.5 s: the runs are killed
    (their processes, children included, are gone) and the next request is served at once."""
    from verify_cli.sandbox.kit.conformance import processes_with_token

    token = f"vc-gone-{secrets.token_hex(6)}"
    code = ("import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{token}'])\n"
            "time.sleep(60)\n")
    gone_before = two_jobs.metric('verify_serve_rejected_total{reason="client_gone"}', None)

    def quitter() -> None:
        with contextlib.suppress(httpx.TimeoutException):
            httpx.post(f"{two_jobs.url}/run_code", json={"code": code, "language": "python", "run_timeout": 60},
                       timeout=1.5)

    threads = [threading.Thread(target=quitter) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    started = time.monotonic()
    answered = httpx.post(f"{two_jobs.url}/run_code", json={"code": "print(7)", "language": "python"}, timeout=40)
    took = time.monotonic() - started
    assert answered.status_code == 200 and answered.json()["run_result"]["stdout"] == "7\n", answered.text
    assert took < 10, f"the next request waited {took:.1f} s for a worker"  # before: 504 after 18 s
    deadline = time.monotonic() + 10
    while processes_with_token(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with_token(token) == [], "a killed run's child outlived it"
    assert two_jobs.metric('verify_serve_rejected_total{reason="client_gone"}', None) == gone_before + 2
    health = httpx.get(f"{two_jobs.url}/healthz").json()
    assert health["running"] == 0 and health["queued"] == 0, health
