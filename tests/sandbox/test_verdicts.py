"""Typed verdicts of every registered backend on small misbehaving programs.

Parametrised over the registry (``any_sandbox``: process, bwrap, docker in its default node mode,
docker single-use); a backend that cannot run here skips with the reason. A backend's own
promises (docker's labels, users, pools) stay in its own test module.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.conftest import PYTHON_IMAGE
from verify_cli.sandbox.base import MAX_RESULT_FILE_BYTES, Limits, RunResult, RunSpec, Sandbox, Verdict

WALL = 3.0  # generous for a loaded CI machine, small enough that a hang is caught fast


def run_python(box: Sandbox, workdir: Path, code: str, **limits: object) -> RunResult:
    lim = Limits(**{"wall_seconds": WALL, "memory_mb": 256, **limits})  # type: ignore[arg-type]
    return box.run(RunSpec(command=["python", "-c", code], workdir=workdir, limits=lim,
                           runtime="python", image=PYTHON_IMAGE))


def spec(workdir: Path, command: list[str], **kw: object) -> RunSpec:
    return RunSpec(command=command, workdir=workdir, limits=Limits(wall_seconds=WALL),
                   image=PYTHON_IMAGE, runtime="python", **kw)  # type: ignore[arg-type]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    (d / "data.txt").write_text("from the caller\n")
    return d


def test_ok(any_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(any_sandbox, workdir, "print(open('data.txt').read().strip())")
    assert r.verdict is Verdict.OK
    assert r.exit_code == 0
    assert r.signal is None
    assert r.stdout.text == "from the caller\n"
    assert r.stdout.truncated is False
    assert r.backend == any_sandbox.name
    d = json.loads(json.dumps(r.to_dict()))
    assert (d["verdict"], d["stdout"]["text"]) == ("ok", "from the caller\n")


def test_nonzero_exit(any_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(
        any_sandbox, workdir,
        "import sys; print('out'); sys.stderr.write('bad input\\n'); sys.exit(3)"
    )
    assert r.verdict is Verdict.NONZERO_EXIT
    assert r.exit_code == 3
    assert (r.stdout.text, r.stderr.text) == ("out\n", "bad input\n")


def test_timeout_kills_the_children_too(any_sandbox: Sandbox, workdir: Path) -> None:
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    )
    start = time.monotonic()
    r = run_python(any_sandbox, workdir, code, wall_seconds=1.5)
    assert r.verdict is Verdict.TIMEOUT
    assert r.message.startswith("exceeded the wall-clock limit")
    # The grandchild held the output pipes: the run only ends this fast if it died as well.
    assert time.monotonic() - start < 1.5 + 5


def test_busy_loop_is_a_timeout(any_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(any_sandbox, workdir, "while True: pass", wall_seconds=1.5)
    assert r.verdict is Verdict.TIMEOUT


def test_memory_limit(any_sandbox: Sandbox, workdir: Path) -> None:
    # Touch every page, so the memory is really used (a bare calloc would not count).
    code = "b = bytearray(1 << 30)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
    r = run_python(any_sandbox, workdir, code, memory_mb=64)
    assert r.verdict is Verdict.MEMORY_LIMIT, (r.verdict, r.message, r.stderr.text[-500:])


def test_output_flood_is_stopped_fast(any_sandbox: Sandbox, workdir: Path) -> None:
    code = (
        "import sys\nw = sys.stdout.buffer.write\nw(b'BEGIN')\n"
        "for _ in range(1600): w(b'x' * 65536)\nw(b'END')\n"
    )  # about 100 MB
    start = time.monotonic()
    r = run_python(any_sandbox, workdir, code, output_bytes=64 * 1024, wall_seconds=30)
    elapsed = time.monotonic() - start
    assert r.verdict is Verdict.OUTPUT_LIMIT
    assert r.message.startswith("exceeded the output limit")
    assert r.message.endswith("; the run was stopped")
    assert elapsed < 10  # stopped at the limit, not at the wall clock (30 s)
    out = r.stdout
    assert out.truncated is True
    assert out.total_bytes > 64 * 1024
    assert out.head.startswith(b"BEGIN")
    assert len(out.head) == 32 * 1024
    assert 0 < len(out.tail) <= 32 * 1024
    assert "bytes omitted" in out.text


def test_stderr_flood_is_stopped_too(any_sandbox: Sandbox, workdir: Path) -> None:
    code = "import sys\nfor _ in range(1600): sys.stderr.buffer.write(b'e' * 65536)\n"
    r = run_python(any_sandbox, workdir, code, output_bytes=64 * 1024)
    assert r.verdict is Verdict.OUTPUT_LIMIT
    assert r.stderr.truncated is True


def test_sigkill_self(any_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(
        any_sandbox, workdir, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    )
    assert r.verdict is Verdict.SIGNAL
    assert r.signal == signal.SIGKILL
    assert r.message == "killed by signal 9 (SIGKILL)"


def test_segfault(any_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(any_sandbox, workdir, "import ctypes; ctypes.string_at(0)")
    assert r.verdict is Verdict.SIGNAL
    assert r.signal == signal.SIGSEGV


def test_environment_is_scrubbed_and_pinned(
    any_sandbox: Sandbox, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFY_TEST_HOST_SECRET", "must-not-leak")
    monkeypatch.setenv("TZ", "Europe/Paris")
    monkeypatch.setenv("PYTHONHASHSEED", "1234")
    code = "import json, os; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))"
    r = run_python(any_sandbox, workdir, code)
    assert r.verdict is Verdict.OK, r.stderr.text
    seen = json.loads(r.stdout.text)
    env, cwd = seen["env"], seen["cwd"]
    assert "VERIFY_TEST_HOST_SECRET" not in env
    assert "must-not-leak" not in r.stdout.text
    assert env["PYTHONHASHSEED"] == "0"
    assert env["TZ"] == "UTC"
    assert env["HOME"] == cwd == env["VERIFY_WORKDIR"]
    assert env["VERIFY_RESULTS_DIR"]


def test_spec_env_is_applied_last(any_sandbox: Sandbox, workdir: Path) -> None:
    r = any_sandbox.run(spec(workdir, ["python", "-c", "import os; print(os.environ['PYTHONHASHSEED'])"],
                             env={"PYTHONHASHSEED": "42"}))
    assert r.stdout.text == "42\n"


def test_results_folder_files_are_returned(any_sandbox: Sandbox, workdir: Path) -> None:
    code = (
        "import os, pathlib\n"
        "d = pathlib.Path(os.environ['VERIFY_RESULTS_DIR'])\n"
        "(d / 'junit.xml').write_bytes(b'<testsuites/>')\n"
        "(d / 'sub').mkdir()\n"
        "(d / 'sub' / 'more.xml').write_text('more')\n"
        f"(d / 'big.bin').write_bytes(bytes({MAX_RESULT_FILE_BYTES + 1}))\n"
    )
    r = run_python(any_sandbox, workdir, code, memory_mb=1024)  # docker: results on a tmpfs
    assert r.verdict is Verdict.OK, r.stderr.text
    # A file over the per-file bound does not come back.
    assert dict(r.results) == {"junit.xml": b"<testsuites/>", "sub/more.xml": b"more"}


def test_stdin_is_fed(any_sandbox: Sandbox, workdir: Path) -> None:
    r = any_sandbox.run(spec(workdir, ["python", "-c", "import sys; print(sys.stdin.read().upper())"],
                             stdin=b"hello"))
    assert r.stdout.text == "HELLO\n"


def test_argv_environment_and_stdin_reach_the_command_verbatim(any_sandbox: Sandbox,
                                                                workdir: Path) -> None:
    odd = ["it's", 'a "quote"', "multi\nline", "$HOME", "`id`", "-n", "", "\\"]
    code = ("import json, os, sys; d = sys.stdin.buffer.read(); print(json.dumps("
            "[sys.argv[1:], os.environ['ODD'], len(d), d[:5].decode()]))")
    r = any_sandbox.run(spec(workdir, ["python", "-c", code, *odd],
                             env={"ODD": "a'b\n$(id)"},
                             stdin=b"hello" + bytes(100_000)))
    assert r.verdict is Verdict.OK, r.stderr.text
    assert json.loads(r.stdout.text) == [odd, "a'b\n$(id)", 100_005, "hello"]


def test_missing_program_is_not_the_codes_fault(any_sandbox: Sandbox, workdir: Path) -> None:
    r = any_sandbox.run(spec(workdir, ["/definitely/not/a/program"]))
    assert r.verdict in (Verdict.SETUP_ERROR, Verdict.NONZERO_EXIT)
    assert r.verdict is not Verdict.OK
