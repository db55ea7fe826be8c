"""A set of fast tasks and replay files of completions whose correctness is known."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TaskFactory = Callable[..., Path]


def _fraction(doc: dict[str, Any]) -> None:
    doc["scoring"] = {"policy": "fraction"}


@pytest.fixture
def task_set(tmp_path: Path, make_task: TaskFactory) -> Callable[..., tuple[Path, Path]]:
    """``task_set({"a": [RIGHT, WRONG], ...})``: one fast task per key (id ``set/<key>``) and a
    replay JSONL of the listed completions; returns (tasks folder, replay file)."""

    def build(plan: dict[str, list[str]], slow: float = 0.0) -> tuple[Path, Path]:
        root = tmp_path / "tasks"
        rows = []
        for name, completions in plan.items():
            def mutate(doc: dict[str, Any], name: str = name) -> None:
                _fraction(doc)
                doc["id"] = f"set/{name}"
                if slow:
                    doc["test"]["command"] = f"sleep {slow}; " + doc["test"]["command"]

            make_task(f"tasks/{name}", mutate=mutate, fast=True)
            rows += [{"task_id": f"set/{name}", "completion": c} for c in completions]
        replay = tmp_path / "completions.jsonl"
        replay.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return root, replay

    return build


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Llama-style model folder with a byte-level tokenizer (no downloads)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("the hf backend needs torch and transformers (pip install 'verify-cli[train]')")
    from verify_cli.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
