"""task.toml's one ``kind`` field: the new form, the old form (kind = "tests" with
[test] framework) still loading with a deprecation note, and contradictions refused."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from verify_cli.errors import TaskFormatError
from verify_cli.tasks.loader import deprecation_notes, load_task, load_task_set
from verify_cli.tasks.model import TaskKind

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "kinds" / "legacy-form"
ROOT = Path(__file__).resolve().parents[2]


def test_the_old_form_loads_as_its_kind_with_a_deprecation_note() -> None:
    task = load_task(LEGACY)
    assert task.kind is TaskKind.PYTEST
    (note,) = task.deprecations
    assert str(LEGACY / "task.toml") in note and 'write kind = "pytest"' in note and "old form" in note


def test_a_set_reports_each_old_form_once(tmp_path: Path) -> None:
    import shutil

    for name in ("a", "b", "c"):
        shutil.copytree(LEGACY, tmp_path / name)
        toml = tmp_path / name / "task.toml"
        toml.write_text(toml.read_text().replace('id = "kinds/legacy-form"', f'id = "kinds/{name}"'))
    notes = deprecation_notes(list(load_task_set(tmp_path)))
    assert len(notes) == 1 and "(and 2 more task(s))" in notes[0], notes


@pytest.mark.parametrize(("framework", "kind"), [("pytest", "pytest"), ("node", "node"), ("other", "command"),
                                                 (None, "command")])
def test_each_old_framework_maps_to_a_kind(make_task: Any, framework: str | None, kind: str) -> None:
    def old(doc: dict[str, Any]) -> None:
        doc.pop("kind")
        doc["test"].pop("framework", None)
        if framework is not None:
            doc["test"]["framework"] = framework

    task = load_task(make_task(mutate=old))
    assert task.kind == kind
    assert bool(task.deprecations) == (framework is not None)


def test_the_new_form_has_no_note_and_an_agreeing_framework_is_noted(make_task: Any) -> None:
    assert load_task(make_task()).deprecations == ()

    def both(doc: dict[str, Any]) -> None:
        doc["test"]["framework"] = "pytest"

    (note,) = load_task(make_task(mutate=both)).deprecations
    assert "framework is the old form" in note


def test_a_framework_that_contradicts_the_kind_is_an_error(make_task: Any) -> None:
    def contradict(doc: dict[str, Any]) -> None:
        doc["test"]["framework"] = "node"

    with pytest.raises(TaskFormatError) as e:
        load_task(make_task(mutate=contradict))
    assert e.value.pointer == "/test/framework"


def test_an_unknown_kind_names_the_kinds(make_task: Any) -> None:
    def typo(doc: dict[str, Any]) -> None:
        doc["kind"] = "pytset"

    with pytest.raises(TaskFormatError) as e:
        load_task(make_task(mutate=typo))
    assert e.value.pointer == "/kind" and "did you mean 'pytest'" in str(e.value)


def test_sample_tasks_and_fixtures_use_the_new_form() -> None:
    old = [p for p in [*ROOT.glob("sample_tasks/*/task.toml"), *ROOT.glob("tests/fixtures/**/task.toml")]
           if p.parent != LEGACY and ("framework" in tomllib.loads(p.read_text()).get("test", {})
                                      or tomllib.loads(p.read_text()).get("kind") == "tests")]
    assert old == []


def test_the_scaffold_writes_the_new_form(tmp_path: Path) -> None:
    from verify_cli.tasks.scaffold import scaffold_task

    for language, kind in (("python", "pytest"), ("javascript", "node")):
        task = load_task(scaffold_task(tmp_path / language, language=language))
        assert task.kind == kind and task.deprecations == ()
