"""``verify-cli check-tasks`` on Harbor task folders, as a user runs it (today's code rejected
their task.toml: "unknown field 'agent'", exit 1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from verify_cli.cli.app import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "harbor"


@pytest.mark.docker
def test_check_tasks_on_a_folder_of_sound_harbor_tasks_exits_0(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code = main(["check-tasks", str(FIXTURES / "sound"), "--sandbox", "docker", "--repeats", "2", "--no-cache",
                 "--json", str(out)])
    doc = json.loads(out.read_text())
    assert code == 0, doc
    assert {t["task_id"]: t["verdict"] for t in doc["tasks"]} == {"fix-sum": "sound", "partial-credit": "sound"}
    runs = [r for t in doc["tasks"] for r in t["runs"]]
    assert all(r["isolation"] == "isolated-verifier" and r["environment"] for r in runs)


@pytest.mark.docker
def test_check_tasks_on_a_planted_defect_exits_1(tmp_path: Path) -> None:
    code = main(["check-tasks", str(FIXTURES / "defects" / "always-one"), "--sandbox", "docker", "--repeats", "1",
                 "--no-cache"])
    assert code == 1


@pytest.mark.bwrap
@pytest.mark.docker
def test_check_tasks_on_bwrap_grades_harbor_and_terminal_bench_folders_over_their_roots(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFY_CLI_ENV_DIR", str(tmp_path / "store"))
    out = tmp_path / "report.json"
    shutil.copytree(FIXTURES / "sound" / "fix-sum", tmp_path / "tasks" / "fix-sum")
    shutil.copytree(FIXTURES.parent / "terminal-bench" / "hello-file", tmp_path / "tasks" / "hello-file")
    code = main(["check-tasks", str(tmp_path / "tasks"), "--sandbox", "bwrap", "--repeats", "1", "--no-cache",
                 "--json", str(out)])
    doc = json.loads(out.read_text())
    assert code == 0, doc
    assert {t["task_id"]: t["verdict"] for t in doc["tasks"]} == {"fix-sum": "sound", "hello-file": "sound"}
    runs = [r for t in doc["tasks"] for r in t["runs"]]
    assert all(r["isolation"] == "isolated-verifier" and r["environment"] for r in runs)


def test_on_the_process_backend_a_harbor_task_is_an_environment_error_saying_why(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code = main(["check-tasks", str(FIXTURES / "sound" / "fix-sum"), "--sandbox", "process", "--repeats", "1",
                 "--no-cache", "--json", str(out)])
    assert code == 1
    (task,) = json.loads(out.read_text())["tasks"]
    assert task["verdict"] == "environment-error"
    assert "--sandbox docker or bwrap" in json.dumps(task["checks"])


@pytest.mark.docker
def test_a_terminal_bench_1_folder_is_checked_as_it_is(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code = main(["check-tasks", str(FIXTURES.parent / "terminal-bench"), "--sandbox", "docker", "--repeats", "2",
                 "--no-cache", "--json", str(out)])
    doc = json.loads(out.read_text())
    assert code == 0, doc
    assert {t["task_id"]: t["verdict"] for t in doc["tasks"]} == {"hello-file": "sound"}
