"""The loop is real end to end: GRPO on CPU raises a tiny model's reward on the toy sum tasks,
graded in the sandbox like any task, against the same run without updates."""

from __future__ import annotations

from pathlib import Path

import pytest

from verify_cli.grading.grader import Grader
from verify_cli.models.registry import create_model_backend
from verify_cli.rollout.episodes import SamplingOptions
from verify_cli.rollout.grpo import GRPOConfig
from verify_cli.rollout.loop import StepReport, TrainConfig, Trainer
from verify_cli.rollout.policy import PolicyUpdater
from verify_cli.sandbox.registry import create_sandbox, resolve_backend_name
from verify_cli.tasks.loader import load_task_set
from verify_cli.tasks.model import Task

TOY_TASKS = Path(__file__).resolve().parent.parent / "fixtures" / "toy_sums"
STEPS = 10


def train(model: Path, out: Path, update: str) -> list[float]:
    tasks = [t for t in load_task_set(TOY_TASKS) if isinstance(t, Task)]
    backend = create_model_backend("hf", model=str(model), device="cpu")
    config = TrainConfig(group_size=8, batch_size=2, steps=STEPS, seed=1, sampling=SamplingOptions(max_tokens=1),
                         update=update, system=None, include_tests=False, grade_jobs=4)
    name, _ = resolve_backend_name("auto")
    reports: list[StepReport] = []
    with create_sandbox(name) as box, Grader(box, warm=True) as grader:  # the loop is under test
        policy = PolicyUpdater(backend, out, GRPOConfig(lr=1e-2)) if update == "grpo" else None
        Trainer(config, backend, grader, tasks, out, sandbox_backend=name, policy=policy,
                on_step=reports.append).run()
    return [r.reward_mean or 0.0 for r in reports]


@pytest.mark.slow
def test_grpo_raises_the_mean_reward_against_the_same_run_without_updates(toy_model: Path, tmp_path: Path) -> None:
    trained = train(toy_model, tmp_path / "grpo", "grpo")
    frozen = train(toy_model, tmp_path / "none", "none")
    assert trained[0] == frozen[0]  # same seed, same initial policy: the same first step
    late_trained = sum(trained[-4:]) / 4
    late_frozen = sum(frozen[-4:]) / 4
    assert late_trained > late_frozen + 0.1, (trained, frozen)
    assert late_trained > sum(trained[:2]) / 2 + 0.05, trained
