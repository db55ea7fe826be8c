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

Multi-turn (verify-cli's verl tools, :mod:`verify_cli.adapters.verl_tool`): verl 0.9.1's
``ToolAgentLoop`` scores a trajectory with this same ``compute_score`` on its decoded text. For a
row whose ``extra_info.tools_kwargs`` are verify-cli's, ``compute_score`` answers the trusted
grade of the trajectory's session instead (recorded by the tools in ``extra_info``), submitting
it if the trajectory never did, which closes the session: a trajectory that wrote the right file
gets 1.0 whatever its text, one that only pasted code into its text gets the grade of the files
its session holds.

Each returns ``{"score": float, "passed": bool, "status": str}`` per completion (verl keeps the
other keys as reward extra info). verl has no third state for a reward, so an infrastructure
error that outlasts the retries raises :class:`~verify_cli.adapters.grading.RewardInfraError`
(the step fails loudly and can be re-run), never a silent 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from verify_cli.adapters.grading import RewardInfraError, shared_grader
from verify_cli.errors import UsageError

#: Where verify-cli's verl tools record a trajectory's session: ``extra_info`` keys
#: ``verify_cli_session/SID`` (url, session_id, task_id, and its reward once submitted).
SESSION_FIELD = "verify_cli_session"


def session_marker(session_id: str) -> str:
    """The line the first observation of a trajectory's session starts with."""
    return f"[verify-cli session {session_id}]"

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
    """verl's reward function signature: the verify-cli grade of ``solution_str``; for a
    multi-turn row (verify-cli tools: ``extra_info["tools_kwargs"]``, or the session the tools
    recorded), the trusted grade of the trajectory's session instead, never of the text."""
    info = extra_info or {}
    if _tool_task_id(info) or any(str(k).startswith(SESSION_FIELD + "/") for k in info):
        return _session_score(solution_str, info, kwargs)
    grader = shared_grader(**{k: v for k, v in kwargs.items() if k in _GRADER_OPTIONS})
    return _answers(grader.grade([(_task_id(extra_info), solution_str)]))[0]


def _tool_task_id(info: Mapping[str, Any]) -> str | None:
    """The task of a row whose tools are verify-cli's (``tools_kwargs(task_id)``), else None."""
    tools = info.get("tools_kwargs")
    if not isinstance(tools, Mapping):
        return None
    submit = tools.get("submit")
    create = submit.get("create_kwargs") if isinstance(submit, Mapping) else None
    task_id = create.get("task_id") if isinstance(create, Mapping) else None
    return str(task_id) if task_id else None


def _own_session(text: str, info: Mapping[str, Any]) -> Mapping[str, Any]:
    """The session record of the trajectory whose decoded text is ``text``: the one whose
    marker its first observation carried ({} when it opened none). ``extra_info`` may hold the
    sessions of every sample of a prompt (verl shares one dict among them); a trajectory's text
    holds only its own session's id, which it cannot learn of another's."""
    records = {str(k).split("/", 1)[1]: v for k, v in info.items()
               if str(k).startswith(SESSION_FIELD + "/") and isinstance(v, Mapping)}
    own = [sid for sid in records if session_marker(sid) in text]
    return records[own[0]] if own else {}


def _session_score(text: str, info: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The trajectory's session grade: as submitted by the trajectory, else submitted now (which
    closes the session); a trajectory that opened no session is graded on a fresh one (the
    starter files). RewardInfraError when the service could not grade it."""
    from verify_cli.client import ServiceRequestError, ServiceUnavailableError, VerifyClient

    record = _own_session(text, info)
    reward = record.get("reward")
    if not reward:
        url = record.get("url") or options.get("url") or os.environ.get("VERIFY_SERVE_URL")
        if not url:
            raise UsageError("a multi-turn row without a verify-cli service to grade its session",
                             hint="pass reward_kwargs url, or set VERIFY_SERVE_URL")
        token = options.get("token") or os.environ.get("VERIFY_SERVE_TOKEN") or None
        try:
            with VerifyClient(str(url), token=token, max_retries=int(options.get("max_retries", 5)),
                              max_wait=float(options.get("max_wait", 10.0))) as client:
                sid = record.get("session_id")
                if not sid:
                    task_id = _tool_task_id(info) or _task_id(info)
                    sid = client.open_session(task_id)["session_id"]
                reward = client.session_submit(str(sid))
        except (ServiceRequestError, ServiceUnavailableError) as e:
            raise RewardInfraError(f"verify-cli could not grade the trajectory's session: {e}") from e
    if reward.get("status") == "infra_error" or reward.get("score") is None:
        raise RewardInfraError(f"verify-cli could not grade the trajectory's session: {reward.get('reason', '')}")
    return {"score": float(reward["score"]), "passed": reward["status"] == "passed", "status": str(reward["status"])}


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[Mapping[str, Any] | None], **kwargs: Any) -> list[dict[str, Any]]:
    """Every completion of a batch graded in parallel, any batch size (not called by verl 0.9.1's
    reward loop, whose managers call :func:`compute_score` per completion)."""
    grader = shared_grader(**{k: v for k, v in kwargs.items() if k in _GRADER_OPTIONS})
    items = [(_task_id(info, i), text) for i, (info, text) in enumerate(zip(extra_infos, solution_strs, strict=True))]
    return _answers(grader.grade(items))
