"""The r2e-gym preset: rows in R2E-Gym's published shape (parsed_commit_content,
execution_result_content with the generated tests and the two pytest -rA logs,
expected_output_json) and a local clone become sound repository tasks; a row that lacks what
grading needs names the column."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.importers.test_swebench import git, write
from verify_cli.checks.report import TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.grading import Grader
from verify_cli.importers import import_rows
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks import load_task

OPS_BASE = "def clamp(x, lo, hi):\n    return max(lo, x)\n\n\ndef add(a, b):\n    return a + b\n"
OPS_FIXED = "def clamp(x, lo, hi):\n    return min(hi, max(lo, x))\n\n\ndef add(a, b):\n    return a + b\n"
R2E_TEST = """from calc.ops import add, clamp


class TestClamp:
    def test_above(self):
        assert clamp(9, 0, 5) == 5

    def test_inside(self):
        assert clamp(3, 0, 5) == 3


def test_add():
    assert add(1, 2) == 3
"""


def pytest_log(root: Path) -> str:
    """What R2E-Gym's execution stored: ``pytest -rA r2e_tests`` run in the repository."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "r2e_tests"],
                          cwd=root, capture_output=True, text=True, check=False).stdout


@pytest.fixture(scope="module")
def r2e_row(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """A clone of calc under repos/calc, its fix commit, and the R2E-Gym row for it."""
    root = tmp_path_factory.mktemp("r2e")
    repos = root / "repos"
    clone = repos / "calc"
    clone.mkdir(parents=True)
    git(clone, "init", "-q")
    write(clone, {"calc/__init__.py": "", "calc/ops.py": OPS_BASE, "tests/test_ops.py": "def test_x():\n    pass\n"})
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "base")
    old = git(clone, "rev-parse", "HEAD").strip()
    write(clone, {"r2e_tests/test_1.py": R2E_TEST})
    old_log = pytest_log(clone)
    write(clone, {"calc/ops.py": OPS_FIXED})
    new_log = pytest_log(clone)
    (clone / "r2e_tests" / "test_1.py").unlink()
    write(clone, {"tests/test_ops.py": "def test_x():\n    assert True\n"})
    git(clone, "commit", "-qam", "fix clamp")
    new = git(clone, "rev-parse", "HEAD").strip()
    git(clone, "checkout", "-q", old)
    diffs = [{"header": {"file": {"path": "calc/ops.py"}, "misc_line": None}, "old_file_content": OPS_BASE,
              "new_file_content": OPS_FIXED, "hunks": []},
             {"header": {"file": {"path": "tests/test_ops.py"}}, "old_file_content": "def test_x():\n    pass\n",
              "new_file_content": "def test_x():\n    assert True\n", "hunks": []}]
    row = {
        "repo_name": "calc", "commit_hash": new, "docker_image": f"namanjain12/calc_final:{new}",
        "parsed_commit_content": json.dumps({"file_diffs": diffs, "old_commit_hash": old, "new_commit_hash": new,
                                             "commit_message": "fix clamp", "commit_date": "2024-01-01T00:00:00"}),
        "execution_result_content": json.dumps({
            "repo_name": "calc", "new_commit_hash": new, "test_file_codes": [R2E_TEST],
            "test_file_names": ["test_1.py"], "setup_res_code": 0, "setup_res_stdout": "", "setup_res_stderr": "",
            "old_commit_res_code": 1, "old_commit_res_stdout": old_log, "old_commit_res_stderr": "",
            "new_commit_res_code": 0, "new_commit_res_stdout": new_log, "new_commit_res_stderr": ""}),
        "expected_output_json": json.dumps({"TestClamp.test_above": "PASSED", "TestClamp.test_inside": "PASSED",
                                            "test_add": "PASSED"}),
        "problem_statement": "[ISSUE]\nclamp ignores its upper bound\n[/ISSUE]", "prompt": "THE GOLD PATCH",
        "modified_files": ["calc/ops.py"], "relevant_files": [], "num_non_test_files": 1,
    }
    assert "PASSED r2e_tests/test_1.py::TestClamp::test_inside" in old_log
    return row, repos


def test_an_r2e_gym_row_imports_sound(r2e_row: tuple[dict[str, Any], Path], tmp_path: Path,
                                      process_sandbox: Sandbox) -> None:
    row, repos = r2e_row
    (tmp_path / "r2e.jsonl").write_text(json.dumps(row) + "\n")
    report = import_rows(str(tmp_path / "r2e.jsonl"), tmp_path / "out", preset="r2e-gym", repos=repos)
    assert report.failures == [] and len(report.written) == 1
    task = load_task(tmp_path / "out" / report.written[0])
    assert task.test.fail_to_pass == ("r2e_tests/test_1.py::TestClamp::test_above",)
    assert set(task.test.pass_to_pass) == {"r2e_tests/test_1.py::TestClamp::test_inside",
                                           "r2e_tests/test_1.py::test_add"}
    assert task.starter_files()["calc/ops.py"].read_text() == OPS_BASE
    assert task.solution_files()["calc/ops.py"].read_text() == OPS_FIXED
    assert "tests/test_ops.py" not in task.solution_files()  # the commit's test files are not the fix
    assert task.test_files()["r2e_tests/test_1.py"].read_text() == R2E_TEST
    assert task.prompt.strip() == "clamp ignores its upper bound"
    source = json.loads((task.root / "source.json").read_text())
    assert source["data_source"] == "r2e-gym" and source["image"] == row["docker_image"]
    assert source["expected_not_passing_left_out"] == 0
    (checked,) = check_tasks([task], Grader(process_sandbox), CheckOptions(repeats=1))
    assert checked.verdict is TaskVerdict.SOUND, [c.to_dict() for c in checked.checks]


def test_a_fix_that_deletes_a_file_imports_as_a_gold_patch_that_removes_it(
        r2e_row: tuple[dict[str, Any], Path], tmp_path: Path, process_sandbox: Sandbox,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A solution/ folder cannot say a deletion: such a fix becomes solution.patch (git's diff of
    the fix against the starter), whose reference has the file removed, and the task is sound."""
    monkeypatch.setenv("VERIFY_REPO_CACHE", str(tmp_path / "repo-cache"))
    row, repos = r2e_row
    commit = json.loads(row["parsed_commit_content"])
    header = {"file": {"path": "calc/__init__.py"}, "misc_line": "deleted file mode 100644"}
    commit["file_diffs"].append({"header": header, "old_file_content": "", "new_file_content": None, "hunks": []})
    (tmp_path / "r2e.jsonl").write_text(json.dumps({**row, "parsed_commit_content": json.dumps(commit)}) + "\n")
    report = import_rows(str(tmp_path / "r2e.jsonl"), tmp_path / "out", preset="r2e-gym", repos=repos)
    assert report.failures == []
    task = load_task(tmp_path / "out" / report.written[0])
    assert task.solution_is_patch and task.solution_removals() == ("calc/__init__.py",)
    assert task.solution_files()["calc/ops.py"].read_text() == OPS_FIXED
    (checked,) = check_tasks([task], Grader(process_sandbox), CheckOptions(repeats=1))
    assert checked.verdict is TaskVerdict.SOUND, [c.to_dict() for c in checked.checks]


@pytest.mark.parametrize(("change", "reason"), [
    ({"expected_output_json": None}, "column 'expected_output_json' (expected) is missing"),
    ({"parsed_commit_content": "{not json"}, "column 'parsed_commit_content' (commit) is not JSON"),
    ({"repo_name": "absent"}, "repository 'absent' has no local clone"),
    ({"execution_result_content": {"test_file_names": ["test_1.py"], "test_file_codes": ["x = 1\n"]}},
     "has no old_commit_res_stdout"),
    ({"expected_output_json": {"TestClamp.test_gone": "PASSED"}}, "test 'TestClamp.test_gone' is in neither"),
])
def test_a_row_missing_what_grading_needs_names_the_column(r2e_row: tuple[dict[str, Any], Path], tmp_path: Path,
                                                           change: dict[str, Any], reason: str) -> None:
    row, repos = r2e_row
    (tmp_path / "r2e.jsonl").write_text(json.dumps({**row, **change}) + "\n")
    report = import_rows(str(tmp_path / "r2e.jsonl"), tmp_path / "out", preset="r2e-gym", repos=repos)
    assert report.written == [] and len(report.failures) == 1
    assert reason in report.failures[0].reason
