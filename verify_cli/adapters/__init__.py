"""Adapters: verify-cli's trusted grading as the reward of the RL frameworks people train with.

Each is a small module whose framework is an optional extra, imported only by that module:

- :mod:`verify_cli.adapters.trl`: a ``reward_funcs`` callable for TRL's ``GRPOTrainer``
  (extra ``trl``); an infrastructure error is ``None``, which TRL masks.
- :mod:`verify_cli.adapters.verl`: verl's ``compute_score`` and its batch form (plain functions:
  verl imports them by file path); an infrastructure error raises :class:`RewardInfraError`.
- :mod:`verify_cli.adapters.openenv`: task sets as an OpenEnv environment (extra ``openenv``);
  an infrastructure error ends the episode with reward None and status ``infra_error``.

Both grade through :class:`~verify_cli.adapters.grading.CompletionGrader`: a verify-cli
service (``url``, the ``verify-cli serve`` client) or in-process over task folders (``tasks``).
"""

from verify_cli.adapters.grading import CompletionGrader, RewardInfraError

__all__ = ["CompletionGrader", "RewardInfraError"]
