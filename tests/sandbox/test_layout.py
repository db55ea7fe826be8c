"""``sandbox/`` and ``harness/`` grouped by where their code runs (docs/architecture.md, "What runs
where"), and the harness flat at run time, as task commands name its files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from verify_cli import harness
from verify_cli.sandbox.environment import harness_dir

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "verify_cli"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
#: The modules that stay at the top of ``sandbox/`` (the contract, registry, environment, the
#: process backend and its shared base, doctor, images, the old docker import path).
SANDBOX_TOP = {"__init__.py", "base.py", "registry.py", "environment.py", "process.py", "local.py", "doctor.py",
               "images.py", "docker_backend.py"}


def _table_folders() -> set[str]:
    return set(re.findall(r"^\| `((?:sandbox|harness)/[a-z_]+/)` \|", DOC, flags=re.M))


def test_every_harness_file_is_in_a_role_folder_the_docs_list() -> None:
    source = PACKAGE / "harness"
    loose = sorted(p.name for p in source.iterdir() if p.is_file() and p.name != "__init__.py")
    assert loose == []
    folders = {p.name for p in source.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(harness.ROLES)
    assert {f"harness/{role}/" for role in harness.ROLES} <= _table_folders()


def test_every_sandbox_module_is_at_the_top_or_in_a_folder_the_docs_list() -> None:
    source = PACKAGE / "sandbox"
    assert {p.name for p in source.glob("*.py")} == SANDBOX_TOP
    folders = {f"sandbox/{p.name}/" for p in source.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {f for f in _table_folders() if f.startswith("sandbox/")}


def test_the_run_time_folder_is_flat_as_task_commands_name_it() -> None:
    folder = harness_dir()
    mapping = harness.runtime_files()
    shipped = {p.name for p in folder.iterdir() if p.is_file()}
    assert shipped == set(mapping)
    for name, path in mapping.items():
        assert (folder / name).read_bytes() == path.read_bytes()
    # the names old task.toml files and sandbox command lines use
    assert {"verify_calls.py", "verify_stdio.py", "verify_launch.py", "verify_harness.py", "verify_shuffle.py",
            "verify_node_seal.js", "verify_node_guard.js", "warm_worker.py", "verify_candidate_exec.sh"} <= shipped
    candidate = {p.relative_to(folder).as_posix() for p in (folder / "candidate").rglob("*")
                 if p.is_file() and "__pycache__" not in p.parts}
    sources = {p.relative_to(PACKAGE / "harness").as_posix() for p in (PACKAGE / "harness" / "candidate").rglob("*")
               if p.is_file() and p.suffix in harness.SHIPPED_SUFFIXES}
    assert candidate == sources  # what each kind lists in harness_files: tests/kinds/test_kind_interface.py


def test_two_role_folders_holding_one_name_are_refused(tmp_path: Path) -> None:
    for role in harness.FLAT_ROLES:
        (tmp_path / role).mkdir()
    (tmp_path / "runners" / "verify_x.py").write_text("")
    (tmp_path / "plugins" / "verify_x.py").write_text("")
    with pytest.raises(RuntimeError, match=r"verify_x\.py is in both plugins/ and runners/"):
        harness.runtime_files(tmp_path)


def test_python_m_a_runner_resolves_in_the_run_time_folder() -> None:
    # What ``command = "python -m verify_calls"`` does in a sandbox: PYTHONPATH is the harness.
    done = subprocess.run([sys.executable, "-s", "-E", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "import verify_calls, verify_stdio, verify_harness; print(verify_calls.__file__)",
                           str(harness_dir())], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).parent == harness_dir()


def test_the_run_time_folder_is_private_to_its_process_and_removed_at_its_exit() -> None:
    code = ("import os, sys\n"
            "from verify_cli.sandbox.environment import harness_dir\n"
            "d = harness_dir()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    sys.exit(0)\n"  # a forked child's exit runs atexit too: it must leave the folder
            "os.waitpid(pid, 0)\n"
            "print(d, d.is_dir(), oct(d.stat().st_mode & 0o777))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    path, alive, mode = done.stdout.split()
    assert alive == "True" and mode == "0o755"
    assert not os.path.exists(path)


def test_package_data_ships_every_harness_file() -> None:
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"]["verify_cli"]
    covered = {p for g in globs for p in PACKAGE.glob(g)}
    files = {p for p in (PACKAGE / "harness").rglob("*") if p.is_file() and p.suffix in harness.SHIPPED_SUFFIXES
             and "__pycache__" not in p.parts}
    assert sorted(p.relative_to(PACKAGE).as_posix() for p in files - covered) == []


def test_folders_of_processes_that_ended_without_their_exit_handlers_are_pruned(tmp_path: Path) -> None:
    from verify_cli.sandbox.environment import HARNESS_FOLDER_PREFIX, _prune_harness_folders

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True).stdout.strip()
    dead = tmp_path / f"{HARNESS_FOLDER_PREFIX}{ended}-abc"
    alive = tmp_path / f"{HARNESS_FOLDER_PREFIX}{os.getpid()}-abc"
    other = tmp_path / "verify-cli-harness-notapid"
    for d in (dead, alive, other):
        (d / "candidate").mkdir(parents=True)
    _prune_harness_folders(tmp_path)
    assert not dead.exists() and alive.is_dir() and other.is_dir()
