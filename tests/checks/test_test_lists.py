"""check-tasks on repository tasks: wrong FAIL_TO_PASS / PASS_TO_PASS lists and gold patches are
defects that name the test or the hunk; the repository samples are sound."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from verify_cli.checks.report import CheckStatus, TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.grading import Grader
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks import load_task_set

OPTIONS = CheckOptions(repeats=2, jobs=2)
INVENTORY = "repo-inventory-package"
ETL = "repo-orders-etl"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFY_REPO_CACHE", str(tmp_path / "repo-cache"))


def check_one(root: Path, sandbox: Sandbox) -> Any:
    (report,) = check_tasks(load_task_set(root), Grader(sandbox), OPTIONS)
    return report


def set_toml(root: Path, old: str, new: str) -> None:
    text = (root / "task.toml").read_text()
    assert old in text
    (root / "task.toml").write_text(text.replace(old, new))


def test_repository_samples_are_sound(sample_tasks_dir: Path, process_sandbox: Sandbox) -> None:
    for name in (INVENTORY, ETL):
        report = check_one(sample_tasks_dir / name, process_sandbox)
        checks = {c.name: c for c in report.checks}
        assert report.verdict is TaskVerdict.SOUND, (name, [c.to_dict() for c in report.defects])
        assert checks["fail-to-pass"].status is CheckStatus.PASS
        assert checks["pass-to-pass"].status is CheckStatus.PASS


def test_fail_to_pass_test_that_already_passes_on_the_starter(
        sample_tasks_dir: Path, copy_task: Any, process_sandbox: Sandbox) -> None:
    root = copy_task(sample_tasks_dir / INVENTORY)
    wrong = "tests/test_stock.py::test_receive_adds_to_on_hand"
    (root / "fail_to_pass.txt").write_text((root / "fail_to_pass.txt").read_text() + wrong + "\n")
    lines = (root / "pass_to_pass.txt").read_text().splitlines()
    (root / "pass_to_pass.txt").write_text("\n".join(ln for ln in lines if ln != wrong) + "\n")
    report = check_one(root, process_sandbox)
    assert report.verdict is TaskVerdict.DEFECTIVE
    (f2p,) = [c for c in report.defects if c.name == "fail-to-pass"]
    assert f2p.tests == (wrong,)
    assert f"pass on the starter: {wrong}" in f2p.message
    assert "1 of 7 FAIL_TO_PASS tests are wrong" in f2p.message
    assert "pass-to-pass" not in {c.name for c in report.defects}


def test_reference_that_breaks_a_pass_to_pass_test(
        sample_tasks_dir: Path, copy_task: Any, process_sandbox: Sandbox) -> None:
    root = copy_task(sample_tasks_dir / ETL)
    config = root / "solution" / "orders_etl" / "config.py"
    text = config.read_text()
    assert "if unknown:" in text
    config.write_text(text.replace("if unknown:", "if unknown and False:"))
    report = check_one(root, process_sandbox)
    assert report.verdict is TaskVerdict.DEFECTIVE
    defects = {c.name: c for c in report.defects}
    broken = "tests/test_config.py::test_unknown_section_is_refused"
    assert defects["pass-to-pass"].tests == (broken,)
    assert f"do not pass on the reference: {broken} (2 of 2 runs)" in defects["pass-to-pass"].message
    assert "fail-to-pass" not in defects


def test_misspelt_test_id_is_named(sample_tasks_dir: Path, copy_task: Any, process_sandbox: Sandbox) -> None:
    root = copy_task(sample_tasks_dir / ETL)
    set_toml(root, '"tests/test_transform.py::test_aggregate_by_utc_day"',
             '"tests/test_transform.py::test_aggregate_by_utc_dya"')
    report = check_one(root, process_sandbox)
    (f2p,) = [c for c in report.defects if c.name == "fail-to-pass"]
    assert f2p.tests == ("tests/test_transform.py::test_aggregate_by_utc_dya",)
    assert "reported by no run" in f2p.message


def test_gold_patch_that_does_not_apply_names_the_hunk(
        sample_tasks_dir: Path, copy_task: Any, process_sandbox: Sandbox) -> None:
    root = copy_task(sample_tasks_dir / INVENTORY)
    stock = root / "starter" / "inventory" / "stock.py"
    stock.write_text(stock.read_text().replace('"""Units that can still be reserved."""',
                                               '"""Units free to reserve."""'))
    report = check_one(root, process_sandbox)
    assert report.verdict is TaskVerdict.DEFECTIVE
    (schema,) = report.checks
    assert schema.status is CheckStatus.FAIL
    assert schema.message.startswith(f"{root / 'solution.patch'}: the gold patch does not apply to the starter")
    assert re.search(r"patch failed: inventory/stock\.py:\d+", schema.message), schema.message
    assert report.runs == []
