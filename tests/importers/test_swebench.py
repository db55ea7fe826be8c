"""The swebench preset: SWE-bench-format rows and local clones (built here with git) become
repository tasks; rows without their repository or commit are reported; a wrong FAIL_TO_PASS list
imports and check-tasks names the test."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verify_cli.checks.report import TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.errors import UsageError
from verify_cli.grading import Grader
from verify_cli.importers import import_rows
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks import load_task, load_task_set

OPS_BASE = "def add(a, b):\n    return a + b\n\n\ndef clamp(x, lo, hi):\n    return max(lo, x)\n"
OPS_FIXED = "def add(a, b):\n    return a + b\n\n\ndef clamp(x, lo, hi):\n    return min(hi, max(lo, x))\n"
TESTS_BASE = "from calc.ops import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TESTS_NEW = TESTS_BASE + "\n\ndef test_clamp_above():\n    from calc.ops import clamp\n    assert clamp(9, 0, 5) == 5\n"


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFY_REPO_CACHE", str(tmp_path / "repo-cache"))


@pytest.fixture
def dataset(tmp_path: Path) -> tuple[Path, Path]:
    """A clone of acme/calc under repos/acme__calc, and four SWE-bench rows about it."""
    repos = tmp_path / "repos"
    clone = repos / "acme__calc"
    clone.mkdir(parents=True)
    git(clone, "init", "-q")
    write(clone, {"calc/__init__.py": "", "calc/ops.py": OPS_BASE, "tests/test_ops.py": TESTS_BASE,
                  "README.md": "calc\n", "tests/runtests.sh": "#!/bin/sh\nexec python -m pytest \"$@\"\n"})
    (clone / "tests" / "runtests.sh").chmod(0o755)  # git keeps it as 100755
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "base")
    base = git(clone, "rev-parse", "HEAD").strip()
    write(clone, {"calc/ops.py": OPS_FIXED})
    gold = git(clone, "diff")
    git(clone, "checkout", "-q", "--", ".")
    write(clone, {"tests/test_ops.py": TESTS_NEW})
    test_patch = git(clone, "diff")
    git(clone, "checkout", "-q", "--", ".")
    row = {"instance_id": "acme__calc-1", "repo": "acme/calc", "base_commit": base, "patch": gold,
           "test_patch": test_patch, "FAIL_TO_PASS": json.dumps(["tests/test_ops.py::test_clamp_above"]),
           "PASS_TO_PASS": json.dumps(["tests/test_ops.py::test_add"]), "environment_setup_commit": base,
           "problem_statement": "clamp ignores its upper bound\n", "version": "0.1"}
    rows = [
        row,
        {**row, "instance_id": "acme__calc-2", "base_commit": "f" * 40},
        {**row, "instance_id": "acme__calc-3", "FAIL_TO_PASS": ["tests/test_ops.py::test_add"],
         "PASS_TO_PASS": ["tests/test_ops.py::test_clamp_above"]},
        {**row, "instance_id": "acme__absent-4", "repo": "acme/absent"},
    ]
    data = tmp_path / "swe.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data, repos


def test_rows_import_and_failures_name_their_row(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    data, repos = dataset
    report = import_rows(str(data), tmp_path / "out", preset="swebench", repos=repos)
    assert report.written == ["swebench/acme__calc-1", "swebench/acme__calc-3"]
    failures = {f.id: f.reason for f in report.failures}
    assert set(failures) == {"acme__calc-2", "acme__absent-4"}
    assert f"base_commit {'f' * 40!r} is not in {repos / 'acme__calc'}" in failures["acme__calc-2"]
    assert "repository 'acme/absent' has no local clone" in failures["acme__absent-4"]
    task = load_task(tmp_path / "out" / "swebench" / "acme__calc-1")
    assert task.test.fail_to_pass == ("tests/test_ops.py::test_clamp_above",)
    assert task.scoring.policy.value == "swebench" and task.isolation.value == "in-process"
    assert task.starter_files()["calc/ops.py"].read_text() == OPS_BASE
    assert task.solution_files()["calc/ops.py"].read_text() == OPS_FIXED
    assert task.test_files()["tests/test_ops.py"].read_text() == TESTS_NEW
    source = json.loads((task.root / "source.json").read_text())
    assert source["environment_setup_commit"] == source["base_commit"]


def test_parquet_rows_and_list_columns(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    data, repos = dataset
    rows = [json.loads(line) for line in data.read_text().splitlines()][:1]
    rows[0]["FAIL_TO_PASS"] = json.loads(rows[0]["FAIL_TO_PASS"])
    rows[0]["PASS_TO_PASS"] = json.loads(rows[0]["PASS_TO_PASS"])
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "swe.parquet")
    report = import_rows(str(tmp_path / "swe.parquet"), tmp_path / "out", preset="swebench", repos=repos)
    assert report.written == ["swebench/acme__calc-1"] and report.failures == []


def test_swebench_needs_repos(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    data, _ = dataset
    with pytest.raises(UsageError, match="reads local clones"):
        import_rows(str(data), tmp_path / "out", preset="swebench")


def test_check_tasks_names_the_wrong_fail_to_pass_test(dataset: tuple[Path, Path], tmp_path: Path,
                                                       process_sandbox: Sandbox) -> None:
    data, repos = dataset
    import_rows(str(data), tmp_path / "out", preset="swebench", repos=repos)
    reports = {r.task_id: r for r in check_tasks(load_task_set(tmp_path / "out"), Grader(process_sandbox),
                                                 CheckOptions(repeats=2))}
    good, wrong = reports["swebench/acme__calc-1"], reports["swebench/acme__calc-3"]
    assert good.verdict is TaskVerdict.SOUND, [c.to_dict() for c in good.defects]
    assert wrong.verdict is TaskVerdict.DEFECTIVE
    defects = {c.name: c for c in wrong.defects}
    assert defects["fail-to-pass"].tests == ("tests/test_ops.py::test_add",)
    assert defects["pass-to-pass"].tests == ("tests/test_ops.py::test_clamp_above",)


def test_file_modes_survive_import_and_lay_out(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    """A project's executable file (git mode 100755: a ./runtests.sh) stays executable in the
    imported task and in every work folder laid out from it."""
    from verify_cli.grading.workspace import Phase, lay_out

    data, repos = dataset
    import_rows(str(data), tmp_path / "out", preset="swebench", repos=repos)
    task = load_task(tmp_path / "out" / "swebench" / "acme__calc-1")
    assert task.starter_files()["tests/runtests.sh"].stat().st_mode & 0o111
    assert not task.starter_files()["calc/ops.py"].stat().st_mode & 0o111
    work = tmp_path / "work"
    work.mkdir()
    lay_out(task, Phase.REFERENCE, work)
    assert (work / "tests" / "runtests.sh").stat().st_mode & 0o100
    assert not (work / "calc" / "ops.py").stat().st_mode & 0o111


@pytest.fixture
def synthetic(tmp_path: Path) -> tuple[Path, Path]:
    """acme/calc whose tests already hold test_clamp_above, and a planted bug in clamp: the same
    bug as a SWE-smith row (patch = the bug, no base_commit, no test_patch) and as a SWE-bench
    row without a test_patch (base = the buggy commit, patch = the fix)."""
    repos = tmp_path / "repos"
    clone = repos / "acme__calc"
    clone.mkdir(parents=True)
    git(clone, "init", "-q")
    write(clone, {"calc/__init__.py": "", "calc/ops.py": OPS_FIXED, "tests/test_ops.py": TESTS_NEW})
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "clean")
    write(clone, {"calc/ops.py": OPS_BASE})
    bug = git(clone, "diff")
    git(clone, "commit", "-qam", "bug")
    buggy = git(clone, "rev-parse", "HEAD").strip()
    fix = git(clone, "diff", "HEAD", "HEAD~1")
    git(clone, "checkout", "-q", "HEAD~1")  # SWE-smith's mirror: the clean tree
    lists = {"FAIL_TO_PASS": ["tests/test_ops.py::test_clamp_above"], "PASS_TO_PASS": ["tests/test_ops.py::test_add"]}
    smith = {"instance_id": "acme__calc.clamp__1", "repo": "acme/calc", "patch": bug, **lists,
             "problem_statement": "clamp ignores its upper bound\n", "image_name": "swesmith/acme__calc:1"}
    plain = {"instance_id": "acme__calc-9", "repo": "acme/calc", "base_commit": buggy, "patch": fix,
             "test_patch": "", **lists}
    (tmp_path / "smith.jsonl").write_text(json.dumps(smith) + "\n")
    (tmp_path / "plain.jsonl").write_text(json.dumps(plain) + "\n")
    return tmp_path, repos


def test_swesmith_rows_and_rows_without_a_test_patch_import_the_right_way_round(
        synthetic: tuple[Path, Path], process_sandbox: Sandbox) -> None:
    """The starter is the buggy tree in both (never inverted), the reference the clean code, the
    tests the repository's own; both are sound and the listed tests judge them."""
    root, repos = synthetic
    smith = import_rows(str(root / "smith.jsonl"), root / "out", preset="swesmith", repos=repos)
    plain = import_rows(str(root / "plain.jsonl"), root / "out", preset="swebench", repos=repos, merge=True)
    assert smith.failures == [] and plain.failures == []
    for tid in ("swesmith/acme__calc.clamp__1", "swebench/acme__calc-9"):
        task = load_task(root / "out" / tid)
        assert task.starter_files()["calc/ops.py"].read_text() == OPS_BASE, tid
        assert task.solution_files()["calc/ops.py"].read_text() == OPS_FIXED, tid
    reports = {r.task_id: r for r in check_tasks(load_task_set(root / "out"), Grader(process_sandbox),
                                                 CheckOptions(repeats=2))}
    for tid, report in reports.items():
        assert report.verdict is TaskVerdict.SOUND, (tid, [c.to_dict() for c in report.defects])
    source = json.loads((root / "out" / "swesmith" / "acme__calc.clamp__1" / "source.json").read_text())
    assert source["data_source"] == "swesmith" and source["image"] == "swesmith/acme__calc:1"


def test_a_swesmith_bug_that_deletes_and_adds_files_imports_sound(tmp_path: Path, process_sandbox: Sandbox) -> None:
    """A SWE-smith bug mirrored from a pull request may delete a file and add others: the starter
    lacks the one and has the others, the reference (a gold patch here, since it removes files)
    writes the deleted file back and removes the added ones, and the task is sound."""
    repos = tmp_path / "repos"
    clone = repos / "acme__calc"
    clone.mkdir(parents=True)
    git(clone, "init", "-q")
    ops = ("def add(a, b):\n    return a + b\n\n\ndef clamp(x, lo, hi):\n    from calc.limits import upper\n"
           "    return upper(max(lo, x), hi)\n")
    tests = TESTS_NEW + ("\n\ndef test_no_stale_module():\n    import os\n    here = os.path.dirname(__file__)\n"
                         "    assert not os.path.exists(os.path.join(here, '..', 'calc', 'stale.py'))\n")
    limits = "def upper(x, hi):\n    return min(hi, x)\n"
    write(clone, {"calc/__init__.py": "", "calc/ops.py": ops, "calc/limits.py": limits, "tests/test_ops.py": tests})
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "clean")
    git(clone, "rm", "-q", "calc/limits.py")
    write(clone, {"calc/stale.py": "STALE = True\n", "calc/NOTES.txt": "stale\n"})
    git(clone, "add", "-A")
    bug = git(clone, "diff", "--cached")
    git(clone, "reset", "-q", "--hard")
    git(clone, "clean", "-qfd")
    row = {"instance_id": "acme__calc.pr_mirror__1", "repo": "acme/calc", "patch": bug,
           "FAIL_TO_PASS": ["tests/test_ops.py::test_clamp_above", "tests/test_ops.py::test_no_stale_module"],
           "PASS_TO_PASS": ["tests/test_ops.py::test_add"]}
    (tmp_path / "smith.jsonl").write_text(json.dumps(row) + "\n")
    report = import_rows(str(tmp_path / "smith.jsonl"), tmp_path / "out", preset="swesmith", repos=repos)
    assert report.failures == []
    task = load_task(tmp_path / "out" / "swesmith" / "acme__calc.pr_mirror__1")
    starter = task.starter_files()
    assert "calc/limits.py" not in starter and "calc/stale.py" in starter
    assert task.solution_is_patch and set(task.solution_removals()) == {"calc/stale.py", "calc/NOTES.txt"}
    assert "limits.py" in (task.root / "solution.patch").read_text() and "calc/NOTES.txt" in task.editable
    (checked,) = check_tasks([task], Grader(process_sandbox), CheckOptions(repeats=1))
    assert checked.verdict is TaskVerdict.SOUND, [c.to_dict() for c in checked.checks]


@pytest.mark.bwrap
def test_a_rows_install_spec_becomes_its_environment(tmp_path: Path) -> None:
    """A row's install_config (SWE-rebench's shape: python, pip_packages, pre_install, install)
    becomes the task's [environment]; the project is installed by its own command at build time
    and its tests, which import a library verify-cli does not ship, pass in it on bwrap."""
    from verify_cli.environments import Environments, EnvironmentStore
    from verify_cli.sandbox.registry import create_sandbox

    repos = tmp_path / "repos"
    clone = repos / "acme__xmlcount"
    clone.mkdir(parents=True)
    git(clone, "init", "-q")
    pyproject = ('[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
                 '[project]\nname = "xmlcount"\nversion = "0.3"\ndependencies = ["lxml>=5"]\n')
    count = "from lxml import etree\n\n\ndef count(xml):\n    return len(etree.fromstring(xml).findall('{}'))\n"
    tests = ("from importlib.metadata import version\n\nfrom xmlcount import count\n\n\n"
             "def test_installed():\n    assert version('xmlcount') == '0.3'\n\n\n"
             "def test_count():\n    assert count(b'<a><i/><i/></a>') == 2\n")
    write(clone, {"pyproject.toml": pyproject, "xmlcount/__init__.py": count.format("x"),
                  "tests/test_count.py": tests})
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "base")
    base = git(clone, "rev-parse", "HEAD").strip()
    write(clone, {"xmlcount/__init__.py": count.format("i")})
    gold = git(clone, "diff")
    git(clone, "checkout", "-q", "--", ".")
    config = {"python": "3.11", "pip_packages": ["lxml>=5", "setuptools>=61"],
              "install": "python -m pip install --no-build-isolation -e ."}
    row = {"instance_id": "acme__xmlcount-1", "repo": "acme/xmlcount", "base_commit": base, "patch": gold,
           "test_patch": "", "FAIL_TO_PASS": ["tests/test_count.py::test_count"],
           "PASS_TO_PASS": ["tests/test_count.py::test_installed"], "install_config": config}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    report = import_rows(str(tmp_path / "rows.jsonl"), tmp_path / "out", preset="swebench", repos=repos)
    assert report.failures == []
    task = load_task(tmp_path / "out" / "swebench" / "acme__xmlcount-1")
    assert task.environment.python == "3.11" and "lxml>=5" in task.environment.requirements
    assert task.environment.setup == ("python -m pip install --no-build-isolation -e .",)
    with create_sandbox("bwrap") as box:
        grader = Grader(box, environments=Environments(box, EnvironmentStore(tmp_path / "store")))
        (report_,) = check_tasks([task], grader, CheckOptions(repeats=2))
    assert report_.verdict is TaskVerdict.SOUND, [c.to_dict() for c in report_.checks]


DJANGO_RUNNER = """#!/usr/bin/env python3
import argparse
import os
import sys
import unittest

parser = argparse.ArgumentParser()
parser.add_argument("modules", nargs="*")
parser.add_argument("--verbosity", type=int)
parser.add_argument("--settings")
parser.add_argument("--parallel")
args = parser.parse_args()
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.getcwd()]
suite = unittest.defaultTestLoader.loadTestsFromNames(args.modules)
sys.exit(0 if unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite).wasSuccessful() else 1)
"""
DJANGO_TESTS = """import unittest

from shapes import area


class AreaTests(unittest.TestCase):
    def test_unit(self):
        self.assertEqual(area(2, 2), 4)  # right even with the bug
"""


def test_a_django_row_is_a_log_task_graded_by_the_projects_runner(tmp_path: Path,
                                                                  process_sandbox: Sandbox) -> None:
    """A django/django row: its ids are the runner's (``test_x (module.Class)``), the task runs
    ./tests/runtests.py (kept executable) on the test patch's modules and reads its log as
    SWE-bench does; the row is sound."""
    repos = tmp_path / "repos"
    clone = repos / "django__django"
    clone.mkdir(parents=True)
    git(clone, "init", "-q")
    write(clone, {"shapes.py": "def area(w, h):\n    return w + h\n", "tests/runtests.py": DJANGO_RUNNER,
                  "tests/geometry/__init__.py": "", "tests/geometry/tests.py": DJANGO_TESTS})
    (clone / "tests" / "runtests.py").chmod(0o755)
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "base")
    base = git(clone, "rev-parse", "HEAD").strip()
    write(clone, {"shapes.py": "def area(w, h):\n    return w * h\n"})
    gold = git(clone, "diff")
    git(clone, "checkout", "-q", "--", ".")
    write(clone, {"tests/geometry/tests.py": DJANGO_TESTS + "\n    def test_rect(self):\n"
                                                            "        self.assertEqual(area(2, 3), 6)\n"})
    test_patch = git(clone, "diff")
    git(clone, "checkout", "-q", "--", ".")
    row = {"instance_id": "django__django-1", "repo": "django/django", "base_commit": base, "patch": gold,
           "test_patch": test_patch, "FAIL_TO_PASS": ["test_rect (geometry.tests.AreaTests.test_rect)"],
           "PASS_TO_PASS": ["test_unit (geometry.tests.AreaTests.test_unit)"]}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    report = import_rows(str(tmp_path / "rows.jsonl"), tmp_path / "out", preset="swebench", repos=repos)
    assert report.failures == []
    task = load_task(tmp_path / "out" / "swebench" / "django__django-1")
    assert task.kind == "log" and task.test.log_parser == "django"
    assert task.test.command.endswith("--parallel 1 geometry.tests")
    (checked,) = check_tasks([task], Grader(process_sandbox), CheckOptions(repeats=2))
    assert checked.verdict is TaskVerdict.SOUND, [c.to_dict() for c in checked.checks]


def test_a_swe_rebench_row_installs_its_frozen_pins_and_its_requirement_files(
        dataset: tuple[Path, Path], tmp_path: Path) -> None:
    """SWE-rebench rows as published: install_config names its requirement files (reqs_path) and
    the row's requirements column holds the environment it was validated in (pip freeze). The
    pins become the environment's requirements (the project's own pytest among them), never a
    released copy of the project itself; without pins, the reqs_path files are installed."""
    data, repos = dataset
    row = json.loads(data.read_text().splitlines()[0])
    config = {"python": "3.9", "packages": "requirements.txt", "reqs_path": ["requirements/test.txt"],
              "pip_packages": ["pytest"], "install": "pip install -e ."}
    frozen = ("-e git+https://example.invalid/acme/calc@abc#egg=calc calc==0.1 iniconfig==2.1.0 "
              "pytest==7.4.4 pluggy==1.5.0 typing_extensions==4.12.2 other @ file:///testbed/other")
    rows = [{**row, "install_config": config, "requirements": frozen},
            {**row, "instance_id": "acme__calc-2", "install_config": config}]
    (tmp_path / "rebench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = import_rows(str(tmp_path / "rebench.jsonl"), tmp_path / "out", preset="swebench", repos=repos)
    assert report.failures == []
    pinned = load_task(tmp_path / "out" / "swebench" / "acme__calc-1").environment
    assert pinned.requirements == ("iniconfig==2.1.0", "pytest==7.4.4", "pluggy==1.5.0",
                                   "typing_extensions==4.12.2", "pytest")
    assert pinned.setup == ("pip install -e .",) and pinned.python == "3.9"
    unpinned = load_task(tmp_path / "out" / "swebench" / "acme__calc-2").environment
    assert unpinned.setup == ("python -m pip install -r requirements/test.txt", "pip install -e .")


def test_a_gold_patch_that_renames_and_deletes_imports_and_its_reference_removes_the_files(
        dataset: tuple[Path, Path], tmp_path: Path) -> None:
    """A gold patch written with rename detection (git diff -M) and a deletion imports as it is:
    the reference lays out the renamed file (with its hunk) and neither old file, the deleted
    non-Python file is editable (a candidate may delete it too), and the export writes both back."""
    from verify_cli.exporters.swebench import swebench_row
    from verify_cli.grading.workspace import Phase, lay_out

    data, repos = dataset
    clone = repos / "acme__calc"
    row = json.loads(data.read_text().splitlines()[0])
    git(clone, "mv", "calc/ops.py", "calc/operations.py")
    write(clone, {"calc/operations.py": OPS_FIXED})
    git(clone, "rm", "-q", "README.md")
    git(clone, "add", "-A")
    renamed = git(clone, "diff", "--cached", "-M")
    git(clone, "reset", "-q", "--hard")
    assert "rename from calc/ops.py" in renamed and "deleted file mode" in renamed
    (tmp_path / "rows.jsonl").write_text(json.dumps({**row, "patch": renamed}) + "\n")
    report = import_rows(str(tmp_path / "rows.jsonl"), tmp_path / "out", preset="swebench", repos=repos)
    assert report.failures == []
    task = load_task(tmp_path / "out" / "swebench" / "acme__calc-1")
    assert set(task.solution_removals()) == {"calc/ops.py", "README.md"}
    assert "README.md" in task.editable
    work = tmp_path / "work"
    work.mkdir()
    lay_out(task, Phase.REFERENCE, work)
    assert (work / "calc" / "operations.py").read_text() == OPS_FIXED
    assert not (work / "calc" / "ops.py").exists() and not (work / "README.md").exists()
    exported = swebench_row(task, tmp_path / "exported")["patch"]
    assert "deleted file mode" in exported and "calc/operations.py" in exported
