"""SandboxFusion's compiled languages in ``/run_code``: C++ and Go compiled and run in one image of
Debian toolchains built once (``serve --sandbox docker --run-code-languages cpp,go``), a compile
error graded as a failure with the compiler's output (never infrastructure), and a language
whose toolchain this service lacks answered SandboxFusion's ``SandboxError`` saying what to do."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.framework_extras import run_child
from tests.conftest import REPO_ROOT, SAMPLE_TASKS
from tests.service.conftest import Served, start_server
from verify_cli.errors import UsageError
from verify_cli.sandbox.environment import DEFAULT_PATH
from verify_cli.service.languages import parse_languages

CPP_SUM = "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n"
CHILD = Path(__file__).with_name("verl_sandbox_fusion_child.py")
GO_SUM = 'package main\nimport "fmt"\nfunc main() { var a, b int; fmt.Scan(&a, &b); fmt.Println(a + b) }\n'


@pytest.fixture(scope="module")
def toolchain_service() -> Iterator[Served]:
    """A docker service with the C++ and Go toolchains: their image is built here once (minutes
    the first time on a machine, then found in the environment store), then the service starts."""
    from verify_cli.sandbox.registry import create_sandbox
    from verify_cli.service.languages import Toolchains

    try:
        box = create_sandbox("docker")
    except Exception as e:  # any reason docker cannot start here is a skip
        pytest.skip(f"docker unavailable: {e}")
    try:
        Toolchains(box, ("cpp", "go")).prepare()
    finally:
        box.close()
    s = start_server([SAMPLE_TASKS / "coding-interval-merge"], "--sandbox", "docker", "--jobs", "2",
                     "--run-code-languages", "cpp,go")
    yield s
    s.stop()


def _run(served: Served, **body: Any) -> dict[str, Any]:
    r = httpx.post(f"{served.url}/run_code", json=body, timeout=120)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.mark.docker
def test_cpp_and_go_compile_and_run_with_sandbox_fusions_answers(toolchain_service: Served) -> None:
    assert {"cpp", "go"} <= set(httpx.get(f"{toolchain_service.url}/healthz").json()["run_code_languages"])
    for language, code in (("cpp", CPP_SUM), ("go", GO_SUM)):
        ok = _run(toolchain_service, language=language, code=code, stdin="2 40\n")
        assert ok["status"] == "Success", ok
        assert ok["compile_result"]["status"] == "Finished" and ok["compile_result"]["return_code"] == 0, ok
        assert ok["run_result"]["stdout"] == "42\n" and ok["run_result"]["return_code"] == 0, ok


@pytest.mark.docker
@pytest.mark.parametrize(("language", "code", "says"), [
    ("cpp", "int main() { return undefined_name; }\n", "undefined_name"),
    ("go", "package main\nfunc main() { x := 1 }\n", "declared"),
], ids=["cpp", "go"])
def test_a_compile_error_is_a_graded_failure_with_the_compilers_output(toolchain_service: Served, language: str,
                                                                        code: str, says: str) -> None:
    out = _run(toolchain_service, language=language, code=code)
    assert out["status"] == "Failed" and out["run_result"] is None, out
    assert out["compile_result"]["status"] == "Finished" and out["compile_result"]["return_code"] != 0, out
    assert says in out["compile_result"]["stderr"] + out["compile_result"]["stdout"], out


@pytest.mark.docker
def test_compiled_runs_fail_exit_and_time_out_as_sandbox_fusion_says(toolchain_service: Served) -> None:
    crash = _run(toolchain_service, language="go", code='package main\nfunc main() { panic("boom") }\n')
    assert crash["status"] == "Failed" and crash["run_result"]["return_code"] == 2, crash
    assert "boom" in crash["run_result"]["stderr"]
    slow = _run(toolchain_service, language="cpp", run_timeout=1,
                code="#include <unistd.h>\nint main() { sleep(30); return 0; }\n")
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded", slow
    assert slow["compile_result"]["return_code"] == 0
    assert slow["run_result"]["execution_time"] < 5


@pytest.mark.docker
def test_verls_check_correctness_grades_cpp_as_sandbox_fusion_would(toolchain_service: Served,
                                                                     tmp_path: Path) -> None:
    """verl's own client, language="cpp": a right program passes every case, a wrong one fails
    them, one that does not compile is verl's -4 (compile error) on every case, never -1."""
    wrong = CPP_SUM.replace("a + b", "a - b")
    cases = {"inputs": ["1 2\n", "40 2\n", "5 5\n"], "outputs": ["3\n", "42\n", "10\n"]}
    out = run_child("verl", CHILD, {"mode": "compiled", "url": f"{toolchain_service.url}/run_code", "language": "cpp",
                                    "in_outs": cases, "programs": [CPP_SUM, wrong, "int main( {"]},
                    tmp_path / "out.json", timeout=300)
    right, wrong_out, broken = (p["results"] for p in out["programs"])
    assert right == [True, True, True], out
    assert wrong_out == [False, False, False], out
    assert broken == [-4, -4, -4], out


@pytest.mark.docker
def test_a_language_without_its_toolchain_says_how_to_get_it(toolchain_service: Served) -> None:
    out = _run(toolchain_service, language="rust", code="fn main() {}\n")
    assert out["status"] == "SandboxError", out
    assert "--run-code-languages rust" in out["message"]


@pytest.mark.bwrap
def test_bwrap_uses_the_hosts_compilers_or_says_to_use_docker(served: Served) -> None:
    java = httpx.post(f"{served.url}/run_code", json={"language": "java", "code": "class Main {}"},
                      headers=served.headers(), timeout=60).json()
    assert java["status"] == "SandboxError" and "--sandbox docker" in java["message"], java
    if shutil.which("g++", path=DEFAULT_PATH) is None:
        return
    cpp = httpx.post(f"{served.url}/run_code", json={"language": "cpp", "code": CPP_SUM, "stdin": "1 2"},
                     headers=served.headers(), timeout=60).json()
    assert cpp["status"] == "Success" and cpp["run_result"]["stdout"] == "3\n", cpp


def test_languages_outside_the_table_are_refused_by_name(served: Served) -> None:
    r = httpx.post(f"{served.url}/run_code", json={"language": "php", "code": "<?php echo 1;"},
                   headers=served.headers())
    assert r.status_code == 422 and r.json()["error"]["field"] == "/language"
    with pytest.raises(UsageError, match="php"):
        parse_languages("cpp,php")
    assert parse_languages("go, cpp,go") == ("go", "cpp")


def test_serve_refuses_a_language_it_cannot_give_a_toolchain() -> None:
    proc = subprocess.run([sys.executable, "-m", "verify_cli", "serve", str(SAMPLE_TASKS), "--run-code-languages",
                           "cpp,php"], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert proc.returncode != 0
    assert "php" in proc.stderr and "choose from cpp, go, java, rust, typescript" in proc.stderr, proc.stderr
