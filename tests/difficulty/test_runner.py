"""The runner: grading overlaps generation, the cache resumes and extends runs, adaptive
sampling stops decided tasks early. Real tasks, real sandbox runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from verify_cli.difficulty.cache import SampleCache
from verify_cli.difficulty.runner import DifficultyOptions, DifficultyProgress, run_difficulty
from verify_cli.grading.grader import Grader
from verify_cli.models import create_model_backend
from verify_cli.models.base import Completion, ModelBackend, ModelBackendError, Prompt, SamplingParams
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.kit.testing import FakeSandbox
from verify_cli.tasks.loader import load_task_set
from verify_cli.tasks.model import Task

TaskSet = Callable[..., tuple[Path, Path]]
RIGHT = "def total(values):\n    return sum(values)\n"
WRONG = "def total(values):\n    return 1\n"


class PacedBackend(ModelBackend):
    """A model that takes ``seconds`` per completion and answers RIGHT on even sample indexes."""

    name = "paced"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.prompts: list[tuple[str, int, int]] = []  # (task id, first sample, n) per request

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        return [list(self._one(p, params)) for p in prompts]

    def _one(self, p: Prompt, params: SamplingParams) -> Iterator[Completion]:
        self.prompts.append((p.task_id, p.first_sample, params.n))
        for j in range(params.n):
            time.sleep(self.seconds)
            yield Completion(RIGHT if (p.first_sample + j) % 2 == 0 else WRONG)

    def generate_stream(self, prompts: Sequence[Prompt], params: SamplingParams, *,
                        chunk_size: int = 1) -> Iterator[tuple[int, Completion]]:
        for i, p in enumerate(prompts):
            for c in self._one(p, params):
                yield i, c


def tasks_in(folder: Path) -> list[Task]:
    return [t for t in load_task_set(folder) if isinstance(t, Task)]


def test_grading_overlaps_generation(task_set: TaskSet, process_sandbox: Sandbox) -> None:
    folder, _ = task_set({"a": [], "b": []})
    seen: list[DifficultyProgress] = []
    backend = PacedBackend(0.25)
    report = run_difficulty(tasks_in(folder), backend, Grader(process_sandbox),
                            DifficultyOptions(samples=4, jobs=2), on_progress=seen.append)
    assert [t.stats.n for t in report.tasks] == [4, 4]
    assert [t.stats.correct for t in report.tasks] == [2, 2]  # even indexes are right
    # Samples were graded while the model was still generating the rest.
    assert any(p.graded >= 1 and p.generated < 8 for p in seen)
    assert seen[-1].graded == seen[-1].generated == 8


def test_more_samples_only_add_new_ones_and_seeds_differ(task_set: TaskSet, tmp_path: Path,
                                                         process_sandbox: Sandbox) -> None:
    folder, _ = task_set({"a": []})
    cache = SampleCache(tmp_path / "cache")
    backend = PacedBackend(0)
    first = run_difficulty(tasks_in(folder), backend, Grader(process_sandbox), DifficultyOptions(samples=3),
                           cache=cache)
    assert (first.generated, first.cached) == (3, 0)
    more = run_difficulty(tasks_in(folder), backend, Grader(process_sandbox), DifficultyOptions(samples=5),
                          cache=cache)
    assert (more.generated, more.cached) == (2, 3)
    assert backend.prompts == [("set/a", 0, 3), ("set/a", 3, 2)]
    (task,) = more.tasks
    assert [r.sample_index for r in task.records] == [0, 1, 2, 3, 4]
    assert task.stats.correct == 3
    # A different seed is a different cache entry: nothing is reused.
    other = run_difficulty(tasks_in(folder), backend, Grader(process_sandbox),
                           DifficultyOptions(samples=2, seed=1), cache=cache)
    assert (other.generated, other.cached) == (2, 0)


def test_adaptive_stops_decided_tasks_early(task_set: TaskSet, process_sandbox: Sandbox) -> None:
    folder, replay = task_set({"always": [f"```python solution.py\n{RIGHT}```"] * 32,
                               "never": [WRONG] * 32,
                               "half": [RIGHT, WRONG] * 16})
    backend = create_model_backend("replay", model=str(replay))
    opts = DifficultyOptions(samples=32, round_size=8, adaptive=True, jobs=2)
    report = run_difficulty(tasks_in(folder), backend, Grader(process_sandbox), opts)
    by_id = {t.task_id: t for t in report.tasks}
    assert by_id["set/always"].bucket == "solved" and by_id["set/always"].stats.n == 16
    assert by_id["set/never"].bucket == "unsolved" and by_id["set/never"].stats.n == 16
    assert by_id["set/half"].stats.n == 32 and not by_id["set/half"].stopped_early
    assert by_id["set/always"].stopped_early and report.sampled == 64 < report.fixed_budget == 96


@pytest.mark.slow
def test_killed_run_resumes_without_resampling(task_set: TaskSet, tmp_path: Path) -> None:
    folder, replay = task_set({"a": [RIGHT, WRONG] * 4, "b": [WRONG, RIGHT] * 4}, slow=0.3)
    cache = tmp_path / "cache"
    args = [sys.executable, "-m", "verify_cli", "difficulty", str(folder), "-b", "replay", "-m", str(replay),
            "-n", "8", "--out", str(tmp_path / "out"), "--sandbox", "process", "-j", "1",
            "--cache-dir", str(cache), "--json", "-"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    lines = 0
    deadline = time.monotonic() + 120
    while lines < 5 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        lines = sum(p.read_text().count("\n") for p in cache.rglob("*.jsonl"))
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done = sum(p.read_text().count("\n") for p in cache.rglob("*.jsonl"))
    assert 5 <= done < 16

    resumed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["cached"] == done and summary["generated"] == 16 - done
    rows = pq.read_table(tmp_path / "out" / "samples.parquet").to_pylist()
    assert sorted((r["task_id"], r["sample_index"]) for r in rows) == sorted(
        (t, i) for t in ("set/a", "set/b") for i in range(8))
    assert {t["task_id"]: t["correct"] for t in summary["tasks"]} == {"set/a": 4, "set/b": 4}


class FailingBackend(PacedBackend):
    """Serves ``good`` completions, then the server goes away."""

    def __init__(self, good: int) -> None:
        super().__init__(0)
        self.good = good

    def generate_stream(self, prompts: Sequence[Prompt], params: SamplingParams, *,
                        chunk_size: int = 1) -> Iterator[tuple[int, Completion]]:
        for n, item in enumerate(super().generate_stream(prompts, params)):
            if n == self.good:
                raise ModelBackendError("the server went away")
            yield item


def test_a_backend_failure_ends_the_run_but_keeps_what_was_graded(task_set: TaskSet, tmp_path: Path,
                                                                  process_sandbox: Sandbox) -> None:
    folder, _ = task_set({"a": []})
    cache = SampleCache(tmp_path / "cache")
    with pytest.raises(ModelBackendError, match="went away"):
        run_difficulty(tasks_in(folder), FailingBackend(2), Grader(process_sandbox), DifficultyOptions(samples=4),
                       cache=cache)
    resumed = run_difficulty(tasks_in(folder), PacedBackend(0), Grader(process_sandbox),
                             DifficultyOptions(samples=4), cache=cache)
    assert (resumed.cached, resumed.generated) == (2, 2)


def test_infra_errors_are_retried_and_never_counted(task_set: TaskSet, tmp_path: Path,
                                                    process_sandbox: Sandbox) -> None:
    folder, _ = task_set({"a": []})
    # Two failures: the first sample's grading is retried twice and then passes.
    box = FakeSandbox(inner=process_sandbox, fail_first=2, fail_message="daemon hiccup")
    report = run_difficulty(tasks_in(folder), PacedBackend(0), Grader(box), DifficultyOptions(samples=2, jobs=1))
    (task,) = report.tasks
    assert (task.stats.n, task.stats.correct, task.stats.status_counts["infra_error"]) == (2, 1, 0)
    assert [r.attempts for r in task.records] == [3, 1]
    # A sandbox that keeps failing: the samples are infra errors, not failures, and not cached.
    cache = SampleCache(tmp_path / "cache")
    box = FakeSandbox(inner=process_sandbox, fail_first=100, fail_message="daemon hiccup")
    report = run_difficulty(tasks_in(folder), PacedBackend(0), Grader(box), DifficultyOptions(samples=2, jobs=1),
                            cache=cache)
    (task,) = report.tasks
    assert (task.stats.n, task.stats.status_counts["infra_error"], task.bucket) == (0, 2, "unsampled")
    assert box.runs == 6 and not list((tmp_path / "cache").glob("*.jsonl"))
