"""Adapters: verify-cli's trusted grading as the reward of the RL frameworks people train with.

Each is a small module whose framework is an optional extra, imported only when one of its
names is first used (``from verify_cli.adapters import VerifyCliReward`` imports TRL's side then):

- TRL (extra ``trl``): :class:`VerifyCliReward`, a ``reward_funcs`` callable for ``GRPOTrainer``;
  an infrastructure error is ``None``, which TRL masks. :class:`VerifyCliTaskEnvironment`, an
  ``environment_factory`` environment over ``verify-cli serve`` sessions (its ``get_reward`` is
  ``None`` on an infrastructure error).
- verl (no extra: verl imports the functions by file path, ``verify_cli/adapters/verl.py``):
  :func:`compute_score` and :func:`compute_score_batch`; an infrastructure error raises
  :class:`RewardInfraError`. :class:`VerifyCliTool` (``verify_cli/adapters/verl_tool.py``), a
  ``BaseTool`` for verl's multi-turn agent loop over ``verify-cli serve`` sessions (``submit``'s
  step reward is None and ``calc_reward`` raises :class:`RewardInfraError` on an infrastructure error).
- verifiers (extra ``verifiers``, the ``verifiers.v1`` API; not exported here, since verifiers
  pins openai<3 and is not in this venv): ``verify_cli/adapters/verifiers.py``, verify-cli tasks
  as a single-turn taskset whose ``@vf.reward`` is the trusted grade, and its ``load_environment``;
  an infrastructure error raises :class:`RewardInfraError`, a failed rollout with no reward.
- OpenEnv (extra ``openenv``): :func:`create_openenv_app`, :class:`VerifyCliEnvClient`,
  :class:`TaskAction`, :class:`TaskObservation`, :class:`VerifyCliEnvironment`; an
  infrastructure error ends the episode with reward None and status ``infra_error``.

They grade through :class:`CompletionGrader`: a verify-cli service (``url``, the
``verify-cli serve`` client) or in-process over task folders (``tasks``).
"""

from __future__ import annotations

from typing import Any

from verify_cli._exports import lazy_attribute
from verify_cli.adapters.grading import CompletionGrader, RewardInfraError

_LAZY = {
    "VerifyCliReward": "verify_cli.adapters.trl",
    "compute_score": "verify_cli.adapters.verl",
    "compute_score_batch": "verify_cli.adapters.verl",
    "create_openenv_app": "verify_cli.adapters.openenv",
    "VerifyCliEnvClient": "verify_cli.adapters.openenv",
    "VerifyCliEnvironment": "verify_cli.adapters.openenv",
    "TaskAction": "verify_cli.adapters.openenv",
    "TaskObservation": "verify_cli.adapters.openenv",
    "VerifyCliTaskEnvironment": "verify_cli.adapters.trl_env",
    "VerifyCliTool": "verify_cli.adapters.verl_tool",
    "tool_config": "verify_cli.adapters.verl_tool",
    "tools_kwargs": "verify_cli.adapters.verl_tool",
}

__all__ = ["CompletionGrader", "RewardInfraError", "TaskAction", "TaskObservation", "VerifyCliEnvClient",
           "VerifyCliEnvironment", "VerifyCliReward", "VerifyCliTaskEnvironment", "VerifyCliTool",
           "compute_score", "compute_score_batch", "create_openenv_app", "tool_config", "tools_kwargs"]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)
