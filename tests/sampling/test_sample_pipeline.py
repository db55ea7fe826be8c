"""The sample pipeline under difficulty and train: one status vocabulary, one seed derivation, one
retry policy, the generation -> grading loop, and a per-sample step that plugs into both commands."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from verify_cli.difficulty.runner import DifficultyOptions, run_difficulty
from verify_cli.difficulty.stats import SampleStatus as DifficultyStatus
from verify_cli.grading.grader import Grader
from verify_cli.models.base import Completion, ModelBackend, ModelBackendError, Prompt, SamplingParams
from verify_cli.models.registry import create_model_backend
from verify_cli.rollout.loop import TrainConfig, Trainer
from verify_cli.rollout.shards import read_run
from verify_cli.sampling.seeds import derive_seed
from verify_cli.sampling.status import TRAJECTORY_LABELS, SampleStatus
from verify_cli.sampling.step import AnswerStep, GradedSample, RetryPolicy, SampleStep, grade_files
from verify_cli.sampling.stream import generate_and_grade
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.kit.testing import FakeSandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

RIGHT = "def total(values):\n    return sum(values)\n"
PROSE = "Sure! Just add the values up and return the sum.\n"


def test_one_vocabulary_serves_both_commands_and_shards_keep_their_spelling() -> None:
    assert DifficultyStatus is SampleStatus
    assert [s.value for s in SampleStatus] == ["passed", "failed", "timeout", "parse_error", "infra_error",
                                               "prompt_too_long"]
    # Trajectory shards written before the pipeline read like those written after it.
    assert TRAJECTORY_LABELS == ("ok", "wrong", "timeout", "parse_error", "sandbox_error", "prompt_too_long")
    # Never scored: a sandbox failure, and a prompt the model's context cannot hold (never generated).
    unscored = [SampleStatus.INFRA_ERROR, SampleStatus.PROMPT_TOO_LONG]
    assert [s for s in SampleStatus if not s.counts] == unscored
    assert [s for s in SampleStatus if s.masked] == unscored


def test_seeds_are_those_train_runs_were_started_with() -> None:
    # A run started before the pipeline resumes with the same batches and sampling seeds.
    assert derive_seed(0, "step", 0) == 1764147459
    assert derive_seed(11, "epoch", 2) == 1987242722
    assert derive_seed(3, "step", 1, "replace", 2) == 631640576


def test_infra_errors_are_retried_by_the_one_policy_and_never_scored(make_task: object,
                                                                      process_sandbox: Sandbox) -> None:
    task = load_task(make_task("t", fast=True))  # type: ignore[operator]
    box = FakeSandbox(inner=process_sandbox, fail_first=2, fail_message="daemon hiccup")
    sample = AnswerStep(Grader(box), RetryPolicy(attempts=3)).run(task, Completion(RIGHT))
    assert (sample.status, sample.attempts, sample.score) == (SampleStatus.PASSED, 3, 1.0)
    box = FakeSandbox(inner=process_sandbox, fail_first=100, fail_message="daemon hiccup")
    sample = AnswerStep(Grader(box), RetryPolicy(attempts=2)).run(task, Completion(RIGHT))
    assert (sample.status, sample.attempts, sample.score, box.runs) == (SampleStatus.INFRA_ERROR, 2, None, 2)
    assert sample.status.masked and any("daemon hiccup" in p for p in sample.problems)


def test_a_bare_answer_that_is_not_python_is_a_parse_error_and_never_graded(make_task: object,
                                                                           counting_sandbox: FakeSandbox) -> None:
    task = load_task(make_task("t", fast=True))  # type: ignore[operator]
    step = AnswerStep(Grader(counting_sandbox))
    sample = step.run(task, Completion(PROSE))
    assert (sample.status, sample.attempts, sample.score, counting_sandbox.runs) == (
        SampleStatus.PARSE_ERROR, 0, 0.0, 0)
    assert "not valid Python" in (sample.parse_error or "")
    # A bare answer that parses is still the file (and graded: after the grader's one reference
    # run that collects the task's declared tests).
    assert step.run(task, Completion(RIGHT)).status is SampleStatus.PASSED and counting_sandbox.runs == 2


class CountingBackend(ModelBackend):
    """Yields ``count`` completions, then fails (``fail``) or ends."""

    name = "counting"

    def __init__(self, count: int, *, fail: bool = False) -> None:
        self.count, self.fail = count, fail

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        raise NotImplementedError

    def generate_stream(self, prompts: Sequence[Prompt], params: SamplingParams, *,
                        chunk_size: int = 1) -> Iterator[tuple[int, Completion]]:
        for i in range(self.count):
            yield i, Completion(str(i))
        if self.fail:
            raise ModelBackendError("the server went away")


def test_the_loop_bounds_its_backlog_and_keeps_what_was_graded_when_the_backend_fails() -> None:
    arrived: list[int] = []
    handed_back: list[int] = []
    running, most_running = 0, 0
    lock = threading.Lock()
    backlog_seen: list[int] = []

    def arrive(key: int, completion: Completion, seconds: float) -> int:
        arrived.append(key)
        backlog_seen.append(len(arrived) - len(handed_back) - 1)
        return key

    def grade(item: int) -> int:
        nonlocal running, most_running
        with lock:
            running += 1
            most_running = max(most_running, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        return item * 10

    stream = CountingBackend(12, fail=True).generate_stream([], SamplingParams())
    with pytest.raises(ModelBackendError, match="went away"):
        generate_and_grade(stream, arrive=arrive, grade=grade, jobs=2, backlog=4,
                           on_graded=lambda item, graded: handed_back.append(graded))
    # Every completion that arrived before the failure was graded and handed back.
    assert sorted(handed_back) == [10 * i for i in range(12)]
    assert most_running <= 2 and max(backlog_seen) <= 4


class ReferenceStep(SampleStep):
    """A step that grades files of its own making instead of the completion's text, as an agent
    episode sampler grades its session's final files: here the task's reference solution."""

    def __init__(self, grader: Grader) -> None:
        self.grader = grader

    def run(self, task: Task, completion: Completion, *, label: str = "") -> GradedSample:
        files = {rel: p.read_text() for rel, p in task.solution_files().items()}
        return grade_files(self.grader, task, files, retry=RetryPolicy(), label=label)


def test_a_step_of_its_own_plugs_into_difficulty_and_train(make_task: object, tmp_path: Path,
                                                          process_sandbox: Sandbox) -> None:
    task = load_task(make_task("t", fast=True))  # type: ignore[operator]
    replay = tmp_path / "rows.jsonl"
    replay.write_text("".join(json.dumps({"task_id": task.id, "completion": PROSE}) + "\n" for _ in range(3)))
    grader = Grader(process_sandbox)
    plain = run_difficulty([task], create_model_backend("replay", model=str(replay)), grader,
                           DifficultyOptions(samples=3))
    assert plain.tasks[0].stats.status_counts["parse_error"] == 3
    stepped = run_difficulty([task], create_model_backend("replay", model=str(replay)), grader,
                             DifficultyOptions(samples=3), step=ReferenceStep(grader))
    assert (stepped.tasks[0].stats.correct, stepped.tasks[0].bucket) == (3, "solved")
    Trainer(TrainConfig(group_size=3, batch_size=1, steps=1, system=None), create_model_backend(
        "replay", model=str(replay)), grader, [task], tmp_path / "run", sandbox_backend="process",
        step=ReferenceStep(grader)).run()
    rows = read_run(tmp_path / "run").to_pylist()
    assert [r["status"] for r in rows] == ["ok"] * 3 and [r["reward"] for r in rows] == [1.0] * 3
