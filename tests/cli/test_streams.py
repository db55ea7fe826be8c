"""The streams rule (docs/cli.md, "Output streams"): the result on stdout, or with ``--json -``
the JSON document alone; progress and diagnostics on stderr."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_train_cli import train
from verify_cli.cli.app import main


def test_train_writes_step_lines_to_stderr_and_the_summary_to_stdout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert train(tmp_path) == 0
    captured = capsys.readouterr()
    assert "step 0:" in captured.err and "step 1:" in captured.err  # progress
    assert "step 0:" not in captured.out
    assert "statuses:" in captured.out  # the run's summary: the result


def test_train_json_dash_puts_only_the_summary_on_stdout(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert train(tmp_path, "--json", "-") == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["steps"] == 2
    assert "step 0:" in captured.err


def test_import_puts_the_rows_not_imported_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"task_id": 1, "text": "t", "code": "def f():\n    return 0\n", "test_list": [],
                                "test_setup_code": ""}) + "\n")
    assert main(["import", str(rows), "--preset", "asserts", "--out", str(tmp_path / "set")]) == 1
    captured = capsys.readouterr()
    assert "row(s) not imported" in captured.err and "the list of asserts is empty" in captured.err
    assert "not imported" not in captured.out and "imported 0 of 1 rows" in captured.out


@pytest.mark.parametrize("command", [["tasks", "stats"], ["tasks", "list"], ["check-tasks", "--sandbox", "process",
                                                                          "--no-cache", "--repeats", "1"]])
def test_json_dash_leaves_stdout_to_the_json(command: list[str], make_task: Any,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    root = make_task("ok")
    main([*command[:2 if command[0] == "tasks" else 1], str(root),
          *command[2 if command[0] == "tasks" else 1:], "--json", "-"])
    json.loads(capsys.readouterr().out)  # nothing else on stdout


def test_import_and_export_json_dash_leave_stdout_to_the_json(tmp_path: Path, make_task: Any,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"task_id": 1, "text": "t", "code": "def f():\n    return 0\n",
                                "test_list": ["assert f() == 0"], "test_setup_code": ""}) + "\n")
    assert main(["import", str(rows), "--preset", "asserts", "--out", str(tmp_path / "set"), "--json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["imported"] == 1
    assert main(["export", str(tmp_path / "set"), "--format", "jsonl", "--out", str(tmp_path / "x.jsonl"),
                 "--json", "-"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert "exported 1 task(s)" in captured.err  # the human line moved to stderr


def test_sandbox_doctor_json_dash_leaves_stdout_to_the_json(capsys: pytest.CaptureFixture[str]) -> None:
    main(["sandbox", "doctor", "--sandbox", "process", "--json", "-"])
    json.loads(capsys.readouterr().out)
