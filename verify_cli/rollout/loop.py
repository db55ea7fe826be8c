"""The rollout loop behind ``verify-cli train``: batches, groups, rewards, advantages, shards, updates.

Each step is a pure function of (run seed, step, policy before the step): the batch, the sampling
seeds and the replacement tasks are derived from the seed and the step. Steps are committed to
the run folder one at a time (policy checkpoint first, then the shards and their manifest lines),
so ``resume`` after any crash redoes the interrupted step from its committed predecessor and
ends with exactly the rows of an uninterrupted run.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from verify_cli.errors import UsageError
from verify_cli.grading.batch import BatchGrader
from verify_cli.models.base import ModelBackend
from verify_cli.models.prompts import DEFAULT_SYSTEM
from verify_cli.rollout.advantages import GroupAdvantages, group_advantages
from verify_cli.rollout.batches import BatchSchedule
from verify_cli.rollout.episodes import Episode, EpisodeRunner, RoundTiming, SamplingOptions
from verify_cli.rollout.policy import PolicyUpdater
from verify_cli.rollout.rewards import RewardConfig
from verify_cli.rollout.schema import TRAJECTORY_SCHEMA
from verify_cli.rollout.shards import (
    RUN_FILE,
    ShardWriter,
    committed_steps,
    read_run_config,
    recover,
    write_run_config,
)
from verify_cli.sampling.seeds import derive_seed
from verify_cli.sampling.status import TRAJECTORY_LABELS
from verify_cli.sampling.step import RetryPolicy, SampleStep
from verify_cli.sampling.supply import check_supply
from verify_cli.sandbox.registry import environment_label
from verify_cli.tasks.model import Task

#: Options that must not change between a run and its --resume (they change what is sampled).
PINNED_OPTIONS = ("seed", "group_size", "batch_size", "temperature", "top_p", "max_tokens", "max_turns",
                  "update", "normalize_std", "dynamic_sampling", "dynamic_budget", "model", "task_ids", "agent")


@dataclass(frozen=True)
class TrainConfig:
    group_size: int
    batch_size: int
    steps: int
    seed: int = 0
    sampling: SamplingOptions = field(default_factory=SamplingOptions)
    reward: RewardConfig = field(default_factory=RewardConfig)
    #: Gradings of one completion before a sandbox failure is final (masked, never scored).
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_turns: int = 1
    normalize_std: bool = True
    dynamic_sampling: bool = False
    #: Replacement groups a step may sample with dynamic sampling (its bounded budget).
    dynamic_budget: int | None = None
    update: str = "none"  # none | grpo
    grade_jobs: int = 2
    include_tests: bool = True
    system: str | None = DEFAULT_SYSTEM
    max_rows_per_shard: int = 4096

    def budget(self) -> int:
        return self.batch_size if self.dynamic_budget is None else self.dynamic_budget


@dataclass
class StepReport:
    step: int
    rows: int
    groups: int
    reward_mean: float | None
    status_counts: dict[str, int]
    all_equal_groups: list[str]
    replaced_groups: int
    masked: int
    policy_version: int
    seconds: dict[str, float]
    update: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunSummary:
    run_id: str
    run_dir: Path
    steps_done: list[int]
    resumed_from: int | None
    reports: list[StepReport]


def _group_id(run_id: str, step: int, group_index: int) -> str:
    return f"{run_id}/{step}/{group_index}"


def episode_row(ep: Episode, *, run_id: str, step: int, group_index: int, adv: GroupAdvantages,
                advantage: float | None, policy_version: int, model: str, sampling: SamplingOptions,
                group_size: int, sandbox_backend: str) -> dict[str, Any]:
    """One trajectory row in :data:`verify_cli.rollout.schema.TRAJECTORY_SCHEMA`."""
    reward = ep.reward
    assert reward is not None  # every episode is graded before rows are built
    return {
        "run_id": run_id, "step": step, "task_id": ep.task.id, "group_id": _group_id(run_id, step, group_index),
        "group_index": group_index, "sample_index": ep.sample_index, "policy_version": policy_version,
        "model": model,
        "sampling": {"n": group_size, "temperature": sampling.temperature, "top_p": sampling.top_p,
                     "max_tokens": sampling.max_tokens, "seed": ep.group_seed},
        "sandbox_backend": sandbox_backend,
        # the sandbox says what it runs in: the task's built environment (its identity: `verify-cli
        # env list`), else its image (docker) or runtime
        "sandbox_image": (f"env:{reward.environment}" if reward.environment else
                          environment_label(sandbox_backend, ep.task.environment.image, ep.task.environment.runtime)),
        "prompt_token_ids": list(ep.prompt_ids), "response_token_ids": list(ep.response_ids),
        "response_mask": list(ep.response_mask),
        "response_logprobs": list(ep.logprobs) if ep.logprobs is not None else None,
        "prompt": ep.prompt.text, "response": ep.last_text,
        "messages": [{"role": m["role"], "content": m["content"]} for m in ep.messages],
        "num_turns": ep.turns, "finish_reason": ep.finish_reason,
        "reward": reward.total, "reward_components": reward.components(), "status": reward.status.trajectory_label,
        "masked": reward.masked, "tests_passed": reward.tests_passed, "tests_total": reward.tests_total,
        "grade_attempts": ep.grade_attempts, "problems": list(reward.problems),
        "advantage": advantage, "group_reward_mean": adv.mean, "group_reward_std": adv.std,
        "generation_seconds": ep.generation_seconds, "grading_seconds": ep.grading_seconds,
    }


class Trainer:
    """Runs steps of a training run into ``run_dir``."""

    def __init__(self, config: TrainConfig, backend: ModelBackend, grader: BatchGrader, tasks: Sequence[Task],
                 run_dir: Path, *, sandbox_backend: str, policy: PolicyUpdater | None = None,
                 on_step: Callable[[StepReport], None] | None = None,
                 before_commit: Callable[[int], None] | None = None, step: SampleStep | None = None,
                 other_task_ids: Iterable[str] = (),
                 on_warning: Callable[[str], None] | None = None, runner: Any = None) -> None:
        """``other_task_ids``: tasks that exist but are not trained on (skipped by difficulty
        bucket), so that replayed rows for them are not reported as naming no task. ``runner``
        samples the groups in place of the one-shot :class:`EpisodeRunner` (the agent runner,
        :class:`verify_cli.agents.training.AgentGroupRunner`): its ``run_groups`` gives the
        groups, its ``schema`` the shards' schema, its ``extra_columns(episode)`` the columns it
        adds to each row and its ``agent_pinned()`` what ``--resume`` must find unchanged."""
        if config.update != "none" and policy is None:
            raise UsageError(f"--update {config.update} needs a policy updater")
        #: What is worth saying before the run (replayed rows naming no task, tasks with none).
        self.warnings = check_supply(backend, tasks, config.group_size, option="--group-size",
                                     other_task_ids=other_task_ids)
        for warning in self.warnings:
            if on_warning is not None:
                on_warning(warning)
        self.config = config
        self.backend = backend
        self.grader = grader
        self.tasks = list(tasks)
        self.run_dir = run_dir
        self.sandbox_backend = sandbox_backend
        self.policy = policy
        self.on_step = on_step
        #: Called with the step number after its rows exist and before anything is committed
        #: (tests use it to crash a run at the worst moment).
        self.before_commit = before_commit
        self.schedule = BatchSchedule(self.tasks, config.batch_size, config.seed)
        self.runner = runner or EpisodeRunner(backend, grader, sampling=config.sampling, reward=config.reward,
                                              max_turns=config.max_turns, grade_jobs=config.grade_jobs,
                                              include_tests=config.include_tests, system=config.system,
                                              retry=config.retry, step=step)
        self._writer: ShardWriter | None = None
        self.policy_version = 0

    @property
    def writer(self) -> ShardWriter:
        """The run folder's shard writer, made on first use (nothing is written before the
        folder has been checked)."""
        if self._writer is None:
            self._writer = ShardWriter(self.run_dir, max_rows_per_shard=self.config.max_rows_per_shard,
                                       schema=getattr(self.runner, "schema", TRAJECTORY_SCHEMA))
        return self._writer

    def pinned(self) -> dict[str, Any]:
        c = self.config
        agent = getattr(self.runner, "agent_pinned", None)
        extra = {"agent": agent()} if agent is not None else {}
        return {**extra, "seed": c.seed, "group_size": c.group_size, "batch_size": c.batch_size,
                "temperature": c.sampling.temperature, "top_p": c.sampling.top_p,
                "max_tokens": c.sampling.max_tokens, "max_turns": c.max_turns, "update": c.update,
                "normalize_std": c.normalize_std, "dynamic_sampling": c.dynamic_sampling,
                "dynamic_budget": c.budget(), "model": self.backend.model_id,
                "task_ids": [t.id for t in self.tasks]}

    def start(self, *, resume: bool) -> tuple[str, int, int | None]:
        """(run id, first step to run, last committed step) after checking or creating the run folder."""
        existing = read_run_config(self.run_dir)
        if existing is None and resume:
            raise UsageError(f"--resume: {self.run_dir} holds no run to resume (no {RUN_FILE})",
                             hint="leave out --resume to start a new run there, or pass the --out folder of the "
                                  "run to continue")
        if existing is None:
            if committed_steps(self.run_dir):
                raise UsageError(f"{self.run_dir}: shards without a run.json; not a run folder verify-cli wrote")
            run_id = uuid.uuid4().hex[:12]
            write_run_config(self.run_dir, {"run_id": run_id, "schema": "verify-cli train run", **self.pinned()})
            return run_id, 0, None
        if not resume:
            raise UsageError(f"{self.run_dir} already holds a run ({existing.get('run_id')})",
                             hint="pass --resume to continue it, or choose another --out folder")
        changed = [k for k in PINNED_OPTIONS if existing.get(k) != self.pinned().get(k)]
        if changed:
            raise UsageError(f"cannot resume {self.run_dir}: options differ from the run's ({', '.join(changed)})",
                             hint="resume with the options the run was started with (see run.json)")
        entries = recover(self.run_dir)
        done = sorted({e.step for e in entries})
        last = done[-1] if done else None
        if self.policy is not None:
            self.policy_version = self.policy.restore(last)
        return str(existing["run_id"]), (last + 1) if last is not None else 0, last

    def run(self, *, resume: bool = False) -> RunSummary:
        run_id, first, last = self.start(resume=resume)
        reports = []
        for step in range(first, self.config.steps):
            reports.append(self.run_step(run_id, step))
        return RunSummary(run_id, self.run_dir, committed_steps(self.run_dir), last, reports)

    def _sample(self, step: int) -> tuple[list[tuple[list[Episode], GroupAdvantages]], list[str], int, RoundTiming]:
        """The step's groups (slot order) with advantages, the all-equal task ids, groups replaced."""
        cfg = self.config
        slot_tasks = self.schedule.batch(step)
        groups, timing = self.runner.run_groups(slot_tasks, cfg.group_size, derive_seed(cfg.seed, "step", step))
        for slot, g in enumerate(groups):
            for e in g:
                e.group_index = slot
        scored = [(g, group_advantages([e.reward.total if e.reward else None for e in g],
                                       normalize_std=cfg.normalize_std)) for g in groups]
        all_equal = [t.id for t, (_, a) in zip(slot_tasks, scored, strict=True) if a.all_equal]
        replaced = 0
        round_ = 0
        while cfg.dynamic_sampling and replaced < cfg.budget():
            flat = [i for i, (_, a) in enumerate(scored) if a.all_equal][: cfg.budget() - replaced]
            if not flat:
                break
            round_ += 1
            used = {t.id for t in slot_tasks}
            no_signal = {slot_tasks[i].id for i in flat} | set(all_equal)
            new_tasks = self.schedule.replacements(step, round_, len(flat), used, no_signal)
            new_groups, t = self.runner.run_groups(new_tasks, cfg.group_size,
                                                   derive_seed(cfg.seed, "step", step, "replace", round_))
            timing.add(t)
            for slot, task, g in zip(flat, new_tasks, new_groups, strict=True):
                for e in g:
                    e.group_index = slot
                slot_tasks[slot] = task
                scored[slot] = (g, group_advantages([e.reward.total if e.reward else None for e in g],
                                                    normalize_std=cfg.normalize_std))
            replaced += len(flat)
        return scored, all_equal, replaced, timing

    def run_step(self, run_id: str, step: int) -> StepReport:
        cfg = self.config
        started = time.monotonic()
        scored, all_equal, replaced, timing = self._sample(step)
        version = self.policy_version
        rows = []
        extra_columns = getattr(self.runner, "extra_columns", None)
        for gi, (group, adv) in enumerate(scored):
            for ep, a in zip(group, adv.advantages, strict=True):
                row = episode_row(ep, run_id=run_id, step=step, group_index=gi, adv=adv, advantage=a,
                                  policy_version=version, model=self.backend.model_id,
                                  sampling=cfg.sampling, group_size=cfg.group_size,
                                  sandbox_backend=self.sandbox_backend)
                if extra_columns is not None:
                    row.update(extra_columns(ep))
                rows.append(row)
        update_stats: dict[str, float] | None = None
        t_update = time.monotonic()
        if self.policy is not None and cfg.update != "none":
            update_stats = self.policy.update(rows)
            self.policy_version += 1
            self.policy.checkpoint(step, self.policy_version)
        update_s = time.monotonic() - t_update
        if self.before_commit is not None:
            self.before_commit(step)
        statuses: dict[str, int] = dict.fromkeys(TRAJECTORY_LABELS, 0)
        for r in rows:
            statuses[r["status"]] += 1
        rewards = [r["reward"] for r in rows if r["reward"] is not None]
        report = StepReport(
            step=step, rows=len(rows), groups=len(scored),
            reward_mean=sum(rewards) / len(rewards) if rewards else None, status_counts=statuses,
            all_equal_groups=all_equal, replaced_groups=replaced, masked=sum(r["masked"] for r in rows),
            policy_version=self.policy_version,
            seconds={"generation": timing.generation_s, "grading_tail": timing.grading_tail_s,
                     "grading_busy": timing.grading_busy_s, "update": update_s},
            update=update_stats)
        t_write = time.monotonic()
        report.seconds["step"] = t_write - started  # before writing: the manifest carries this
        self.writer.write_step(step, rows, stats=report.to_dict())
        report.seconds["writing"] = time.monotonic() - t_write
        report.seconds["step"] = time.monotonic() - started
        if self.policy is not None and cfg.update != "none":
            self.policy.prune(step)
        if self.on_step is not None:
            self.on_step(report)
        return report
