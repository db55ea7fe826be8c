"""Typed verdicts of the local backends (process, bwrap) on small misbehaving programs."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest

from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Sandbox, Verdict

WALL = 3.0  # generous for a loaded CI machine, small enough that a hang is caught fast


def run_python(box: Sandbox, workdir: Path, code: str, **limits: object) -> RunResult:
    lim = Limits(**{"wall_seconds": WALL, "memory_mb": 256, **limits})  # type: ignore[arg-type]
    return box.run(
        RunSpec(command=[sys.executable, "-c", code], workdir=workdir, limits=lim, runtime="python")
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    (d / "data.txt").write_text("from the caller\n")
    return d


def test_ok(local_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(local_sandbox, workdir, "print(open('data.txt').read().strip())")
    assert r.verdict is Verdict.OK
    assert r.exit_code == 0
    assert r.signal is None
    assert r.stdout.text == "from the caller\n"
    assert r.stdout.truncated is False
    assert r.backend == local_sandbox.name


def test_nonzero_exit(local_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(
        local_sandbox, workdir, "import sys; sys.stderr.write('bad input\\n'); sys.exit(3)"
    )
    assert r.verdict is Verdict.NONZERO_EXIT
    assert r.exit_code == 3
    assert r.stderr.text == "bad input\n"


def test_timeout(local_sandbox: Sandbox, workdir: Path) -> None:
    start = time.monotonic()
    r = run_python(local_sandbox, workdir, "import time; time.sleep(60)", wall_seconds=1.5)
    assert r.verdict is Verdict.TIMEOUT
    assert r.message == "exceeded the wall-clock limit"
    assert time.monotonic() - start < 1.5 + 5


def test_timeout_kills_the_children_too(local_sandbox: Sandbox, workdir: Path) -> None:
    code = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    )
    start = time.monotonic()
    r = run_python(local_sandbox, workdir, code, wall_seconds=1.5)
    assert r.verdict is Verdict.TIMEOUT
    # The grandchild held the output pipes: the run only ends this fast if it died as well.
    assert time.monotonic() - start < 1.5 + 5


def test_busy_loop_is_a_timeout(local_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(local_sandbox, workdir, "while True: pass", wall_seconds=1.5)
    assert r.verdict is Verdict.TIMEOUT


def test_memory_limit(local_sandbox: Sandbox, workdir: Path) -> None:
    # Touch every page, so the memory is really used (a bare calloc would not count).
    code = "b = bytearray(1 << 30)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
    r = run_python(local_sandbox, workdir, code, memory_mb=64)
    assert r.verdict is Verdict.MEMORY_LIMIT, (r.verdict, r.message, r.stderr.text[-500:])


def test_output_flood_is_stopped_fast(local_sandbox: Sandbox, workdir: Path) -> None:
    code = (
        "import sys\nw = sys.stdout.buffer.write\nw(b'BEGIN')\n"
        "for _ in range(1600): w(b'x' * 65536)\nw(b'END')\n"
    )  # about 100 MB
    start = time.monotonic()
    r = run_python(local_sandbox, workdir, code, output_bytes=64 * 1024)
    elapsed = time.monotonic() - start
    assert r.verdict is Verdict.OUTPUT_LIMIT
    assert r.message == "exceeded the output limit; the run was stopped"
    assert elapsed < WALL  # stopped at the limit, not at the wall clock
    out = r.stdout
    assert out.truncated is True
    assert out.total_bytes > 64 * 1024
    assert out.head.startswith(b"BEGIN")
    assert len(out.head) == 32 * 1024
    assert 0 < len(out.tail) <= 32 * 1024
    assert "bytes omitted" in out.text


def test_stderr_flood_is_stopped_too(local_sandbox: Sandbox, workdir: Path) -> None:
    code = "import sys\nfor _ in range(1600): sys.stderr.buffer.write(b'e' * 65536)\n"
    r = run_python(local_sandbox, workdir, code, output_bytes=64 * 1024)
    assert r.verdict is Verdict.OUTPUT_LIMIT
    assert r.stderr.truncated is True


def test_sigkill_self(local_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(
        local_sandbox, workdir, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    )
    assert r.verdict is Verdict.SIGNAL
    assert r.signal == signal.SIGKILL
    assert r.message == "killed by signal 9 (SIGKILL)"


def test_segfault(local_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(local_sandbox, workdir, "import ctypes; ctypes.string_at(0)")
    assert r.verdict is Verdict.SIGNAL
    assert r.signal == signal.SIGSEGV


def test_environment_is_scrubbed_and_pinned(
    local_sandbox: Sandbox, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIFY_TEST_HOST_SECRET", "must-not-leak")
    monkeypatch.setenv("TZ", "Europe/Paris")
    monkeypatch.setenv("PYTHONHASHSEED", "1234")
    code = "import json, os; print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd()}))"
    r = run_python(local_sandbox, workdir, code)
    assert r.verdict is Verdict.OK, r.stderr.text
    seen = json.loads(r.stdout.text)
    env, cwd = seen["env"], seen["cwd"]
    assert "VERIFY_TEST_HOST_SECRET" not in env
    assert "must-not-leak" not in r.stdout.text
    assert env["PYTHONHASHSEED"] == "0"
    assert env["TZ"] == "UTC"
    assert env["HOME"] == cwd == env["VERIFY_WORKDIR"]
    assert env["VERIFY_RESULTS_DIR"]


def test_spec_env_is_applied_last(local_sandbox: Sandbox, workdir: Path) -> None:
    spec = RunSpec(
        command=[sys.executable, "-c", "import os; print(os.environ['PYTHONHASHSEED'])"],
        workdir=workdir,
        limits=Limits(wall_seconds=WALL),
        env={"PYTHONHASHSEED": "42"},
    )
    r = local_sandbox.run(spec)
    assert r.stdout.text == "42\n"


def test_results_folder_files_are_returned(local_sandbox: Sandbox, workdir: Path) -> None:
    code = (
        "import os, pathlib\n"
        "d = pathlib.Path(os.environ['VERIFY_RESULTS_DIR'])\n"
        "(d / 'junit.xml').write_bytes(b'<testsuites/>')\n"
        "(d / 'sub').mkdir()\n"
        "(d / 'sub' / 'more.xml').write_text('more')\n"
    )
    r = run_python(local_sandbox, workdir, code)
    assert r.verdict is Verdict.OK, r.stderr.text
    assert dict(r.results) == {"junit.xml": b"<testsuites/>", "sub/more.xml": b"more"}


def test_stdin_is_fed(local_sandbox: Sandbox, workdir: Path) -> None:
    spec = RunSpec(
        command=[sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"],
        workdir=workdir,
        limits=Limits(wall_seconds=WALL),
        stdin=b"hello",
    )
    r = local_sandbox.run(spec)
    assert r.stdout.text == "HELLO\n"


def test_missing_program_is_not_the_codes_fault(local_sandbox: Sandbox, workdir: Path) -> None:
    spec = RunSpec(
        command=["/definitely/not/a/program"], workdir=workdir, limits=Limits(wall_seconds=WALL)
    )
    r = local_sandbox.run(spec)
    assert r.verdict in (Verdict.SETUP_ERROR, Verdict.NONZERO_EXIT)
    assert r.verdict is not Verdict.OK


def test_to_dict_is_json(local_sandbox: Sandbox, workdir: Path) -> None:
    r = run_python(local_sandbox, workdir, "print('hi')")
    d = json.loads(json.dumps(r.to_dict()))
    assert d["verdict"] == "ok"
    assert d["stdout"]["text"] == "hi\n"
