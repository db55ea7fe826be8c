"""verify-cli serve end to end: a real uvicorn on loopback, the real bwrap sandbox, sample_tasks."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import SAMPLE_TASKS
from tests.service.conftest import TOKEN, Served, reference_files, start_server
from verify_cli.client import AsyncVerifyClient, ServiceRequestError, VerifyClient
from verify_cli.grading import Grader, GradeRequest, Phase
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.paths import list_files, matches_any

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

SAMPLE_DIRS = sorted(p for p in SAMPLE_TASKS.iterdir() if (p / "task.toml").is_file())


def starter_files(task_dir: Path) -> dict[str, str]:
    task = load_task(task_dir)
    return {rel: p.read_text() for rel, p in list_files(task_dir / "starter").items()
            if matches_any(task.editable, rel)}


@pytest.fixture(scope="module")
def starter_scores() -> dict[str, float | None]:
    """Each sample task's starter graded in this process by the Grader, as check-tasks grades it."""
    tasks = [load_task(d) for d in SAMPLE_DIRS]
    with Grader(create_sandbox("bwrap")) as grader:
        return {t.id: grader.grade(GradeRequest(task=t, phase=Phase.STARTER)).score for t in tasks}


def sample_batch() -> list[dict[str, object]]:
    """The reference and the starter of every sample task, as candidates."""
    batch: list[dict[str, object]] = []
    for d in SAMPLE_DIRS:
        task_id = load_task(d).id
        batch.append({"task_id": task_id, "files": reference_files(d), "label": "reference"})
        batch.append({"task_id": task_id, "files": starter_files(d), "label": "starter"})
    return batch


def check_sample_results(results: list[dict[str, Any]], starter_scores: dict[str, float | None]) -> None:
    assert len(results) == 2 * len(SAMPLE_DIRS)
    for r in results:
        assert r["status"] == "graded", r
        if r["label"] == "reference":
            assert r["score"] == 1.0 and r["passed"], r
            assert r["tests"] and all(t["outcome"] == "passed" for t in r["tests"])
        else:
            assert r["score"] == starter_scores[r["task_id"]] and not r["passed"], r
        assert r["timings"]["total_seconds"] >= r["timings"]["grade_seconds"] > 0


def test_reference_scores_one_and_starter_its_in_process_grade(
        served: Served, starter_scores: dict[str, float | None]) -> None:
    batch = sample_batch()
    with VerifyClient(served.url, token=TOKEN) as client:
        results = client.grade_batch(batch)
    assert [r["index"] for r in results] == list(range(len(batch)))
    check_sample_results(results, starter_scores)


def test_curl_grades_every_sample_reference_and_starter(served: Served,
                                                        starter_scores: dict[str, float | None]) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    base = [curl, "-sS", "-X", "POST", f"{served.url}/v1/grade", "-H", f"Authorization: Bearer {TOKEN}",
            "-H", "Content-Type: application/json", "--data-binary", "@-"]
    body = json.dumps({"candidates": sample_batch()})
    out = subprocess.run(base, input=body, capture_output=True, text=True, check=True, timeout=300)
    check_sample_results(json.loads(out.stdout)["results"], starter_scores)
    out = subprocess.run([*base, "-N", "-H", "Accept: application/x-ndjson"], input=body, capture_output=True,
                         text=True, check=True, timeout=300)
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert lines[-1] == {"end": True, "count": 2 * len(SAMPLE_DIRS)}
    assert sorted(r["index"] for r in lines[:-1]) == list(range(2 * len(SAMPLE_DIRS)))
    check_sample_results(lines[:-1], starter_scores)


def test_async_client_grades_a_completion_and_a_task_path(served: Served) -> None:
    d = SAMPLE_TASKS / "coding-roman-numerals"
    (name, source), = reference_files(d).items()
    completion = f"Here is my answer.\n\n```python {name}\n{source}```\n"

    async def go() -> list[dict[str, object]]:
        async with AsyncVerifyClient(served.url, token=TOKEN) as client:
            one = await client.grade("coding/roman-numerals", completion=completion)
            by_path = await client.grade(task_path=str(d), files={name: source})
            empty = await client.grade("coding/roman-numerals", completion="")
            return [one, by_path, empty]

    one, by_path, empty = asyncio.run(go())
    assert (one["status"], one["score"]) == ("graded", 1.0)
    assert (by_path["status"], by_path["score"], by_path["task_id"]) == ("graded", 1.0, "coding/roman-numerals")
    assert (empty["status"], empty["score"], empty["tests"]) == ("parse_error", 0.0, [])


def test_a_patch_is_applied_as_swebench_applies_one(served: Served) -> None:
    """A candidate given as a unified diff: the gold patch of a repository task passes; a diff
    that deletes the task's test file is the candidate's parse_error, its reason named."""
    gold = (SAMPLE_TASKS / "repo-inventory-package" / "solution.patch").read_text()
    deletes_test = ("diff --git a/tests/test_pricing.py b/tests/test_pricing.py\ndeleted file mode 100644\n"
                    "--- a/tests/test_pricing.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-import pytest\n")
    with VerifyClient(served.url, token=TOKEN) as client:
        good = client.grade("repository/inventory-package", patch=gold)
        bad = client.grade("repository/inventory-package", patch=deletes_test)
    assert (good["status"], good["score"], good["passed"]) == ("graded", 1.0, True), good
    assert (bad["status"], bad["score"]) == ("parse_error", 0.0)
    assert "deletes the test file 'tests/test_pricing.py'" in bad["problems"][0]


def test_openapi_lists_the_endpoints_and_models(served: Served) -> None:
    schema = httpx.get(f"{served.url}/openapi.json").json()
    assert {"/v1/grade", "/run_code", "/healthz", "/metrics", "/v1/tasks"} <= set(schema["paths"])
    models = set(schema["components"]["schemas"])
    assert {"GradeBody", "Candidate", "RunCodeRequest", "RunCodeResponse", "ErrorBody"} <= models
    run_code = schema["components"]["schemas"]["RunCodeRequest"]["properties"]
    assert {"compile_timeout", "run_timeout", "memory_limit_MB", "code", "stdin", "language", "files",
            "fetch_files"} == set(run_code)


def test_auth_refuses_missing_and_wrong_tokens(served: Served) -> None:
    body = {"candidates": [{"task_id": "coding/interval-merge", "files": {}}]}
    before = served.metric('verify_serve_runs_total{status="graded"}')
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
        r = httpx.post(f"{served.url}/v1/grade", json=body, headers=headers)
        assert r.status_code == 401, r.text
        assert r.json()["error"]["field"] == "/headers/authorization"
        assert r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(f"{served.url}/metrics").status_code == 401
    assert httpx.get(f"{served.url}/healthz").json()["status"] == "ok"  # a probe needs no token
    assert served.metric('verify_serve_runs_total{status="graded"}') == before


def test_a_service_off_loopback_without_a_token_refuses_to_start() -> None:
    import os
    import sys

    from tests.conftest import REPO_ROOT

    env = {k: v for k, v in os.environ.items() if k != "VERIFY_SERVE_TOKEN"}
    out = subprocess.run([sys.executable, "-m", "verify_cli", "serve", str(SAMPLE_TASKS), "--host", "0.0.0.0",
                          "--port", "0", "--no-journal"], capture_output=True, text=True, timeout=60,
                         env={**env, "PYTHONPATH": str(REPO_ROOT)})
    assert out.returncode == 2
    assert "without a token" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(("body", "status", "code", "field"), [
    ({"candidates": [{"task_id": "coding/interval-merg", "files": {}}]}, 422, "unknown_task", "/candidates/0/task_id"),
    ({"candidates": [{"task_path": "/etc", "files": {}}]}, 422, "unknown_task", "/candidates/0/task_path"),
    ({"candidates": [{"task_id": "coding/interval-merge", "files": {"intervals.py": 3}}]}, 422, "invalid_field",
     "/candidates/0/files/intervals.py"),
    ({"candidates": [{"task_id": "coding/interval-merge", "files": {"../x.py": "1"}}]}, 422, "invalid_path",
     "/candidates/0/files/..~1x.py"),
    ({"candidates": [{"task_id": "coding/interval-merge", "files_base64": {"intervals.py": "%%%"}}]}, 422,
     "invalid_base64", "/candidates/0/files_base64/intervals.py"),
    ({"candidates": [{"task_id": "coding/interval-merge"}]}, 422, "invalid_field", "/candidates/0"),
    ({"candidates": []}, 422, "invalid_field", "/candidates"),
    ({"candidates": [{"task_id": "coding/interval-merge", "files": {}, "colour": 1}]}, 422, "invalid_field",
     "/candidates/0/colour"),
    ({"code": "print(1)", "language": "php"}, 422, "unsupported_language", "/language"),
])
def test_bad_requests_name_the_field_and_grade_nothing(served: Served, body: dict[str, object], status: int,
                                                       code: str, field: str) -> None:
    # A good candidate first in each batch: refusing the request must not grade it either.
    before = served.metric('verify_serve_runs_total{status="graded"}')
    path = "/run_code" if "code" in body else "/v1/grade"
    if path == "/v1/grade" and body["candidates"]:
        body = {"candidates": [{"task_id": "coding/interval-merge", "files": {}}, *body["candidates"]]}  # type: ignore[list-item]
        field = field.replace("/candidates/0", "/candidates/1")
    r = httpx.post(f"{served.url}{path}", json=body, headers=served.headers())
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert (error["code"], error["field"]) == (code, field), error
    assert served.metric('verify_serve_runs_total{status="graded"}') == before


def test_oversized_and_malformed_bodies(served: Served) -> None:
    big = {"candidates": [{"task_id": "coding/interval-merge", "files": {"intervals.py": "#" * (2 * 1024 * 1024)}}]}
    r = httpx.post(f"{served.url}/v1/grade", json=big, headers=served.headers())
    assert r.status_code == 413 and r.json()["error"]["field"] == "/body"

    def chunks() -> object:  # no Content-Length: the limit holds on the stream too
        data = json.dumps(big).encode()
        for i in range(0, len(data), 65536):
            yield data[i:i + 65536]

    r = httpx.post(f"{served.url}/v1/grade", content=chunks(), headers={**served.headers(),
                                                                         "Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
    r = httpx.post(f"{served.url}/v1/grade", content=b'{"candidates": [', headers={
        **served.headers(), "Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["error"] ["code"] == "invalid_json"
    with VerifyClient(served.url, token=TOKEN) as client, pytest.raises(ServiceRequestError) as e:
        client.grade("no/such-task", files={})
    assert e.value.field == "/candidates/0/task_id" and e.value.status == 422


def test_metrics_and_json_logs_carry_the_request(served: Served) -> None:
    d = SAMPLE_TASKS / "coding-interval-merge"
    r = httpx.post(f"{served.url}/v1/grade", headers={**served.headers(), "X-Request-ID": "trace-42"},
                   json={"candidates": [{"task_id": "coding/interval-merge", "files": reference_files(d)}]})
    assert r.status_code == 200 and r.headers["x-request-id"] == "trace-42"
    text = httpx.get(f"{served.url}/metrics", headers=served.headers()).text
    for name in ("verify_serve_queue_depth", "verify_serve_running", "verify_serve_workers 2.0",
                 'verify_serve_runs_total{status="graded"}', "verify_serve_grade_seconds_bucket",
                 'verify_serve_request_seconds_count{route="/v1/grade"}', "verify_serve_warm_hit_rate",
                 "verify_serve_warm_workers_started"):
        assert name in text, name
    assert served.metric("verify_serve_warm_runs") >= 1  # the grading went warm
    logged = [json.loads(line) for line in served.stderr_lines if line.startswith("{")]
    mine = [e for e in logged if e.get("request_id") == "trace-42"]
    assert {"graded", "request"} <= {e["event"] for e in mine}
    assert any(e["event"] == "request" and e["status"] == 200 and e["path"] == "/v1/grade" for e in mine)


def test_task_sets_are_re_read_when_they_change(tmp_path: Path) -> None:
    shutil.copytree(SAMPLE_TASKS / "coding-interval-merge", tmp_path / "merge")
    s = start_server([tmp_path], "--jobs", "1")
    try:
        partial = {"intervals.py": "def merge_intervals(intervals):\n    return []\n"}  # passes 1 test of 6
        with VerifyClient(s.url) as client:
            assert client.grade("coding/interval-merge", files=partial)["score"] == 0.0
            toml = tmp_path / "merge" / "task.toml"
            toml.write_text(toml.read_text().replace('policy = "all-or-nothing"', 'policy = "fraction"'))
            assert client.grade("coding/interval-merge", files=partial)["score"] == pytest.approx(1 / 6)
            shutil.copytree(SAMPLE_TASKS / "coding-roman-numerals", tmp_path / "roman")  # a new task
            roman = SAMPLE_TASKS / "coding-roman-numerals"
            assert client.grade("coding/roman-numerals", files=reference_files(roman))["score"] == 1.0
    finally:
        s.stop()
