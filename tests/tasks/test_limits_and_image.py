"""Limits that cannot work and image names Docker would refuse are rejected at load time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from verify_cli.errors import TaskFormatError
from verify_cli.tasks import load_task


def load_error(folder: Path) -> TaskFormatError:
    with pytest.raises(TaskFormatError) as info:
        load_task(folder)
    return info.value


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_wall_seconds_is_refused(make_task: Any, value: float) -> None:
    root = make_task(mutate=lambda d: d["limits"].update(wall_seconds=value))
    e = load_error(root)
    assert e.path == str(root / "task.toml")
    assert e.pointer == "/limits/wall_seconds"
    assert "nan and inf" in e.detail
    assert e.hint and "finite" in e.hint


def test_memory_mb_has_an_upper_bound(make_task: Any) -> None:
    e = load_error(make_task(mutate=lambda d: d["limits"].update(memory_mb=10**9)))
    assert e.pointer == "/limits/memory_mb"
    assert e.hint and "262144" in e.hint
    load_task(make_task("ok", mutate=lambda d: d["limits"].update(memory_mb=262144)))


@pytest.mark.parametrize("image", ["verify-cli/python:3.11", "python", "python:3.11-slim",
                                   "localhost:5000/team/img:v1", "ghcr.io/a/b_c__d",
                                   "img@sha256:" + "a" * 64, "a.b-c/x:tag@sha256:" + "0" * 64])
def test_valid_image_references_load(make_task: Any, image: str) -> None:
    assert load_task(make_task(mutate=lambda d: d["environment"].update(image=image))).environment.image == image


@pytest.mark.parametrize("image", ["Python:3.11", "img:", "img:tag:tag", "-img", "img/", "a//b",
                                   "img name", "img@sha256:short", "img:" + "t" * 129])
def test_invalid_image_references_are_refused(make_task: Any, image: str) -> None:
    e = load_error(make_task(mutate=lambda d: d["environment"].update(image=image)))
    assert e.pointer == "/environment/image"
    assert e.hint and "[registry/]name[:tag][@digest]" in e.hint
