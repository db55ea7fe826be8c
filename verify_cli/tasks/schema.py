"""The task schema: one JSON Schema file, shipped inside the package."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator


@lru_cache(maxsize=1)
def task_schema() -> dict[str, Any]:
    """The task.toml JSON Schema (``task_schemas/task.schema.json``)."""
    text = resources.files("verify_cli").joinpath("schemas/task.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@lru_cache(maxsize=1)
def task_validator() -> Draft202012Validator:
    schema = task_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)
