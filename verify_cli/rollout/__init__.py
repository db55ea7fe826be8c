"""Rollouts for RL: groups of completions, sandboxed rewards, advantages, Parquet trajectory shards."""

from typing import Any as _Any

from verify_cli._exports import lazy_attribute as _lazy_attribute

#: public name -> the module that defines it (imported on first use)
_PUBLIC: dict[str, str] = {
    "TrainConfig": "verify_cli.rollout.loop",
    "Trainer": "verify_cli.rollout.loop",
    "StepReport": "verify_cli.rollout.loop",
    "GRPOConfig": "verify_cli.rollout.grpo",
    "SamplingOptions": "verify_cli.rollout.episodes",
    "PolicyUpdater": "verify_cli.rollout.policy",
    "derive_seed": "verify_cli.sampling.seeds",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> _Any:
    return _lazy_attribute(__name__, _PUBLIC, name)
