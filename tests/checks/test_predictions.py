"""``verify-cli tasks evaluate``: predictions in SWE-bench's shape graded against imported
repository tasks, each instance's report.json in SWE-bench's shape (resolved, the FAIL_TO_PASS /
PASS_TO_PASS success and failure lists) and the run's summary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.importers.test_swebench import OPS_BASE, TESTS_BASE, TESTS_NEW, git, write
from verify_cli.checks.predictions import Prediction, evaluate_predictions, read_predictions
from verify_cli.cli.app import main
from verify_cli.errors import TaskFormatError
from verify_cli.grading import Grader
from verify_cli.importers import import_rows
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks import load_task_set
from verify_cli.tasks.model import Task

OPS_WRONG = OPS_BASE.replace("return max(lo, x)", "return min(hi, x)")


@pytest.fixture(scope="module", autouse=True)
def _private_repo_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Applied gold patches are cached in this module's folder, never the user's cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VERIFY_REPO_CACHE", str(tmp_path_factory.mktemp("repo-cache")))
        yield


@pytest.fixture(scope="module")
def repo_tasks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """One imported SWE-bench task (acme__calc-1) and diffs against its base: the gold fix, a
    wrong fix (its FAIL_TO_PASS test passes, a PASS_TO_PASS test breaks), a diff that does not apply."""
    root = tmp_path_factory.mktemp("preds")
    clone = root / "repos" / "acme__calc"
    clone.mkdir(parents=True)
    git(clone, "init", "-q")
    write(clone, {"calc/__init__.py": "", "calc/ops.py": OPS_BASE, "tests/test_ops.py": TESTS_BASE})
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "base")
    base = git(clone, "rev-parse", "HEAD").strip()
    diffs: dict[str, str] = {}
    for name, text in (("gold", OPS_BASE.replace("return max(lo, x)", "return min(hi, max(lo, x))")),
                       ("wrong", OPS_WRONG)):
        write(clone, {"calc/ops.py": text})
        diffs[name] = git(clone, "diff")
        git(clone, "checkout", "-q", "--", ".")
    diffs["stale"] = diffs["gold"].replace("return max(lo, x)", "return max(lo, y)")
    git(clone, "mv", "calc/ops.py", "calc/operations.py")
    write(clone, {"calc/operations.py": OPS_BASE.replace("return max(lo, x)", "return min(hi, max(lo, x))")})
    git(clone, "add", "-A")
    diffs["renamed"] = git(clone, "diff", "--cached", "-M")  # the fix, in a module of another name
    git(clone, "reset", "-q", "--hard")
    write(clone, {"tests/test_ops.py": TESTS_BASE + "\n\ndef test_mine():\n    assert True\n"})
    diffs["test_only"] = git(clone, "diff")
    git(clone, "checkout", "-q", "--", ".")
    write(clone, {"tests/test_ops.py": TESTS_NEW + "\n\ndef test_clamp_below():\n    from calc.ops import clamp\n"
                                                   "    assert clamp(-3, 0, 5) == 0\n"})
    test_patch = git(clone, "diff")
    git(clone, "checkout", "-q", "--", ".")
    row = {"instance_id": "acme__calc-1", "repo": "acme/calc", "base_commit": base, "patch": diffs["gold"],
           "test_patch": test_patch, "FAIL_TO_PASS": ["tests/test_ops.py::test_clamp_above"],
           "PASS_TO_PASS": ["tests/test_ops.py::test_add", "tests/test_ops.py::test_clamp_below"]}
    (root / "rows.jsonl").write_text(json.dumps(row) + "\n")
    report = import_rows(str(root / "rows.jsonl"), root / "tasks", preset="swebench", repos=root / "repos")
    assert report.failures == []
    return root / "tasks", diffs


def test_each_prediction_gets_swebench_report(repo_tasks: tuple[Path, dict[str, str]],
                                              process_sandbox: Sandbox) -> None:
    tasks_dir, diffs = repo_tasks
    tasks = [t for t in load_task_set(tasks_dir) if isinstance(t, Task)]
    preds = [Prediction("acme__calc-1", "gold", diffs["gold"]), Prediction("acme__calc-1", "wrong", diffs["wrong"]),
             Prediction("acme__calc-1", "stale", diffs["stale"]), Prediction("acme__calc-1", "none", None),
             Prediction("acme__other-2", "gold", diffs["gold"])]
    gold, wrong, stale, none, unknown = evaluate_predictions(tasks, preds, Grader(process_sandbox))
    assert gold.report == {"acme__calc-1": {
        "patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True, "resolved": True,
        "tests_status": {
            "FAIL_TO_PASS": {"success": ["tests/test_ops.py::test_clamp_above"], "failure": []},
            "PASS_TO_PASS": {"success": ["tests/test_ops.py::test_add", "tests/test_ops.py::test_clamp_below"],
                             "failure": []},
            "FAIL_TO_FAIL": {"success": [], "failure": []}, "PASS_TO_FAIL": {"success": [], "failure": []}}}}
    body = wrong.report["acme__calc-1"]  # type: ignore[index]
    assert body["resolved"] is False and body["patch_successfully_applied"] is True
    assert body["tests_status"]["FAIL_TO_PASS"]["success"] == ["tests/test_ops.py::test_clamp_above"]
    assert body["tests_status"]["PASS_TO_PASS"]["failure"] == ["tests/test_ops.py::test_clamp_below"]
    assert stale.report["acme__calc-1"]["patch_successfully_applied"] is False  # type: ignore[index]
    assert "does not apply" in stale.error
    assert none.report["acme__calc-1"]["patch_is_None"] is True  # type: ignore[index]
    assert unknown.report is None and "no task has instance id 'acme__other-2'" in unknown.error


def test_a_prediction_that_renames_the_module_is_applied_and_the_old_module_is_gone(
        repo_tasks: tuple[Path, dict[str, str]], process_sandbox: Sandbox) -> None:
    """A model's diff written with rename detection applies (SWE-bench applies it too): the old
    module is absent when the tests run, so even the PASS_TO_PASS test that imports it fails."""
    tasks_dir, diffs = repo_tasks
    assert "rename from calc/ops.py" in diffs["renamed"]
    tasks = [t for t in load_task_set(tasks_dir) if isinstance(t, Task)]
    (renamed,) = evaluate_predictions(tasks, [Prediction("acme__calc-1", "renamed", diffs["renamed"])],
                                      Grader(process_sandbox))
    body = renamed.report["acme__calc-1"]  # type: ignore[index]
    assert renamed.error == "" and body["patch_successfully_applied"] is True and body["resolved"] is False
    assert "tests/test_ops.py::test_add" in body["tests_status"]["PASS_TO_PASS"]["failure"]


def test_the_command_writes_report_json_where_swebench_does(repo_tasks: tuple[Path, dict[str, str]],
                                                            tmp_path: Path) -> None:
    tasks_dir, diffs = repo_tasks
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"instance_id": "acme__calc-1", "model_name_or_path": f"org/{m}",
                                         "model_patch": diffs[m]}) + "\n" for m in ("gold", "wrong")))
    code = main(["tasks", "evaluate", str(tasks_dir), "--predictions", str(preds), "--sandbox", "process",
                 "--report-dir", str(tmp_path / "eval")])
    assert code == 0
    report = json.loads((tmp_path / "eval" / "org__gold" / "acme__calc-1" / "report.json").read_text())
    assert report["acme__calc-1"]["resolved"] is True
    summary = json.loads((tmp_path / "eval" / "org__wrong.json").read_text())
    assert summary["resolved_ids"] == [] and summary["unresolved_ids"] == ["acme__calc-1"]
    assert summary["completed_instances"] == 1 and summary["total_instances"] == 1


def test_a_malformed_predictions_file_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"instance_id": "a", "model_patch": ""}\n{"model_patch": "x"}\n')
    with pytest.raises(TaskFormatError, match="line 2: a prediction needs an instance_id"):
        read_predictions(bad)
    listed = tmp_path / "p.json"
    listed.write_text(json.dumps({"a": {"model_patch": "d", "model_name_or_path": "m"}}))
    assert read_predictions(listed) == [Prediction("a", "m", "d")]
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"instance_id": "b", "model_name_or_path": "m", "model_patch": None}) + "\n")
    assert read_predictions(one) == [Prediction("b", "m", None)]


def test_check_tasks_writes_the_gold_patchs_report_beside_its_own(repo_tasks: tuple[Path, dict[str, str]],
                                                                  tmp_path: Path) -> None:
    tasks_dir, _ = repo_tasks
    code = main(["check-tasks", str(tasks_dir), "--sandbox", "process", "-n", "1", "--no-cache",
                 "--json", str(tmp_path / "checks.json"), "--swebench-reports", str(tmp_path / "swe")])
    assert code == 0
    report = json.loads((tmp_path / "swe" / "swebench" / "acme__calc-1" / "report.json").read_text())
    body = report["acme__calc-1"]
    assert body["resolved"] is True and body["patch_exists"] is True
    assert body["tests_status"]["FAIL_TO_PASS"]["success"] == ["tests/test_ops.py::test_clamp_above"]


def test_edits_of_test_files_are_dropped_as_swebench_drops_them(repo_tasks: tuple[Path, dict[str, str]],
                                                                 process_sandbox: Sandbox) -> None:
    """A model's diff that also edits a test file: SWE-bench checks the test files out again
    before the test patch, so the rest is graded (here: resolved); a diff of test files alone
    applies nothing and resolves nothing."""
    tasks_dir, diffs = repo_tasks
    tasks = [t for t in load_task_set(tasks_dir) if isinstance(t, Task)]
    preds = [Prediction("acme__calc-1", "m", diffs["gold"] + diffs["test_only"]),
             Prediction("acme__calc-1", "t", diffs["test_only"])]
    both, tests_only = evaluate_predictions(tasks, preds, Grader(process_sandbox))
    assert both.dropped_tests == ("tests/test_ops.py",) and both.error == ""
    assert both.report["acme__calc-1"]["resolved"] is True  # type: ignore[index]
    body = tests_only.report["acme__calc-1"]  # type: ignore[index]
    assert body["patch_successfully_applied"] is True and body["resolved"] is False
    assert body["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_ops.py::test_clamp_above"]

