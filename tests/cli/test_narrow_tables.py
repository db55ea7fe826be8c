"""On a narrow terminal a table wraps its cells onto more lines; it never cuts a task id short
with "…" (issue 39: ``tasks list`` at 60 columns showed ``codi…`` for every id)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from verify_cli.cli import console
from verify_cli.cli.app import main


def _narrow(monkeypatch: pytest.MonkeyPatch, width: int) -> io.StringIO:
    """stdout as a terminal ``width`` columns wide (stderr's progress elsewhere); what it shows."""
    buf = io.StringIO()
    terminal = Console(width=width, file=buf, force_terminal=True, color_system=None, highlight=False)
    monkeypatch.setattr(console, "_console", lambda stderr: terminal if not stderr else Console(file=io.StringIO()))
    monkeypatch.setattr(console, "err", Console(file=io.StringIO()))
    return buf


@pytest.mark.parametrize("width", [50, 80])
def test_tasks_list_wraps_ids_on_a_narrow_terminal(width: int, sample_tasks_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    buf = _narrow(monkeypatch, width)
    assert main(["tasks", "list", str(sample_tasks_dir)]) == 0
    shown = buf.getvalue()
    assert "…" not in shown
    assert max(len(line) for line in shown.splitlines()) <= width
    cells = "".join(line.split("│")[1].strip() for line in shown.splitlines() if line.startswith("│"))
    assert "interface-spec/event-emitter-js" in cells  # the id column's lines, joined


def test_check_tasks_wraps_a_long_id(make_task: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    long_id = "a-task-whose-id-is-long-enough-to-wrap-at-fifty-columns"
    root = make_task("long", mutate=lambda doc: doc.update(id=long_id))
    buf = _narrow(monkeypatch, 50)
    assert main(["check-tasks", str(root), "--sandbox", "process", "--no-cache", "--repeats", "1"]) == 0
    shown = buf.getvalue()
    assert "…" not in shown
    cells = "".join(line.split("│")[1].strip() for line in shown.splitlines() if line.startswith("│"))
    assert long_id in cells
