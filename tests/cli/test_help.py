"""Every command's --help reads in click's conventions: no {path}, no <str>/<bool>/<list[str]>."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from verify_cli.cli.app import app, main

BAD = re.compile(r"\{[a-z_]+\}|<[a-z_ \[\]|]+>")
USAGE_ARG = re.compile(r"\[([a-z_]+)\]")


def _commands(command: Any, path: list[str]) -> Iterator[list[str]]:
    yield path
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        if not getattr(sub, "hidden", False):
            yield from _commands(sub, [*path, name])


COMMANDS = list(_commands(typer.main.get_command(app), []))


def test_every_command_is_scanned() -> None:
    names = {" ".join(p) for p in COMMANDS}
    for expected in ("check-tasks", "audit", "difficulty", "train", "import", "export",
                     "sandbox doctor", "sandbox list"):
        assert expected in names
    assert any(n.startswith("trajectories ") for n in names)
    assert any(n.startswith("tasks ") for n in names)
    assert any(n.startswith("cluster ") for n in names)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "verify-cli")
def test_help_follows_click_conventions(path: list[str], capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert "Usage:" in out
    assert not BAD.findall(out), BAD.findall(out)
    usage = next(line for line in out.splitlines() if "Usage:" in line)
    assert not USAGE_ARG.findall(usage), usage  # [path] only for an optional argument, uppercase


def _option_names(path: list[str]) -> list[str]:
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return [name for p in command.params if p.param_type_name == "option"
            for name in (*p.opts, *p.secondary_opts)]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "verify-cli")
def test_help_at_80_columns_shows_every_option_name_whole(path: list[str], capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*path, "--help"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "…" not in out, [line for line in out.splitlines() if "…" in line]  # nothing cut short
    missing = [name for name in _option_names(path)
               if not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", out)]
    assert missing == [], f"option names not shown whole at 80 columns: {missing}"


def test_the_80_column_check_sees_a_cut_name(capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """What typer's own panel did to difficulty at 80 columns (issue 39): the check catches it."""
    from typer import rich_utils

    from verify_cli.cli import help_style

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(rich_utils, "_print_options_panel", help_style._typer_options_panel)
    assert main(["difficulty", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--tensor-paralle…" in out or "--gpu-memory-uti…" in out


@pytest.mark.parametrize("path", [p for p in COMMANDS if len(_option_names(p)) >= 24],
                         ids=lambda p: " ".join(p))
def test_a_long_command_groups_its_options(path: list[str], capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*path, "--help"]) == 0
    panels = re.findall(r"^╭─ (\w+) ", capsys.readouterr().out, re.M)
    assert "Options" in panels and "Sandbox" in panels and len(panels) >= 3, panels
