"""A TRL ``GRPOTrainer`` reward function graded by verify-cli (extra ``trl``)::

    from verify_cli.adapters.trl import VerifyCliReward

    reward = VerifyCliReward(url="http://127.0.0.1:8000")        # or tasks="sample_tasks"
    trainer = GRPOTrainer(model=..., reward_funcs=[reward], train_dataset=dataset)  # a task_id column

The data set carries the task of each prompt in a column (``task_column``, default ``task_id``);
TRL passes it to the reward function with the completions. Each completion's files are taken
from its text (fenced blocks naming the files, or the bare answer for a one-file task) and graded
in verify-cli's sandboxes: the reward is the task's score (a completion with no file scores 0).

An infrastructure error (after ``infra_retries``), and a service that does not answer within
``max_retries`` tries (waits of at most ``max_wait`` seconds between them: about 20 s at the
defaults here), are returned as ``None`` for each completion; the next call tries the service
again. What TRL 1.16 does with ``None`` (``GRPOTrainer._generate_and_score_completions``):

- verify-cli the only reward function: the completion is unscorable, left out of its group's
  baseline and given advantage 0 (masked): never a 0 reward.
- beside other reward functions (a length bonus): TRL sums the rewards with ``nansum``, so the
  completion is trained on the *other* functions alone, as if verify-cli had scored it 0. Where
  that matters, keep verify-cli the only reward function, or fold the others into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from verify_cli.adapters.grading import CompletionGrader
from verify_cli.client import ServiceUnavailableError


def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a string, or (conversational) a list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict)
                       and m.get("role", "assistant") == "assistant")
    return str(completion)


class VerifyCliReward:
    """``reward_funcs`` entry: ``(prompts, completions, **columns) -> list[float | None]``."""

    def __init__(self, grader: CompletionGrader | None = None, *, task_column: str = "task_id",
                 name: str = "verify_cli", **grader_options: Any) -> None:
        grader_options.setdefault("max_retries", 5)
        grader_options.setdefault("max_wait", 5.0)
        self.grader = grader if grader is not None else (
            CompletionGrader(**grader_options) if grader_options.get("url") or grader_options.get("tasks")
            else CompletionGrader.from_env(**grader_options))
        self.task_column = task_column
        self.__name__ = name  # TRL names the reward's logs after it
        #: Every call's (task ids, completion texts, results), for reports and tests.
        self.history: list[tuple[list[str], list[str], list[dict[str, Any]]]] = []

    def __call__(self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        if self.task_column not in kwargs:
            from verify_cli.errors import UsageError

            raise UsageError(f"the training data set has no {self.task_column!r} column",
                             hint="add the task id of each prompt as a column, or pass task_column=")
        task_ids = [str(t) for t in kwargs[self.task_column]]
        texts = [completion_text(c) for c in completions]
        try:
            results = self.grader.grade(list(zip(task_ids, texts, strict=True)))
        except ServiceUnavailableError as e:
            results = [{"task_id": t, "status": "infra_error", "score": None, "passed": False, "tests": [],
                        "problems": [str(e)]} for t in task_ids]
        self.history.append((task_ids, texts, results))
        return [None if r["status"] == "infra_error" else float(r["score"] or 0.0) for r in results]

    def close(self) -> None:
        self.grader.close()
