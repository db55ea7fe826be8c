"""The speed levers' switch: a benchmark turns one lever off by name, and a name that is no
lever is refused (a typo would otherwise measure nothing)."""

from __future__ import annotations

import pytest

from verify_cli.sandbox.plumbing.levers import LEVERS, LEVERS_OFF_ENV, lever_on


def test_levers_are_on_unless_named_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(LEVERS_OFF_ENV, raising=False)
    assert all(lever_on(name) for name in LEVERS)
    monkeypatch.setenv(LEVERS_OFF_ENV, " candidate-spare , other")
    assert not lever_on("candidate-spare")
    monkeypatch.setenv(LEVERS_OFF_ENV, "all")
    assert not any(lever_on(name) for name in LEVERS)


def test_an_unknown_lever_is_refused() -> None:
    with pytest.raises(KeyError, match="no speed lever 'candidate-spares'"):
        lever_on("candidate-spares")
