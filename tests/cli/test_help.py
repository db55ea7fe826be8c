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
