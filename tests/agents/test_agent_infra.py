"""Agent runs on docker for every image, and the masked share made visible: ``difficulty --agent``
measures a JavaScript task (its image has no Python), names a task no episode could run in with
the cause, counts infra_error per cause, and keeps hidden-test text out of samples.parquet;
``train --agent`` warns on stderr when more than 1% of its trajectories were masked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.agents.conftest import PolicyServer
from tests.conftest import SAMPLE_TASKS
from verify_cli.cli.app import main
from verify_cli.difficulty.outputs import SAMPLES_FILE

pytestmark = pytest.mark.docker

ABSENT_IMAGE = "verify-cli/absent-image:1"


def _tasks(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    for name in ("coding-roman-numerals", "coding-word-wrap-js"):
        shutil.copytree(SAMPLE_TASKS / name, folder / name)
    broken = folder / "no-image"
    shutil.copytree(SAMPLE_TASKS / "coding-roman-numerals", broken)
    toml = (broken / "task.toml").read_text()
    toml = toml.replace('id = "coding/roman-numerals"', 'id = "coding/no-image"')
    toml = toml.replace('image = "verify-cli/python:3.11"', f'image = "{ABSENT_IMAGE}"')
    assert ABSENT_IMAGE in toml and "coding/no-image" in toml
    (broken / "task.toml").write_text(toml)
    return folder


def _look_then_submit(messages: Any) -> list[tuple[str, Any]]:
    first = sum(1 for m in messages if m["role"] == "assistant") == 0
    return [("bash", {"command": "ls"}), ("run_tests", {})] if first else [("submit", {})]


def test_difficulty_agent_on_docker_measures_every_image_and_names_what_cannot_run(
        policy_server: PolicyServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy_server.policies["look-submit"] = _look_then_submit
    summary = tmp_path / "summary.json"
    code = main(["difficulty", str(_tasks(tmp_path)), "--agent", "--backend", "openai", "--model", "look-submit",
                 "--base-url", policy_server.base_url, "--out", str(tmp_path / "out"), "--samples", "2", "-j", "2",
                 "--sandbox", "docker", "--no-cache", "--max-turns", "3", "--json", str(summary), "--no-plot"])
    assert code == 3  # samples could not be graded: said by the exit code, never dropped
    doc = json.loads(summary.read_text())
    tasks = {t["task_id"]: t for t in doc["tasks"]}
    assert set(tasks) == {"coding/roman-numerals", "coding/word-wrap-js", "coding/no-image"}
    assert tasks["coding/word-wrap-js"]["n"] == 2 and tasks["coding/word-wrap-js"]["infra_error"] == 0
    assert tasks["coding/no-image"]["n"] == 0 and tasks["coding/no-image"]["infra_error"] == 2
    assert doc["infra"]["infra_errors"] == 2 and doc["infra"]["samples"] == 6
    (cause,) = doc["infra"]["causes"]
    assert cause.startswith("no session could be opened") and tasks["coding/no-image"]["infra_causes"] == {cause: 2}
    captured = capsys.readouterr()
    assert "coding/no-image: could not be run here" in captured.err and "infra_error rate 33.3%" in captured.err
    table_rows = [line for line in captured.out.splitlines() if "coding/no-image" in line]
    assert table_rows and "infra_error 2" in table_rows[0]  # in the table, never dropped from it

    hidden = (SAMPLE_TASKS / "coding-roman-numerals" / "hidden_tests" / "test_roman_edge.py").read_text()
    hidden_lines = [line.strip() for line in hidden.splitlines() if len(line.strip()) > 20]
    rows = pq.read_table(tmp_path / "out" / SAMPLES_FILE).to_pylist()
    graded = [r for r in rows if r["task_id"] == "coding/roman-numerals"]
    assert graded and all(r["status"] == "failed" for r in graded)
    for r in rows:
        assert not any(line in r["completion"] for line in hidden_lines), r["completion"][:2000]
        outcome = json.loads(r["completion"])["outcome"]
        if r["status"] == "infra_error":
            assert r["score"] is None and r["problems"]
        else:
            assert all(set(t) == {"id", "outcome"} for t in outcome["grade"]["tests"])


def test_train_agent_warns_loudly_past_one_percent_masked(policy_server: PolicyServer, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    policy_server.policies["train-look"] = _look_then_submit
    folder = _tasks(tmp_path)
    shutil.rmtree(folder / "coding-word-wrap-js")
    run = tmp_path / "run"
    summary = tmp_path / "train.json"
    code = main(["train", str(folder), "--agent", "--backend", "openai", "--model", "train-look", "--backend-option",
                 f"base_url={policy_server.base_url}", "-G", "2", "-B", "2", "--steps", "1", "-j", "2",
                 "--sandbox", "docker", "--max-turns", "3", "--out", str(run), "--json", str(summary)])
    assert code == 0
    doc = json.loads(summary.read_text())
    assert doc["infra"]["infra_errors"] == 2 and doc["infra"]["samples"] == 4
    err = capsys.readouterr().err
    assert "WARNING" in err and "infra_error" in err and "over 1%" in err
    assert doc["infra"]["tasks_never_scored"] == ["coding/no-image"]
    assert "coding/no-image: could not be run here" in err
