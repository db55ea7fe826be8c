"""Repository tasks export as SWE-bench rows with a git repository each, and import back."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from verify_cli.exporters import export_tasks
from verify_cli.importers import import_rows
from verify_cli.tasks import load_task, load_task_set
from verify_cli.tasks.model import Task
from verify_cli.tasks.repository import apply_patch, patch_files


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFY_REPO_CACHE", str(tmp_path / "repo-cache"))


def test_samples_export_as_swebench_rows_and_import_back(sample_tasks_dir: Path, tmp_path: Path) -> None:
    report = export_tasks(sample_tasks_dir, "swebench", tmp_path / "export")
    assert sorted(report.exported) == ["repository/inventory-package", "repository/orders-etl"]
    assert len(report.skipped) == len(list(load_task_set(sample_tasks_dir))) - 2  # the other samples
    rows = [json.loads(line) for line in (tmp_path / "export" / "swebench.jsonl").read_text().splitlines()]
    by_id = {r["verify_cli_task_id"]: r for r in rows}
    row = by_id["repository/inventory-package"]
    task = load_task(sample_tasks_dir / "repo-inventory-package")
    assert json.loads(row["FAIL_TO_PASS"]) == list(task.test.fail_to_pass)
    assert json.loads(row["PASS_TO_PASS"]) == list(task.test.pass_to_pass)
    clone = tmp_path / "export" / "repos" / row["repo"].replace("/", "__")
    tree = subprocess.run(["git", "-C", str(clone), "ls-tree", "-r", "--name-only", row["base_commit"]],
                          capture_output=True, text=True, check=True).stdout.split()
    assert sorted(tree) == sorted(task.starter_files())
    # The rows' patches apply to the base tree and give the reference and the tests.
    starter = {rel: p.read_bytes() for rel, p in task.starter_files().items()}
    gold = apply_patch(row["patch"].encode(), {r: starter[r] for r in patch_files(row["patch"]).reads})
    assert gold == {rel: p.read_bytes() for rel, p in task.solution_files().items()}
    tests = apply_patch(row["test_patch"].encode(), {})
    assert tests == {rel: p.read_bytes() for rel, p in task.test_files().items()}
    again = export_tasks(sample_tasks_dir, "swebench", tmp_path / "export2")
    rows2 = [json.loads(line) for line in (tmp_path / "export2" / "swebench.jsonl").read_text().splitlines()]
    assert [r["base_commit"] for r in rows2] == [r["base_commit"] for r in rows]  # deterministic commits
    assert len(again.exported) == 2

    back = import_rows(str(tmp_path / "export" / "swebench.jsonl"), tmp_path / "back", preset="swebench",
                       repos=tmp_path / "export" / "repos")
    assert back.failures == [] and len(back.written) == 2
    imported = [t for t in load_task_set(tmp_path / "back") if isinstance(t, Task)]
    assert {t.test.fail_to_pass for t in imported} == {
        load_task(sample_tasks_dir / name).test.fail_to_pass for name in ("repo-inventory-package", "repo-orders-etl")}
