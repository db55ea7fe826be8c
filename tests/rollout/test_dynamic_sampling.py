"""Groups with equal rewards are reported and, with dynamic sampling, replaced within a budget.

Completions are replayed from a file (no model needed), graded in the sandbox like any others.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verify_cli.grading.grader import Grader
from verify_cli.models.registry import create_model_backend
from verify_cli.rollout.loop import StepReport, TrainConfig, Trainer
from verify_cli.rollout.shards import read_run
from verify_cli.sandbox.registry import create_sandbox, resolve_backend_name
from verify_cli.tasks.loader import load_task_set
from verify_cli.tasks.model import Task

TOY_TASKS = Path(__file__).resolve().parent.parent / "fixtures" / "toy_sums"
#: Per task: the same wrong digit three times (all-equal rewards), or a right and a wrong one.
FLAT = {"toy/sum-1-plus-x-is-8": "9", "toy/sum-2-plus-x-is-5": "9"}
MIXED = {"toy/sum-4-plus-x-is-5": ("1", "x"), "toy/sum-6-plus-x-is-8": ("2", "0")}


def run(tmp_path: Path, *, dynamic: bool, budget: int | None) -> tuple[list[StepReport], list[dict[str, object]]]:
    replay = tmp_path / "completions.jsonl"
    lines = [{"task_id": t, "completion": d} for t, d in FLAT.items() for _ in range(3)]
    lines += [{"task_id": t, "completion": c} for t, pair in MIXED.items() for c in (*pair, pair[0])]
    replay.write_text("".join(json.dumps(x) + "\n" for x in lines))
    tasks = [t for t in load_task_set(TOY_TASKS) if isinstance(t, Task)]
    config = TrainConfig(group_size=3, batch_size=4, steps=1, dynamic_sampling=dynamic, dynamic_budget=budget,
                         system=None)
    name, _ = resolve_backend_name("auto")
    reports: list[StepReport] = []
    out = tmp_path / f"run-{dynamic}-{budget}"
    with create_sandbox(name) as box, Grader(box) as grader:
        Trainer(config, create_model_backend("replay", model=replay), grader, tasks, out,
                sandbox_backend=name, on_step=reports.append).run()
    return reports, read_run(out).to_pylist()


def test_all_equal_groups_are_reported_and_kept_without_dynamic_sampling(tmp_path: Path) -> None:
    (report,), rows = run(tmp_path, dynamic=False, budget=None)
    assert sorted(report.all_equal_groups) == sorted(FLAT)
    assert report.replaced_groups == 0
    flat_rows = [r for r in rows if r["task_id"] in FLAT]
    assert len(flat_rows) == 6 and all(r["advantage"] == 0.0 for r in flat_rows)
    mixed = [r for r in rows if r["task_id"] == "toy/sum-4-plus-x-is-5"]
    # Rewards 1, 0 (parse error: "x" is not a digit... it is graded: format fails) and 1.
    assert sorted(r["reward"] for r in mixed) == pytest.approx([0.0, 1.0, 1.0])
    assert [r["response_token_ids"] for r in rows] == [[]] * len(rows)  # replayed text: no tokens
    assert all(r["response_logprobs"] is None for r in rows)


def test_dynamic_sampling_replaces_flat_groups_within_its_budget(tmp_path: Path) -> None:
    (report,), rows = run(tmp_path, dynamic=True, budget=2)
    assert sorted(report.all_equal_groups) == sorted(FLAT)
    assert report.replaced_groups == 2
    by_group: dict[str, list[dict[str, object]]] = {}
    for r in rows:
        by_group.setdefault(str(r["group_id"]), []).append(r)
    assert len(by_group) == 4 and all(len(g) == 3 for g in by_group.values())
    # The flat groups' slots now hold tasks with a learning signal.
    assert {r["task_id"] for r in rows} == set(MIXED)
    assert all(len({r["reward"] for r in g}) > 1 for g in by_group.values())

    (limited,), _ = run(tmp_path, dynamic=True, budget=1)
    assert limited.replaced_groups == 1
