"""The rollout loop end to end on CPU: a tiny random hf model, real sandboxes, real Parquet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from verify_cli.grading.grader import Grader
from verify_cli.rollout.episodes import SamplingOptions
from verify_cli.rollout.export import export_trl
from verify_cli.rollout.inspect import summarize_run
from verify_cli.rollout.loop import StepReport, TrainConfig, Trainer
from verify_cli.rollout.schema import TIMING_COLUMNS, TRAJECTORY_SCHEMA
from verify_cli.rollout.shards import read_manifest, read_run, verify_run
from verify_cli.sandbox.base import RunSpec, Sandbox
from verify_cli.sandbox.kit.testing import FakeSandbox
from verify_cli.sandbox.registry import create_sandbox, resolve_backend_name
from verify_cli.tasks.loader import load_task_set
from verify_cli.tasks.model import Task

CHILD = Path(__file__).resolve().parent / "train_child.py"
REPO = Path(__file__).resolve().parent.parent.parent
SAMPLE_TASKS = REPO / "sample_tasks"
TOY_TASKS = REPO / "tests" / "fixtures" / "toy_sums"


def load_tasks(path: Path) -> list[Task]:
    return [t for t in load_task_set(path) if isinstance(t, Task)]


@pytest.fixture
def sandbox() -> Iterator[tuple[str, Sandbox]]:
    name, _ = resolve_backend_name("auto")
    box = create_sandbox(name)
    with box:
        yield name, box


def failing_sandbox(inner: Sandbox, *, always: set[str], once: set[str]) -> FakeSandbox:
    """A real sandbox whose runs for some tasks fail as infrastructure (the daemon died): all of
    them for ``always``, the first run of each grading for ``once``."""
    failed: list[str] = []
    seen: set[str] = set()

    def fails(spec: RunSpec) -> bool:
        task = spec.labels.get("verify-cli.task", "")
        first = str(spec.workdir) not in seen
        seen.add(str(spec.workdir))
        if task in always or (task in once and len(failed) % 2 == 0 and first):
            failed.append(task)
            return True
        return False

    return FakeSandbox(inner=inner, fail_if=fails, fail_message="injected: container runtime went away")


def hf_backend(model: Path) -> Any:
    from verify_cli.models.registry import create_model_backend

    return create_model_backend("hf", model=str(model), device="cpu")


def test_shards_match_the_schema_and_the_manifest(tiny_model: Path, sandbox: tuple[str, Sandbox],
                                                  tmp_path: Path) -> None:
    name, box = sandbox
    tasks = load_tasks(SAMPLE_TASKS)
    config = TrainConfig(group_size=2, batch_size=2, steps=2, seed=3, sampling=SamplingOptions(max_tokens=6),
                         max_rows_per_shard=2)
    reports: list[StepReport] = []
    with Grader(box, warm=True) as grader:
        Trainer(config, hf_backend(tiny_model), grader, tasks, tmp_path, sandbox_backend=name,
                on_step=reports.append).run()
    assert verify_run(tmp_path) == []
    entries = read_manifest(tmp_path)
    assert [(e.step, e.part, e.parts, e.rows) for e in entries] == [(0, 0, 2, 2), (0, 1, 2, 2),
                                                                    (1, 0, 2, 2), (1, 1, 2, 2)]
    for e in entries:
        assert pq.read_schema(tmp_path / e.shard).equals(TRAJECTORY_SCHEMA, check_metadata=False)
        assert len(e.groups) == 1  # a group of 2 rows fills a shard of 2 and is never split
    table = read_run(tmp_path)
    assert table.num_rows == 8
    rows = table.to_pylist()
    for r in rows:
        assert r["status"] in ("ok", "wrong", "timeout", "parse_error")
        assert len(r["response_token_ids"]) == len(r["response_mask"]) == len(r["response_logprobs"])
        assert set(r["response_mask"]) <= {1} and r["num_turns"] == 1
        assert r["prompt_token_ids"] and r["messages"][-1]["role"] == "assistant"
        assert r["sampling"]["n"] == 2 and r["sandbox_backend"] == name
        assert r["reward"] == pytest.approx(r["reward_components"]["score"])
    assert {r["task_id"] for r in rows} <= {t.id for t in tasks}
    assert [sum(rep.status_counts.values()) for rep in reports] == [4, 4]


def test_an_injected_sandbox_failure_is_masked_and_reported_never_scored(
        tiny_model: Path, sandbox: tuple[str, Sandbox], tmp_path: Path) -> None:
    name, box = sandbox
    tasks = load_tasks(TOY_TASKS)
    broken, flaky = tasks[0].id, tasks[1].id
    failing = failing_sandbox(box, always={broken}, once={flaky})
    config = TrainConfig(group_size=3, batch_size=4, steps=1, seed=0, sampling=SamplingOptions(max_tokens=3),
                         system=None, include_tests=False)
    reports: list[StepReport] = []
    with Grader(failing) as grader:
        Trainer(config, hf_backend(tiny_model), grader, tasks, tmp_path, sandbox_backend=name,
                on_step=reports.append).run()
    rows = read_run(tmp_path).to_pylist()
    assert {r["task_id"] for r in rows} == {t.id for t in tasks}
    for r in rows:
        if r["task_id"] == broken and r["status"] != "parse_error":
            assert r["status"] == "sandbox_error" and r["masked"]
            assert r["reward"] is None and r["advantage"] is None
            assert r["reward_components"]["score"] is None and r["grade_attempts"] == 3
            assert any("injected" in p for p in r["problems"])
        else:
            assert not r["masked"] and r["reward"] is not None
    masked = [r for r in rows if r["masked"]]
    assert masked and reports[0].masked == len(masked)
    assert summarize_run(tmp_path)["masked"] == len(masked)
    # A transient failure is retried and then graded normally.
    retried = [r for r in rows if r["task_id"] == flaky and r["grade_attempts"] == 2]
    assert retried and all(r["status"] in ("ok", "wrong") for r in retried)
    # The broken task's group mean comes from its unmasked samples only.
    for gid in {r["group_id"] for r in rows}:
        scored = [r["reward"] for r in rows if r["group_id"] == gid and r["reward"] is not None]
        means = {r["group_reward_mean"] for r in rows if r["group_id"] == gid}
        assert means == ({sum(scored) / len(scored)} if scored else {None})
    # And masked rows never reach an export for training.
    dest = tmp_path / "trl.jsonl"
    assert export_trl(tmp_path, dest) == len(rows) - len(masked)


def test_trl_export_loads_with_datasets(toy_model: Path, sandbox: tuple[str, Sandbox], tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    name, box = sandbox
    run = tmp_path / "run"
    config = TrainConfig(group_size=2, batch_size=2, steps=1, seed=0, sampling=SamplingOptions(max_tokens=2),
                         system=None, include_tests=False, max_turns=2)
    with Grader(box) as grader:
        Trainer(config, hf_backend(toy_model), grader, load_tasks(TOY_TASKS), run, sandbox_backend=name).run()
    for suffix in ("jsonl", "parquet"):
        dest = tmp_path / f"trl.{suffix}"
        n = export_trl(run, dest)
        ds = datasets.load_dataset("json" if suffix == "jsonl" else "parquet", data_files=str(dest), split="train")
        assert len(ds) == n == 4
        first = ds[0]
        assert first["prompt"][0]["role"] == "user" and first["completion"][0]["role"] == "assistant"
        assert {"reward", "advantage", "status", "task_id"} <= set(ds.column_names)


def test_multi_turn_feedback_shows_visible_tests_only_and_is_masked(
        toy_model: Path, sandbox: tuple[str, Sandbox], tmp_path: Path) -> None:
    name, box = sandbox
    config = TrainConfig(group_size=4, batch_size=2, steps=1, seed=1, sampling=SamplingOptions(max_tokens=2),
                         system=None, include_tests=False, max_turns=2)
    with Grader(box) as grader:
        Trainer(config, hf_backend(toy_model), grader, load_tasks(TOY_TASKS), tmp_path, sandbox_backend=name).run()
    rows = read_run(tmp_path).to_pylist()
    revised = [r for r in rows if r["num_turns"] == 2]
    assert revised, "some first answers fail and get a second turn"
    for r in revised:
        roles = [m["role"] for m in r["messages"]]
        assert roles == ["user", "assistant", "user", "assistant"]
        feedback = r["messages"][2]["content"]
        assert "hidden" not in feedback and "digit_makes_the_sum_right" not in feedback
        mask = r["response_mask"]
        assert 0 in mask and mask[0] == 1 and mask[-1] in (0, 1)
        assert len(mask) == len(r["response_token_ids"]) == len(r["response_logprobs"])
        assert all(lp == 0.0 for lp, m in zip(r["response_logprobs"], mask, strict=True) if m == 0)
    for r in rows:
        if r["num_turns"] == 1:
            assert r["status"] == "ok" and set(r["response_mask"]) <= {1}


def _child(args: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, str(CHILD), json.dumps(args)], env=env, text=True,
                          capture_output=True, timeout=600)


def _comparable(run: Path) -> list[dict[str, Any]]:
    rows = read_run(run).to_pylist()
    for r in rows:
        for col in (*TIMING_COLUMNS, "run_id"):
            del r[col]
        r["group_id"] = r["group_id"].split("/", 1)[1]
    return sorted(rows, key=lambda r: (r["step"], r["group_index"], r["sample_index"]))


CRASH_RUN = {"tasks": str(TOY_TASKS), "group_size": 3, "batch_size": 2, "steps": 2, "seed": 11, "max_tokens": 2,
             "update": "grpo", "max_rows_per_shard": 3}


@pytest.fixture(scope="module")
def uninterrupted_run(toy_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("uninterrupted")
    whole = _child({**CRASH_RUN, "model": str(toy_model), "out": str(out)})
    assert whole.returncode == 0, whole.stderr[-3000:]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kill_point", ["before_commit", "between_shards"])
def test_a_run_killed_mid_step_and_resumed_has_exactly_the_rows_of_an_uninterrupted_run(
        toy_model: Path, uninterrupted_run: Path, tmp_path: Path, kill_point: str) -> None:
    common = {**CRASH_RUN, "model": str(toy_model), "out": str(tmp_path / "crashed")}
    crashed = _child({**common, "kill_at": 1, "kill_point": kill_point})
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert [e.step for e in read_manifest(tmp_path / "crashed")] == [0, 0]  # step 1 never committed
    resumed = _child({**common, "resume": True})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert verify_run(tmp_path / "crashed") == []
    expected, got = _comparable(uninterrupted_run), _comparable(tmp_path / "crashed")
    assert len(got) == 2 * 2 * 3
    assert got == expected
    # The resumed step was sampled from the policy restored from step 0's checkpoint.
    assert sorted({r["policy_version"] for r in got}) == [0, 1]
