"""Grade model completions of tasks named by id, for the framework adapters.

Two ways, one answer shape (the ``/v1/grade`` result: ``status``, ``score``, ``passed``,
``tests``, ``problems``):

- ``url=``: through a ``verify-cli serve`` service (:class:`verify_cli.client.VerifyClient`, with
  its retries of 429 and of restarts);
- ``tasks=``: in this process, over the task folders given, on the local executor (``sandbox``,
  ``jobs``, warm workers), the files taken from each completion as ``/v1/grade`` takes them.

``infra_error`` results are graded again up to ``infra_retries`` times; what is still an infra
error is returned as such (score None): each adapter says what its framework gets for it.
Environment defaults (for frameworks that import a reward function by path): ``VERIFY_SERVE_URL``
and ``VERIFY_SERVE_TOKEN``, else ``VERIFY_TASKS`` (``os.pathsep``-separated folders).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verify_cli.errors import UsageError


class RewardInfraError(RuntimeError):
    """Grading failed for infrastructure reasons (the sandbox, the service), after retries: the
    completion has no reward, neither 0 nor 1."""


def _parse_error(task_id: str, why: str) -> dict[str, Any]:
    return {"task_id": task_id, "status": "parse_error", "score": 0.0, "passed": False, "tests": [],
            "problems": [why]}


class CompletionGrader:
    def __init__(self, *, url: str | None = None, token: str | None = None,
                 tasks: str | Path | Sequence[str | Path] | None = None, sandbox: str = "auto", jobs: int = 2,
                 warm: bool = True, deadline_seconds: float | None = None, infra_retries: int = 1,
                 max_retries: int = 20, max_wait: float = 30.0, max_batch: int | None = None) -> None:
        if (url is None) == (tasks is None):
            raise UsageError("give exactly one of url (a verify-cli service) and tasks (task folders)",
                             hint="or set VERIFY_SERVE_URL, or VERIFY_TASKS")
        self.url = url
        self.deadline_seconds = deadline_seconds
        self.infra_retries = infra_retries
        self.jobs = jobs
        self._client: Any = None
        self._executor: Any = None
        self._tasks: dict[str, Any] = {}
        if url is not None:
            from verify_cli.client import VerifyClient

            # max_retries/max_wait bound how long a call waits for a service that is down
            # (then ServiceUnavailableError); requests are split to the service's capacity.
            self._client = VerifyClient(url, token=token, max_retries=max_retries, max_wait=max_wait,
                                        max_batch=max_batch)
        else:
            from verify_cli.executors import create_executor
            from verify_cli.tasks.loader import TaskLoadFailure, load_task_set

            roots = [tasks] if isinstance(tasks, (str, Path)) else list(tasks or [])
            for root in roots:
                for item in load_task_set(Path(root)):
                    if isinstance(item, TaskLoadFailure):
                        raise item.error
                    self._tasks.setdefault(item.id, item)
            self._executor = create_executor("local", sandbox=sandbox, warm=warm)
            self._executor.reserve(jobs)

    @classmethod
    def from_env(cls, **options: Any) -> CompletionGrader:
        """A grader from ``VERIFY_SERVE_URL``/``VERIFY_SERVE_TOKEN`` or ``VERIFY_TASKS``."""
        url = os.environ.get("VERIFY_SERVE_URL")
        if url:
            return cls(url=url, token=os.environ.get("VERIFY_SERVE_TOKEN") or None, **options)
        tasks = os.environ.get("VERIFY_TASKS")
        if tasks:
            return cls(tasks=tasks.split(os.pathsep), **options)
        raise UsageError("no verify-cli grading configured",
                         hint="set VERIFY_SERVE_URL (a verify-cli serve) or VERIFY_TASKS (task folders)")

    def grade(self, items: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """The result of each ``(task_id, completion)``, in order."""
        results: list[dict[str, Any] | None] = [None] * len(items)
        todo = list(range(len(items)))
        for _ in range(self.infra_retries + 1):
            got = self._grade_once([items[i] for i in todo])
            for i, r in zip(todo, got, strict=True):
                results[i] = r
            todo = [i for i in todo if (results[i] or {}).get("status") == "infra_error"]
            if not todo:
                break
        return [r for r in results if r is not None]

    def grade_files(self, task_id: str, files: Mapping[str, str]) -> dict[str, Any]:
        """The result of the candidate ``files`` (path -> text) for ``task_id`` (infra errors
        retried as for :meth:`grade`)."""
        result: dict[str, Any] = {}
        for _ in range(self.infra_retries + 1):
            result = self._grade_files_once(task_id, files)
            if result.get("status") != "infra_error":
                break
        return result

    def _grade_files_once(self, task_id: str, files: Mapping[str, str]) -> dict[str, Any]:
        if self._client is not None:
            options: dict[str, Any] = {}
            if self.deadline_seconds is not None:
                options["deadline_seconds"] = self.deadline_seconds
            out: dict[str, Any] = self._client.grade(task_id, files=dict(files), **options)
            return out
        from verify_cli.grading import GradeRequest, Phase

        request = GradeRequest(task=self.task(task_id), phase=Phase.CANDIDATE,
                               candidate={k: v.encode("utf-8") for k, v in files.items()})
        result: dict[str, Any] = self._executor.grade(request).to_dict(with_run=False)
        return result

    def task(self, task_id: str) -> Any:
        """The Task ``task_id`` (in-process graders only)."""
        task = self._tasks.get(task_id)
        if task is None:
            raise UsageError(f"no task has id {task_id!r} in the task folders given",
                             hint=f"known ids: {', '.join(sorted(self._tasks)[:5])}...")
        return task

    @property
    def task_ids(self) -> list[str]:
        """The ids of the tasks graded in-process (empty through a service)."""
        return sorted(self._tasks)

    def _grade_once(self, items: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        if not items:
            return []
        if self._client is not None:
            options: dict[str, Any] = {}
            if self.deadline_seconds is not None:
                options["deadline_seconds"] = self.deadline_seconds
            out: list[dict[str, Any]] = self._client.grade_batch(
                [{"task_id": t, "completion": c} for t, c in items], **options)
            return out
        return self._grade_in_process(items)

    def _grade_in_process(self, items: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        from verify_cli.grading import GradeRequest, Phase
        from verify_cli.models.prompts import extract_for_task, files_to_candidate

        out: list[dict[str, Any] | None] = [None] * len(items)
        requests = []
        for i, (task_id, completion) in enumerate(items):
            task = self.task(task_id)
            extraction = extract_for_task(task, completion)
            if not extraction.ok:
                out[i] = _parse_error(task_id, extraction.error or "parse error")
                continue
            requests.append(GradeRequest(task=task, phase=Phase.CANDIDATE,
                                         candidate=files_to_candidate(extraction.files), label=str(i)))
        for result in self._executor.grade_many(requests, jobs=self.jobs):
            out[int(result.label)] = result.to_dict(with_run=False)
        return [r for r in out if r is not None]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._executor is not None:
            self._executor.close()

    def __enter__(self) -> CompletionGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_shared: dict[tuple[Any, ...], CompletionGrader] = {}
_shared_lock = threading.Lock()


def shared_grader(**options: Any) -> CompletionGrader:
    """One grader per distinct options in this process (frameworks call the reward per batch)."""
    key = tuple(sorted((k, str(v)) for k, v in options.items()))
    with _shared_lock:
        grader = _shared.get(key)
        if grader is None:
            grader = CompletionGrader(**options) if options.get("url") or options.get("tasks") else \
                CompletionGrader.from_env(**options)
            _shared[key] = grader
        return grader
