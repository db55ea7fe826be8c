"""``/run_code`` as verl's sandbox_fusion reward calls it.

verl is not installed here (``pip install verl`` 0.9.1 would replace transformers), so the test
sends the exact request verl sends: the payload, headers and URL of ``call_sandbox_api`` in
``verl/utils/reward_score/sandbox_fusion/utils.py`` (volcengine/verl at b178a3cd), and reads the
answer with the same fields ``_process_single_case`` reads (``status``, ``run_result.status``,
``run_result.return_code``, ``run_result.stdout``), deciding as it decides.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from tests.service.conftest import TOKEN, Served

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


def call_sandbox_api(url: str, code: str, stdin: str | None, compile_timeout: int, run_timeout: int,
                     memory_limit_mb: int, language: str = "python", token: str = TOKEN) -> httpx.Response:
    # verl's payload, field for field, serialised as it serialises it (json.dumps, data=).
    payload = json.dumps({
        "compile_timeout": compile_timeout,
        "run_timeout": run_timeout,
        "code": code,
        "stdin": stdin,
        "memory_limit_MB": memory_limit_mb,
        "language": language,
        "files": {},
        "fetch_files": [],
    })
    headers = {"Content-Type": "application/json", "Accept": "application/json",
               "Authorization": f"Bearer {token}"}
    return httpx.post(url, headers=headers, content=payload, timeout=compile_timeout + run_timeout + 10)


def verl_case_status(api_response: dict[str, Any], expected_output: str | None) -> Any:
    """``_process_single_case``'s decision: True, False, -1 (sandbox/API error), -2 (runtime
    error), -3 (timeout), -4 (compile error)."""
    status = api_response.get("status")
    run = api_response.get("run_result") or {}
    compile_result = api_response.get("compile_result")
    if status == "SandboxError":
        return -1
    if status == "Failed":
        if compile_result and (compile_result.get("status") in ("Error", "TimeLimitExceeded")
                               or compile_result.get("return_code") != 0):
            return -4
        if run.get("status") == "TimeLimitExceeded":
            return -3
        if run.get("status") == "Error" or (run.get("status") == "Finished" and run.get("return_code") != 0):
            return -2
        return -1
    if status == "Success":
        if run.get("status") != "Finished":
            return -1
        actual = run.get("stdout") or ""
        return expected_output is None or actual.rstrip("\n") == expected_output.rstrip("\n")
    return -1


@pytest.mark.parametrize(("code", "stdin", "expected", "verdict"), [
    ("a, b = map(int, input().split())\nprint(a + b)\n", "2 3", "5", True),
    ("a, b = map(int, input().split())\nprint(a - b)\n", "2 3", "5", False),
    ("raise SystemExit(3)\n", None, "", -2),
    ("import sys\nsys.stdout.write('x')\n1/0\n", None, "x", -2),
    ("while True:\n    pass\n", None, "", -3),
])
def test_verl_scores_run_code_answers(served: Served, code: str, stdin: str | None, expected: str,
                                      verdict: Any) -> None:
    r = call_sandbox_api(f"{served.url}/run_code", code, stdin, compile_timeout=2, run_timeout=2,
                         memory_limit_mb=256)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert set(answer) == {"status", "message", "compile_result", "run_result", "executor_pod_name", "files"}
    assert verl_case_status(answer, expected) == verdict, answer


def test_run_code_contains_the_code_and_fetches_files(served: Served) -> None:
    code = ("import os, socket\nprint(open('data/in.txt').read().strip())\n"
            "open('out.txt', 'w').write('written')\n"
            "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=1)\n    print('NET')\n"
            "except OSError:\n    print('no network')\n")
    r = httpx.post(f"{served.url}/run_code", headers=served.headers(), json={
        "code": code, "language": "python", "files": {"data/in.txt": base64.b64encode(b"hello").decode()},
        "fetch_files": ["out.txt", "missing.txt"]})
    answer = r.json()
    assert answer["status"] == "Success", answer
    assert answer["run_result"]["stdout"].splitlines() == ["hello", "no network"]
    assert base64.b64decode(answer["files"]["out.txt"]) == b"written"
    assert "missing.txt" not in answer["files"]
    node = httpx.post(f"{served.url}/run_code", headers=served.headers(),
                      json={"code": "console.log(6 * 7)", "language": "nodejs"}).json()
    assert (node["status"], node["run_result"]["stdout"]) == ("Success", "42\n")
    bash = httpx.post(f"{served.url}/run_code", headers=served.headers(),
                      json={"code": "read x; echo \"got $x\"", "stdin": "it\n", "language": "bash"}).json()
    assert (bash["status"], bash["run_result"]["stdout"]) == ("Success", "got it\n")


def test_run_code_memory_limit_is_a_failure_not_success(served: Served) -> None:
    r = call_sandbox_api(f"{served.url}/run_code", "x = bytearray(400 * 1024 * 1024)\nprint('big')\n", None,
                         compile_timeout=2, run_timeout=5, memory_limit_mb=128)
    answer = r.json()
    assert answer["status"] == "Failed", answer
    assert verl_case_status(answer, "big") == -2


def test_sandbox_fusion_parity_ping_memory_fetch_and_mime_base64(served: Served) -> None:
    assert httpx.get(f"{served.url}/v1/ping").json() == "pong"  # no token, as SandboxFusion
    # memory_limit_MB -1 (SandboxFusion's default) is no limit: 1.5 GB of address space is fine
    big = httpx.post(f"{served.url}/run_code", headers=served.headers(), json={
        "code": "x = bytearray(1536 * 1024 * 1024)\nprint(len(x) // 2**20)", "language": "python",
        "memory_limit_MB": -1}, timeout=60).json()
    assert (big["status"], big["run_result"]["stdout"]) == ("Success", "1536\n"), big
    content = bytes(range(256)) * 2
    mime = base64.encodebytes(content).decode()  # 76-character lines
    assert "\n" in mime.strip()
    r = httpx.post(f"{served.url}/run_code", headers=served.headers(), json={
        "code": "import shutil\nshutil.copy('blob.bin', '/tmp/copied.bin')\nprint(len(open('blob.bin', 'rb').read()))",
        "language": "python", "files": {"blob.bin": mime}, "fetch_files": ["/tmp/copied.bin", "blob.bin"]},
        timeout=60).json()
    assert (r["status"], r["run_result"]["stdout"]) == ("Success", "512\n"), r
    assert base64.b64decode(r["files"]["/tmp/copied.bin"]) == content
    assert base64.b64decode(r["files"]["blob.bin"]) == content
    escape = httpx.post(f"{served.url}/run_code", headers=served.headers(), json={
        "code": "print(1)", "language": "python", "fetch_files": ["/tmp/../../etc/passwd"]})
    assert escape.status_code == 422 and escape.json()["error"]["field"] == "/fetch_files/0"
