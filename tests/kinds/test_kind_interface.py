"""What every registered task kind declares, checked without a sandbox; and the registry's rules
for kinds (names, plugins)."""

from __future__ import annotations

from pathlib import Path

import pytest

from verify_cli.errors import UsageError
from verify_cli.kinds import BUILTIN_KINDS, KINDS, Kind, kind_of, register_kind
from verify_cli.registry import DuplicateNameError
from verify_cli.sandbox.environment import HARNESS_DIR
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import TaskKind

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kinds"


@pytest.mark.parametrize("name", KINDS.names())
def test_a_kind_declares_itself(name: str) -> None:
    kind = KINDS.get(name)
    assert isinstance(kind, Kind) and kind.name == name and kind.summary
    missing = [f for f in kind.harness_files if not (HARNESS_DIR / f).is_file()]
    assert missing == [], f"{name} names harness files that do not exist"
    runtime = kind.two_process
    assert runtime is None or (runtime.kind == name and runtime.server_command)


def test_the_builtin_kinds_are_the_task_formats() -> None:
    # "harbor" is what a Harbor task folder is read as, never a value of a task.toml's kind
    assert sorted(set(BUILTIN_KINDS) - {"harbor"}) == sorted(k.value for k in TaskKind)
    frameworks = [KINDS.get(n).legacy_framework for n in BUILTIN_KINDS]
    named = [f for f in frameworks if f is not None]
    assert sorted(named) == ["node", "other", "pytest"]  # each old framework means one kind


@pytest.mark.parametrize("name", sorted(BUILTIN_KINDS))
def test_each_fixture_task_is_its_kind(name: str) -> None:
    task = load_task(FIXTURES / name / "task")
    assert kind_of(task) is KINDS.get(name)


def test_a_name_is_registered_once_and_an_unknown_name_lists_the_kinds() -> None:
    class Other(Kind):
        name = "pytest"

    with pytest.raises(DuplicateNameError):
        KINDS.add("pytest", Other())
    with pytest.raises(UsageError) as e:
        KINDS.get("pytset")
    assert "pytest" in str(e.value.hint)


def test_a_kind_registers_under_its_own_name_and_needs_one() -> None:
    class Nameless(Kind):
        pass

    with pytest.raises(ValueError, match="no name"):
        register_kind(Nameless())

    class Extra(Kind):
        name = "test-contract-extra"

    extra = register_kind(Extra())
    try:
        assert KINDS.get("test-contract-extra") is extra
    finally:
        KINDS._items.pop("test-contract-extra")  # leave the registry as the suite found it


def test_the_kind_modules_are_the_only_ones_that_register_kinds() -> None:
    """Adding a kind is one module: the registry lists each built-in by its module."""
    for name, module in BUILTIN_KINDS.items():
        assert module == f"verify_cli.kinds.{name}"
