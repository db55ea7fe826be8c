"""verify-cli tasks as a ``verifiers`` (0.4, the ``verifiers.v1`` API) taskset, graded by verify-cli.

Each verify-cli task is one single-turn task: the prompt is the task as one user message (its
prompt, starter files and visible tests, and the answer format), and the reward (its ``@vf.reward``
rubric, ``verify_cli``) is verify-cli's trusted grade of the model's reply, through
:class:`~verify_cli.adapters.grading.CompletionGrader`: a ``verify-cli serve`` service (``url``)
or in-process over the task folders (``tasks``).

verifiers loads a taskset by a top-level module name that exports one ``Taskset`` subclass in
``__all__``; a one-line module of your own does it (``verify_cli_tasks.py``)::

    from verify_cli.adapters.verifiers import VerifyCliTaskset
    __all__ = ["VerifyCliTaskset"]

then ``vf-eval verify_cli_tasks --env.taskset.tasks sample_tasks --env.agent.harness.id null
--env.agent.runtime.type subprocess --model M --client.base-url URL``, or in Python
:func:`load_environment` (which registers that module name itself).

Infrastructure errors (the sandbox failed, the service is down past its retries): verifiers
has no third reward state, so the reward raises verifiers' own ``SandboxError`` (a typed error
passes verifiers' scoring boundary unchanged, so the trace names the sandbox, not the task's
code: ``TaskError`` is for a task that raised; its cause is verify-cli's
:class:`~verify_cli.adapters.grading.RewardInfraError`). verifiers records
the rollout as failed (``trace.ok`` false, the error in ``trace.errors``, no reward), which
``vf-eval --resume`` runs again, never a reward of 0.

Needs ``verifiers`` (the ``verifiers`` extra, or a framework environment of its own).
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import verifiers.v1 as vf

from verify_cli.adapters.grading import RewardInfraError, shared_grader
from verify_cli.client import ServiceUnavailableError
from verify_cli.models.prompts import user_message

#: The module name :func:`load_environment` registers this module under (verifiers imports a
#: taskset by a top-level module name).
TASKSET_ID = "verify_cli_tasks"


def _sandbox_error(why: str) -> vf.SandboxError:
    """verifiers' SandboxError for a reply verify-cli could not grade (caused by RewardInfraError)."""
    error = vf.SandboxError(f"verify-cli could not grade the reply: {why}")
    error.__cause__ = RewardInfraError(why)
    return error


class VerifyCliTaskData(vf.TaskData):
    task_id: str
    """The verify-cli task id the reply is graded against."""


class VerifyCliTaskConfig(vf.TaskConfig):
    """How the reward grades: ``url`` (a ``verify-cli serve``) or ``tasks`` (in this process)."""

    url: str | None = None
    token: str | None = None
    tasks: str | None = None
    sandbox: str = "auto"
    deadline_seconds: float | None = None
    infra_retries: int = 1


class VerifyCliTask(vf.Task[VerifyCliTaskData, vf.State, VerifyCliTaskConfig]):
    @property
    def key(self) -> str:
        return str(self.data.task_id)

    @vf.stop
    async def answered(self, trace: vf.Trace) -> bool:
        return bool(trace.num_turns >= 1)  # single turn: the reply is the answer

    @vf.reward(weight=1.0)
    async def verify_cli(self, trace: vf.Trace) -> float:
        """verify-cli's grade of the last reply; raises RewardInfraError on an infra error."""
        options = {k: v for k, v in self.config.model_dump().items()
                   if k in ("url", "token", "tasks", "sandbox", "deadline_seconds", "infra_retries")
                   and v is not None}
        grader = shared_grader(**options)
        try:
            (result,) = await asyncio.to_thread(grader.grade, [(self.data.task_id, trace.last_reply or "")])
        except ServiceUnavailableError as e:
            raise _sandbox_error(f"task {self.data.task_id}: the verify-cli service is unavailable: {e}") from e
        if result["status"] == "infra_error":
            raise _sandbox_error(f"task {self.data.task_id}: {'; '.join(result.get('problems') or [])}")
        return float(result["score"] or 0.0)


class VerifyCliTasksetConfig(vf.TasksetConfig):
    """``tasks``: the task folders (``os.pathsep``-separated) the taskset lists; the reward grades
    through ``task.url`` when set, else in-process over the same folders."""

    tasks: str = ""
    task: VerifyCliTaskConfig = VerifyCliTaskConfig()


class VerifyCliTaskset(vf.Taskset[VerifyCliTask, VerifyCliTasksetConfig]):
    def load(self) -> list[VerifyCliTask]:
        from verify_cli.errors import UsageError
        from verify_cli.tasks.loader import TaskLoadFailure, load_task_set

        if not self.config.tasks:
            raise UsageError("verifiers taskset: env.taskset.tasks is empty", hint="name the task folders")
        config = self.config.task
        if config.url is None and config.tasks is None:
            config = config.model_copy(update={"tasks": self.config.tasks})
        out: list[VerifyCliTask] = []
        for root in self.config.tasks.split(os.pathsep):
            for item in load_task_set(Path(root)):
                if isinstance(item, TaskLoadFailure):
                    raise item.error
                data = VerifyCliTaskData(idx=len(out), name=item.id, prompt=user_message(item), task_id=item.id)
                out.append(VerifyCliTask(data, config))
        return out


def load_environment(tasks: str | Path, *, url: str | None = None, token: str | None = None,
                     sandbox: str = "auto", harness: str = "null", runtime: str = "subprocess",
                     **task_options: Any) -> Any:
    """A verifiers ``Env`` over the task folders ``tasks`` (``vf.load_environment``), single-turn
    on verifiers' ``null`` harness in a ``subprocess`` runtime by default."""
    sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])
    from verifiers.v1.envs.single_agent import SingleAgentEnvConfig

    task = VerifyCliTaskConfig(url=url, token=token, sandbox=sandbox, **task_options)
    config = SingleAgentEnvConfig.model_validate({
        "taskset": {"id": TASKSET_ID, "tasks": str(tasks), "task": task.model_dump()},
        "agent": {"harness": {"id": harness}, "runtime": {"type": runtime}},
    })
    return vf.load_environment(config)


__all__ = ["TASKSET_ID", "VerifyCliTask", "VerifyCliTaskConfig", "VerifyCliTaskData", "VerifyCliTaskset",
           "VerifyCliTasksetConfig", "load_environment"]
