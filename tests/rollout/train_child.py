"""A training run in a child process, for the crash tests: ``python train_child.py ARGS_JSON``.

ARGS_JSON names the model, tasks, run folder, steps, update and an optional crash: ``kill_at``
(a step) with ``kill_point`` ``before_commit`` (rows and checkpoint exist, no shard) or
``between_shards`` (the step's first shard is on disk, its manifest lines are not). The crash is
a real SIGKILL of this process. ``agent`` (a turn limit) makes each sample an agent episode.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from verify_cli.grading.grader import Grader
from verify_cli.models.registry import create_model_backend
from verify_cli.rollout import shards
from verify_cli.rollout.episodes import SamplingOptions
from verify_cli.rollout.grpo import GRPOConfig
from verify_cli.rollout.loop import TrainConfig, Trainer
from verify_cli.rollout.policy import PolicyUpdater
from verify_cli.sandbox.registry import create_sandbox, resolve_backend_name
from verify_cli.tasks.loader import load_task_set


def main() -> None:
    args = json.loads(sys.argv[1])
    out = Path(args["out"])
    kill_at = args.get("kill_at")
    point = args.get("kill_point", "before_commit")
    if kill_at is not None and point == "between_shards":
        real_replace = os.replace

        def crashing_replace(src: str, dst: str) -> None:
            real_replace(src, dst)
            if str(dst).endswith(f"step-{kill_at:06d}-000.parquet"):
                os.kill(os.getpid(), signal.SIGKILL)

        shards.os.replace = crashing_replace  # type: ignore[attr-defined]

    def before_commit(step: int) -> None:
        if kill_at == step and point == "before_commit":
            os.kill(os.getpid(), signal.SIGKILL)

    backend = create_model_backend("hf", model=args["model"], device="cpu")
    tasks = [t for t in load_task_set(Path(args["tasks"])) if not hasattr(t, "error")]
    config = TrainConfig(group_size=args["group_size"], batch_size=args["batch_size"], steps=args["steps"],
                         seed=args["seed"], sampling=SamplingOptions(max_tokens=args["max_tokens"]),
                         update=args["update"], include_tests=False, system=None, grade_jobs=2,
                         max_rows_per_shard=args.get("max_rows_per_shard", 4096))
    name, _ = resolve_backend_name("auto")
    box = create_sandbox(name)
    with box, Grader(box) as grader:
        policy = PolicyUpdater(backend, out, GRPOConfig(lr=1e-2)) if args["update"] == "grpo" else None
        runner = None
        if args.get("agent"):  # each sample an agent episode (text protocol over the model)
            from verify_cli.agents.episode import EpisodeLimits
            from verify_cli.agents.protocol import agent_model
            from verify_cli.agents.training import AgentGroupRunner

            runner = AgentGroupRunner(agent_model(backend), box, grader, sampling=config.sampling,
                                      reward=config.reward, limits=EpisodeLimits(max_turns=args["agent"]),
                                      concurrency=2)
        Trainer(config, backend, grader, tasks, out, sandbox_backend=name, policy=policy,
                before_commit=before_commit, runner=runner).run(resume=bool(args.get("resume")))


if __name__ == "__main__":
    main()
