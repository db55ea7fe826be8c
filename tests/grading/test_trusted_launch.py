"""The trusted launcher's pieces, each against the real thing (no sandbox needed): the launcher
script keeps a planted module out, runner commands are rewritten to it, the node preloads are
named by path, conflicting seals fail the run, a backend that grades in-process refuses
candidates, and a stdio checker reads the candidate's output from a descriptor, not /tmp."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verify_cli.errors import UsageError
from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
from verify_cli.grading.seal import read_seals, seal_document
from verify_cli.grading.workspace import Phase
from verify_cli.kinds.runner import launched_runner_command
from verify_cli.sandbox.environment import HARNESS_DIR, pinned_environment
from verify_cli.sandbox.plumbing.trusted_launch import (
    CLOSE_SEAL_FD,
    LAUNCH_SCRIPT,
    MODULE_FLAGS,
    MOVE_SEAL_FD,
    PYTHON_FLAGS,
    SEAL_FD,
    SEAL_FD_ENV,
    SEAL_KEY_ENV,
    absolute_harness_requires,
    seal_key_pipe,
)
from verify_cli.sandbox.process import ProcessSandbox
from verify_cli.tasks.loader import load_task

ROOT = Path(__file__).resolve().parents[2]


def test_the_launcher_never_imports_from_the_working_folder(tmp_path: Path) -> None:
    # verify_shuffle imports random: a random.py in the working folder is what a candidate plants.
    (tmp_path / "random.py").write_text("raise SystemExit('planted random imported')\n")
    (tmp_path / "verify_shuffle.py").write_text("raise SystemExit('planted harness module imported')\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(HARNESS_DIR)}
    old = subprocess.run([sys.executable, "-m", "verify_shuffle"], cwd=tmp_path, capture_output=True,
                         text=True, env=env)
    assert "planted" in old.stderr  # the old way: the working folder first on sys.path
    (tmp_path / "verify_shuffle.py").unlink()
    old = subprocess.run([sys.executable, "-m", "verify_shuffle"], cwd=tmp_path, capture_output=True,
                         text=True, env=env)
    assert "planted random imported" in old.stderr
    (tmp_path / "verify_shuffle.py").write_text("raise SystemExit('planted harness module imported')\n")
    for flags in (MODULE_FLAGS, PYTHON_FLAGS):
        done = subprocess.run([sys.executable, *flags, str(HARNESS_DIR / LAUNCH_SCRIPT), "verify_shuffle"],
                              cwd=tmp_path, capture_output=True, text=True, env=env)
        assert done.returncode == 0 and "planted" not in done.stderr, (flags, done.stderr)


def test_a_launched_module_keeps_the_runs_hash_seed(tmp_path: Path) -> None:
    """A runner iterates sets as a cold run with the run's PYTHONHASHSEED does (why not -I)."""
    argv = [sys.executable, *MODULE_FLAGS, str(HARNESS_DIR / LAUNCH_SCRIPT), "timeit", "-n1", "-r1",
            "print(hash('verify'))"]
    seen = {subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "7"}).stdout.split("\n")[0]
            for _ in range(2)}
    assert len(seen) == 1 and seen != {""}, seen


def test_runner_commands_start_through_the_launcher() -> None:
    assert launched_runner_command("python -m verify_stdio") == \
        f'python -s "$VERIFY_HARNESS_DIR/{LAUNCH_SCRIPT}" verify_stdio'
    assert launched_runner_command("python3.11 -m verify_calls").startswith("python3.11 -s ")
    for other in ("python -m pytest tests", "python -m verify_stdio && true", "sh run.sh"):
        assert launched_runner_command(other) == other


def test_node_preloads_are_named_by_path() -> None:
    assert absolute_harness_requires("--require verify_node_guard --require verify_node_standin",
                                     "/opt/h") == \
        "--require /opt/h/verify_node_guard.js --require /opt/h/verify_node_standin.js"
    assert absolute_harness_requires("--max-old-space-size=64", "/opt/h") == "--max-old-space-size=64"
    env = pinned_environment(workdir="/w", results_dir="/r", harness_dir="/opt/h", tmp_dir="/tmp",
                             extra={"NODE_OPTIONS": "--require verify_node_guard"})
    assert env["NODE_OPTIONS"] == "--require /opt/h/verify_node_guard.js"
    assert env["PYTHONNOUSERSITE"] == "1"


def test_two_seals_that_disagree_are_a_forgery() -> None:
    key = "k" * 32
    _, real = seal_document(key, {"t::a": "passed", "t::b": "failed"})
    _, forged = seal_document(key, {"t::b": "passed"})
    record, problems = read_seals({"verify-seal-1.json": real, "verify-seal-9.json": forged}, key)
    assert record is not None and record.tampered  # the run is failed (kinds/record.py)
    assert any("disagree on t::b" in p and "forged" in p for p in problems), problems
    agreeing, problems = read_seals({"verify-seal-1.json": real, "verify-seal-2.json": real}, key)
    assert agreeing is not None and not agreeing.tampered and problems == []


class _InProcessOnly(ProcessSandbox):
    """The process backend with two-process switched off and candidates refused, as docker's
    single-use mode declares itself."""

    two_process = False
    two_process_missing = "this backend does not run two-process"
    refuses_candidates = "this backend does not grade candidates: use another mode"


def test_a_backend_that_grades_in_process_refuses_candidates() -> None:
    task = load_task(ROOT / "tests" / "fixtures" / "kinds" / "pytest" / "task")
    with _InProcessOnly() as box, Grader(box) as grader:
        ref = grader.grade(GradeRequest(task, Phase.REFERENCE))
        assert ref.status is GradeStatus.GRADED and ref.passed and ref.isolation == "in-process"
        wrong = {"solution.py": b"def double(x):\n    return 0\n"}
        probe = grader.grade(GradeRequest(task, Phase.PROBE, candidate=wrong))
        assert probe.status is GradeStatus.GRADED and not probe.passed
        with pytest.raises(UsageError, match="does not grade candidates"):
            grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={"solution.py": b""}))


def test_docker_single_use_says_which_mode_grades_candidates() -> None:
    from verify_cli.sandbox.docker.sandbox import DockerSandbox

    assert "--docker-mode node" in DockerSandbox.SINGLE_USE_REFUSES
    assert DockerSandbox.refuses_candidates == ""  # node mode, the default, grades them


def test_the_checker_reads_the_output_from_a_descriptor(tmp_path: Path) -> None:
    """verify_stdio.run_checker hands the checker /dev/fd/N (a memfd), never a path in /tmp."""
    sys.path.insert(0, str(HARNESS_DIR))
    try:
        import verify_stdio
    finally:
        sys.path.remove(str(HARNESS_DIR))
    checker = tmp_path / "check.py"
    checker.write_text("import sys, os\nprint(sys.argv[3])\nsys.exit(0 if open(sys.argv[3]).read() == '42\\n' "
                       "and sys.argv[3].startswith('/dev/fd/') else 1)\n")
    (tmp_path / "in").write_text("21\n")
    (tmp_path / "out").write_text("42\n")
    ok = verify_stdio.run_checker(f"{sys.executable} {checker}", str(tmp_path), str(tmp_path / "in"),
                                  str(tmp_path / "out"), b"42\n", 10.0)
    assert ok == ""
    said = verify_stdio.run_checker(f"{sys.executable} {checker}", str(tmp_path), str(tmp_path / "in"),
                                    str(tmp_path / "out"), b"41\n", 10.0)
    assert said.startswith("checker rejected the output") and "/dev/fd/" in said


def test_the_seal_key_reaches_one_reader_by_a_descriptor_and_no_environment(tmp_path: Path) -> None:
    """The key as a local backend hands it: the wrapper's stdin, moved to fd 9. The reader gets
    it and closes it; the wrapper's environment never had it; and what a process that can open
    the wrapper's descriptors through /proc finds afterwards is an empty pipe (the old way, the
    key sat in every environment of the launch chain: ``/proc/PID/environ`` of the shell)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(HARNESS_DIR), SEAL_KEY_ENV: "ab" * 16}
    key_fd = seal_key_pipe(env)
    assert key_fd is not None and SEAL_KEY_ENV not in env and env[SEAL_FD_ENV] == str(SEAL_FD)
    reader = (f"{sys.executable} -s -c 'import verify_runner_common as c; k = c.take_seal_key(); "
              "import os; print(k, os.environ.get(\"VERIFY_SEAL_FD\"))'")
    script = (f"{MOVE_SEAL_FD}\n{reader}\n"
              f"{sys.executable} -c 'print(open(\"/proc/self/fd/9\").read() or \"empty\")'\n"  # a second reader
              "tr '\\0' '\\n' < /proc/$$/environ | grep -c VERIFY_SEAL_KEY || true\n")
    try:
        out = subprocess.run(["/bin/sh", "-c", script], env=env, stdin=key_fd, capture_output=True,
                             text=True, timeout=60)
    finally:
        os.close(key_fd)
    assert out.stdout.split("\n")[:3] == ["ab" * 16 + " None", "empty", "0"], (out.stdout, out.stderr)


def test_the_docker_scripts_hand_the_key_on_a_descriptor() -> None:
    """Node mode's job script and single-use's runner script: the key only in a here-document on
    fd 9 (a pipe in dash), never in ``--setenv`` or ``export``; the candidate's start closes it."""
    from verify_cli.sandbox.base import CandidateProcess, Limits, RunSpec
    from verify_cli.sandbox.docker.nodes import job_script
    from verify_cli.sandbox.docker.scripts import runner_script

    key = "cd" * 16
    spec = RunSpec(["/bin/sh", "-c", "true"], ROOT, limits=Limits(), env={SEAL_KEY_ENV: key, "X": "1"})
    for text in (runner_script("nonce", spec, None).decode(),
                 job_script(spec, "m", "n", 10, 0).decode()):
        assert f"{SEAL_FD}<<'VERIFY_SEAL_END'\n{key}\nVERIFY_SEAL_END\n" in text
        assert text.count(key) == 1 and SEAL_KEY_ENV not in text and f"{SEAL_FD_ENV}" in text
    two = RunSpec(["/bin/sh", "-c", "true"], ROOT, limits=Limits(), env={SEAL_KEY_ENV: key},
                  candidate=CandidateProcess(command=("/bin/true",)))
    assert f"3>&-{CLOSE_SEAL_FD} &" in job_script(two, "m", "n", 10, 0).decode()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_bare_node_preload_is_found_in_the_work_folder_first(tmp_path: Path) -> None:
    """Why the preloads are named by path on every backend (docker's node mode named them bare
    until the contract test listed it): ``--require verify_node_guard`` looks in the working
    folder's ``node_modules`` before ``NODE_PATH``, so a candidate's file there ran in the
    trusted node process."""
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "verify_node_guard.js").write_text("console.log('planted');\n")
    env = {"PATH": os.environ["PATH"], "NODE_PATH": str(HARNESS_DIR)}
    bare = subprocess.run(["node", "-e", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**env, "NODE_OPTIONS": "--require verify_node_guard"})
    assert bare.stdout.strip() == "planted"
    fixed = absolute_harness_requires("--require verify_node_guard", str(HARNESS_DIR))
    by_path = subprocess.run(["node", "-e", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                             env={**env, "NODE_OPTIONS": fixed})
    assert by_path.returncode == 0 and "planted" not in by_path.stdout, by_path.stderr


def test_the_tests_interpreter_never_imports_a_plant_from_the_work_folder(tmp_path: Path) -> None:
    """A two-process pytest run's trusted variables keep the working folder (the shared work
    folder) off ``sys.path`` from the interpreter's start (``PYTHONSAFEPATH``), before the
    stand-in plugin takes it off: a ``pytest.py`` a candidate wrote there ran as the test
    process of a later session of the command (shown without the variable)."""
    from verify_cli.kinds.pytest import _trusted_env

    task = load_task(ROOT / "tests" / "fixtures" / "kinds" / "pytest" / "task")
    safe = _trusted_env(task, tmp_path, {})
    assert safe["PYTHONSAFEPATH"] == "1"
    (tmp_path / "pytest.py").write_text("raise SystemExit('planted pytest imported')\n")
    env = {"PATH": os.environ["PATH"], "PYTHONNOUSERSITE": "1"}
    old = subprocess.run([sys.executable, "-m", "pytest", "--version"], cwd=tmp_path, capture_output=True,
                         text=True, env=env, timeout=60)
    assert "planted pytest imported" in old.stderr
    new = subprocess.run([sys.executable, "-m", "pytest", "--version"], cwd=tmp_path, capture_output=True,
                         text=True, env={**env, "PYTHONSAFEPATH": safe["PYTHONSAFEPATH"]}, timeout=60)
    assert new.returncode == 0 and "planted" not in new.stderr, new.stderr


@pytest.mark.bwrap
@pytest.mark.parametrize("engine", ["perl", "python"])
def test_the_no_links_shim_marks_the_folders_and_keeps_the_uid(engine: str, tmp_path: Path) -> None:
    """verify_no_links.sh (perl, or Python where an image has no perl), in a bwrap sandbox as the
    tests' side runs (its own user namespace, uid 1000, no capabilities): a link on a marked
    folder is not followed (ELOOP), readlink still reads it, the command keeps its uid and holds
    no capability, and what is not marked (``/bin/sh`` behind merged-usr's links) resolves."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "real.txt").write_text("x")
    os.chmod(tmp_path, 0o755)
    os.chmod(shared, 0o777)
    script = ("ln -s /etc/hostname /tmp/l; ln -s /tmp/ws/real.txt /tmp/ws/l; "
              "cat /tmp/l 2>&1; cat /tmp/ws/l 2>&1; readlink /tmp/l; id -u; "
              "grep CapEff /proc/self/status; ls /bin/sh")
    # As the trusted side runs (bwrap/sandbox.py _trusted_argv): a user namespace, uid 1000.
    argv = ["bwrap", "--unshare-all", "--unshare-user", "--uid", "1000", "--gid", "1000", "--die-with-parent",
            "--ro-bind", "/", "/", "--proc", "/proc",
            "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", str(HARNESS_DIR), "/tmp/h", "--bind", str(shared),
            "/tmp/ws", "sh", "/tmp/h/verify_no_links.sh", "/tmp/ws", "/tmp", "--", "sh", "-c", script]
    env = {**os.environ, "VERIFY_NO_LINKS_PYTHON": "1" if engine == "python" else "0"}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "Too many levels of symbolic links" in lines[0] and "Too many levels of symbolic links" in lines[1], lines
    assert lines[2] == "/etc/hostname"
    assert lines[3] == "1000"
    assert lines[4].split() == ["CapEff:", "0000000000000000"], lines
    assert lines[5] == "/bin/sh"
