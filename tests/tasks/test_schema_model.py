"""The Task dataclasses and task_schemas/task.schema.json describe the same document."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from verify_cli.tasks import load_task
from verify_cli.tasks.model import (
    CallsSpec,
    Environment,
    Scoring,
    ScoringPolicy,
    StdioSpec,
    Task,
    TaskKind,
    TaskLimits,
    TestSpec,
)
from verify_cli.tasks.schema import task_schema

REPO_SCHEMA = Path(__file__).resolve().parents[2] / "task_schemas" / "task.schema.json"

#: Each dataclass and the schema object it mirrors ([] is the document itself).
MODELS: list[tuple[type, list[str]]] = [
    (Task, []),
    (Environment, ["environment"]),
    (TestSpec, ["test"]),
    (Scoring, ["scoring"]),
    (TaskLimits, ["limits"]),
    (StdioSpec, ["stdio"]),
    (CallsSpec, ["calls"]),
]
#: Fields that exist only in the model (not read from task.toml).
MODEL_ONLY = {"root", "deprecations", "harbor"}  # harbor: a Harbor folder's own settings
#: Fields that exist only in the schema: the old form's, read by the loader into ``kind``.
SCHEMA_ONLY = {"framework"}


def schema_node(path: list[str]) -> dict[str, Any]:
    node = task_schema()
    for part in path:
        node = node["properties"][part]
    return node


def field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return dataclasses.MISSING
    if isinstance(value, tuple):
        return list(value)  # tuples in the model are arrays in the schema
    return value


def test_the_packaged_schema_is_the_repository_schema() -> None:
    assert task_schema() == json.loads(REPO_SCHEMA.read_text("utf-8"))


def test_the_schema_is_valid_json_schema() -> None:
    Draft202012Validator.check_schema(task_schema())


@pytest.mark.parametrize(("model", "path"), MODELS, ids=[m.__name__ for m, _ in MODELS])
def test_field_names_match_schema_properties(model: type, path: list[str]) -> None:
    node = schema_node(path)
    fields = {f.name for f in dataclasses.fields(model)} - MODEL_ONLY
    assert fields == set(node["properties"]) - SCHEMA_ONLY
    assert node.get("additionalProperties") is False


@pytest.mark.parametrize(("model", "path"), MODELS, ids=[m.__name__ for m, _ in MODELS])
def test_required_fields_are_those_without_defaults(model: type, path: list[str]) -> None:
    node = schema_node(path)
    no_default = {
        f.name for f in dataclasses.fields(model) if field_default(f) is dataclasses.MISSING
    } - MODEL_ONLY
    assert no_default == set(node.get("required", []))


@pytest.mark.parametrize(("model", "path"), MODELS, ids=[m.__name__ for m, _ in MODELS])
def test_schema_defaults_equal_model_defaults(model: type, path: list[str]) -> None:
    node = schema_node(path)
    for f in dataclasses.fields(model):
        if f.name in MODEL_ONLY:
            continue
        prop = node["properties"][f.name]
        if "default" in prop:
            assert field_default(f) == prop["default"], f"{model.__name__}.{f.name}"


def test_scoring_policy_enum_matches_schema() -> None:
    assert [p.value for p in ScoringPolicy] == schema_node(["scoring"])["properties"]["policy"][
        "enum"
    ]


def test_task_kind_enum_matches_schema_and_registry() -> None:
    from verify_cli.kinds import BUILTIN_KINDS

    assert sorted(k.value for k in TaskKind) == sorted(schema_node([])["properties"]["kind"]["examples"])
    # "harbor" is what a Harbor task folder is read as, never a task.toml's kind
    assert sorted(k.value for k in TaskKind) == sorted(set(BUILTIN_KINDS) - {"harbor"})


def test_loader_fills_omitted_fields_with_model_defaults(make_task: Any) -> None:
    """A task.toml with only the required fields loads into dataclasses holding their defaults."""

    def required_only(doc: dict[str, Any]) -> None:
        for key in ("title", "tags"):
            doc.pop(key)
        doc["test"] = {"command": doc["test"]["command"]}
        doc["limits"] = {"wall_seconds": 30}

    task = load_task(make_task(mutate=required_only))
    for value in (task.environment, task.test, task.scoring, task.limits):
        for f in dataclasses.fields(value):
            default = field_default(f)
            if default is not dataclasses.MISSING:
                got = getattr(value, f.name)
                assert (list(got) if isinstance(got, tuple) else got) == default, f.name
    assert task.title == ""
    assert task.tags == ()
