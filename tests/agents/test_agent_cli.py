"""``verify-cli agent run`` and ``agent shell`` as a user runs them."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import PolicyServer, scripted
from tests.conftest import SAMPLE_TASKS
from verify_cli.cli.app import main
from verify_cli.tasks.loader import load_task

pytestmark = pytest.mark.bwrap

TASK = SAMPLE_TASKS / "coding-roman-numerals"


def _solution_calls() -> list[tuple[str, Any]]:
    task = load_task(TASK)
    return [("write_file", {"path": rel, "content": p.read_text()}) for rel, p in task.solution_files().items()]


def test_agent_run_prints_each_turn_and_the_grade(policy_server: PolicyServer, capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    policy_server.policies["cli"] = scripted([[("bash", {"command": "ls"})], _solution_calls(), [("run_tests", {})]])
    out_json = tmp_path / "episode.json"
    code = main(["agent", "run", str(TASK), "--backend", "openai", "--model", "cli", "--base-url",
                 policy_server.base_url, "--sandbox", "bwrap", "--json", str(out_json)])
    shown = capsys.readouterr().out
    assert code == 0, shown
    assert "── turn 1" in shown and "→ bash" in shown and "→ write_file" in shown and "→ submit" in shown
    assert "grade: passed (score 1.00)" in shown
    doc = json.loads(out_json.read_text())
    assert doc["status"] == "passed" and doc["end_reason"] == "submit" and len(doc["turns"]) == 4


def test_agent_run_of_a_failing_episode_exits_1(policy_server: PolicyServer,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    policy_server.policies["cli-starter"] = scripted([])
    code = main(["agent", "run", str(TASK), "--backend", "openai", "--model", "cli-starter", "--base-url",
                 policy_server.base_url, "--sandbox", "bwrap"])
    assert code == 1
    assert "grade: failed" in capsys.readouterr().out


def test_agent_shell_drives_the_same_tools_from_a_prompt(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    task = load_task(TASK)
    (rel, path), = task.solution_files().items()
    script = f"help\n$ ls\nread {rel}\nwrite {rel}\n{path.read_text()}EOF\ntests\nnonsense\nsubmit\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    code = main(["agent", "shell", str(TASK), "--sandbox", "bwrap"])
    shown = capsys.readouterr().out
    assert code == 0, shown
    assert "exit code 0" in shown and "unknown command 'nonsense'" in shown
    assert " 0 failed" in shown or "no visible tests" in shown
    assert "grade: passed (score 1.00)" in shown


def test_agent_run_shortens_long_text_for_people_and_keeps_it_whole_in_json(
        policy_server: PolicyServer, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A 30 MB reply once went to the terminal whole, and every write_file printed its content."""
    content = "x = 1\n" * 20_000  # 120,000 characters written by one call
    reply = "thinking " * 10_000  # 90,000 characters of model text with no call: an observation says so
    policy_server.policies["long"] = scripted([[("write_file", {"path": "notes.py", "content": content})],
                                               reply, [("bash", {"command": "cat notes.py"})]])
    out_json = tmp_path / "episode.json"
    # the budget past what these long turns spend (it counts the text and the call arguments)
    code = main(["agent", "run", str(TASK), "--backend", "openai", "--model", "long", "--base-url",
                 policy_server.base_url, "--sandbox", "bwrap", "--token-budget", "1000000",
                 "--json", str(out_json)])
    shown = capsys.readouterr().out
    assert code == 1, shown[-2000:]
    assert len(shown) < 12_000, len(shown)  # three long turns, a few screens in all
    assert "→ write_file(" in shown and "characters …]" in shown
    write_line = next(line for line in shown.splitlines() if line.startswith("→ write_file("))
    assert len(write_line) < 1_000 and '"path": "notes.py"' in write_line
    doc = json.loads(out_json.read_text())
    calls = [c for t in doc["turns"] for c in t["tool_calls"] if c["name"] == "write_file"]
    assert json.loads(calls[0]["arguments"])["content"] == content  # whole in --json
    assert doc["turns"][1]["text"] == reply


def test_display_chars_0_shows_everything(policy_server: PolicyServer, capsys: pytest.CaptureFixture[str]) -> None:
    content = "y = 2\n" * 1_000
    policy_server.policies["whole"] = scripted([[("write_file", {"path": "notes.py", "content": content})]])
    main(["agent", "run", str(TASK), "--backend", "openai", "--model", "whole", "--base-url",
          policy_server.base_url, "--sandbox", "bwrap", "--display-chars", "0"])
    shown = capsys.readouterr().out
    assert json.dumps(content)[1:-1] in shown and "characters …]" not in shown
