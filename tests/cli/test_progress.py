"""Progress without a terminal: plain lines at a modest rate, never a count past the total."""

from __future__ import annotations

import pytest

from verify_cli.cli import console


def test_plain_progress_lines_without_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(console, "PLAIN_PROGRESS_SECONDS", 0.0)
    with console.progress_bar("doctor", 0) as advance:
        for i in range(3):
            advance(f"probe {i}")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4  # one per step at rate 0, and the final one
    assert lines[-1].startswith("doctor: 3 done,")  # no "3/0"
    assert "/0" not in "".join(lines)


def test_plain_progress_is_rate_limited(capsys: pytest.CaptureFixture[str]) -> None:
    with console.audit_progress("auditing") as update:
        for i in range(1, 50):
            update("t", i, 60)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [lines[0]] and lines[0].startswith("auditing: 49/60 done")


def test_the_summary_line_is_short(capsys: pytest.CaptureFixture[str]) -> None:
    console.use_stdout()  # as every command starts (an earlier --json - may have moved it)
    console.check_tasks_table([], backend="process", isolation="none: a very long description " * 5,
                              repeats=2)
    out = capsys.readouterr().out
    summary = [line for line in out.splitlines() if "sandbox" in line][-1]
    assert "very long description" not in out and "sandbox list" in summary and len(summary) < 100
