"""verl reward functions graded by verify-cli: ``compute_score`` and its batch form.

verl imports a custom reward function by file and name (``reward.custom_reward_function.path`` /
``.name``; its ``reward_kwargs`` are passed through; verl 0.9 still reads the legacy top-level
``custom_reward_function`` and moves it there). The rows of ``verify-cli export --format verl`` carry the task id in
``extra_info.task_id``::

    reward:
      custom_reward_function:
        path: <site-packages>/verify_cli/adapters/verl.py
        name: compute_score
        reward_kwargs: {url: "http://127.0.0.1:8000"}   # or tasks: /data/tasks; or VERIFY_SERVE_URL
      reward_manager: {name: naive}      # verl 0.9.1's default (VERL_REWARD_MANAGER)

verl 0.9.1's trainer scores through ``RewardLoopManager`` (Ray actors, the ``naive`` reward manager,
``compute_score`` called in a thread per completion): tests/adapters/test_verl_framework.py runs it.
Its reward-loop registry holds ``naive``, ``dapo``, ``gdpo``, ``remote`` and ``rate_limited``, none
of which calls a batch function: ``reward_manager.name: batch`` fails there (``Unknown reward
manager: batch``). :func:`compute_score_batch` is for code that holds a whole batch itself (the
legacy ``verl.workers.reward_manager`` ``batch`` manager of older verl trainers, or your own loop).

Each returns ``{"score": float, "passed": bool, "status": str}`` per completion (verl keeps the
other keys as reward extra info). verl has no third state for a reward, so an infrastructure
error that outlasts the retries raises :class:`~verify_cli.adapters.grading.RewardInfraError`
(the step fails loudly and can be re-run), never a silent 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from verify_cli.adapters.grading import RewardInfraError, shared_grader
from verify_cli.errors import UsageError

_GRADER_OPTIONS = ("url", "token", "tasks", "sandbox", "jobs", "deadline_seconds", "infra_retries", "max_retries",
                   "max_wait", "max_batch")

#: The reward manager of verl 0.9.1's reward loop that calls :func:`compute_score`.
VERL_REWARD_MANAGER = "naive"


def _task_id(extra_info: Mapping[str, Any] | None, index: int | None = None) -> str:
    task_id = (extra_info or {}).get("task_id")
    if not task_id:
        where = f"row {index}: " if index is not None else ""
        raise UsageError(f"{where}extra_info has no task_id", hint="export the data set with "
                         "'verify-cli export --format verl', whose rows carry extra_info.task_id")
    return str(task_id)


def _answers(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in results:
        if r["status"] == "infra_error":
            raise RewardInfraError(f"task {r.get('task_id')}: {'; '.join(r.get('problems') or ['infra_error'])}")
        out.append({"score": float(r["score"] or 0.0), "passed": bool(r["passed"]), "status": str(r["status"])})
    return out


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl's reward function signature: the verify-cli grade of ``solution_str``."""
    grader = shared_grader(**{k: v for k, v in kwargs.items() if k in _GRADER_OPTIONS})
    return _answers(grader.grade([(_task_id(extra_info), solution_str)]))[0]


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[Mapping[str, Any] | None], **kwargs: Any) -> list[dict[str, Any]]:
    """Every completion of a batch graded in parallel, any batch size (not called by verl 0.9.1's
    reward loop, whose managers call :func:`compute_score` per completion)."""
    grader = shared_grader(**{k: v for k, v in kwargs.items() if k in _GRADER_OPTIONS})
    items = [(_task_id(info, i), text) for i, (info, text) in enumerate(zip(extra_infos, solution_strs, strict=True))]
    return _answers(grader.grade(items))
