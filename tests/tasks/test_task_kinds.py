"""task.toml of the 'stdio' and 'calls' kinds: what loads, and errors with a pointer and a hint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from verify_cli.errors import TaskFormatError
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import TaskKind

STDIO = """schema_version = 1
id = "k/stdio"
domain = "coding"
language = "python"
kind = "stdio"
editable = ["main.py"]

[environment]
image = "verify-cli/python:3.11"
runtime = "python"

[test]
command = "python -m verify_stdio"
results = "junit.xml"

[scoring]
policy = "all-or-nothing"

[limits]
wall_seconds = 10

[stdio]
program = "python main.py"
"""


@pytest.fixture
def stdio_folder(tmp_path: Path) -> Callable[[str], Path]:
    def make(toml: str) -> Path:
        (tmp_path / "solution").mkdir(exist_ok=True)
        (tmp_path / "solution" / "main.py").write_text("print(input())\n")
        (tmp_path / "hidden_tests" / "cases").mkdir(parents=True, exist_ok=True)
        (tmp_path / "hidden_tests" / "cases" / "1.in").write_text("a\n")
        (tmp_path / "hidden_tests" / "cases" / "1.out").write_text("a\n")
        (tmp_path / "task.toml").write_text(toml)
        return tmp_path

    return make


def test_a_stdio_task_loads_with_its_defaults(stdio_folder: Callable[[str], Path]) -> None:
    task = load_task(stdio_folder(STDIO))
    assert task.kind is TaskKind.STDIO and task.stdio is not None and task.calls is None
    assert (task.stdio.compare, task.stdio.tolerance, task.stdio.case_seconds) == ("lines", 1e-06, 5.0)


@pytest.mark.parametrize(("edit", "pointer", "hint"), [
    (lambda t: t.replace("\n[stdio]\nprogram = \"python main.py\"\n", ""), "/stdio", "schema"),
    (lambda t: t.replace('kind = "stdio"\n', ""), "/stdio", 'kind = "stdio"'),
    (lambda t: t.replace("python -m verify_stdio", "python main.py"), "/test/command", "python -m verify_stdio"),
    (lambda t: t + 'compare = "checker"\n', "/stdio/checker", "checker ="),
    (lambda t: t + 'compare = "fuzzy"\n', "/stdio/compare", None),
    (lambda t: t.replace("[stdio]", "[calls]\nentry_point = \"f\"\nmodule = \"x.py\"\n\n[stdio]"), "/calls", None),
])
def test_kind_errors_name_the_field(stdio_folder: Callable[[str], Path], edit: Callable[[str], str],
                                    pointer: str, hint: str | None) -> None:
    with pytest.raises(TaskFormatError) as info:
        load_task(stdio_folder(edit(STDIO)))
    assert info.value.pointer == pointer
    if hint is not None:
        assert hint in (info.value.hint or "")


def test_calls_module_must_be_a_solution_file(stdio_folder: Callable[[str], Path]) -> None:
    toml = (STDIO.replace('kind = "stdio"', 'kind = "calls"').replace("verify_stdio", "verify_calls")
            .replace('[stdio]\nprogram = "python main.py"', '[calls]\nentry_point = "f"\nmodule = "solution.py"'))
    with pytest.raises(TaskFormatError) as info:
        load_task(stdio_folder(toml))
    assert info.value.pointer == "/calls/module" and "main.py" in (info.value.hint or "")
