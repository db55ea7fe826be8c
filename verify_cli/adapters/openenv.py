"""verify-cli tasks as an OpenEnv environment (extra ``openenv``): one episode per task, the
editable files as the workspace, tools as actions, the reward from trusted grading::

    from verify_cli.adapters.openenv import create_openenv_app, VerifyCliEnvClient, TaskAction

    app = create_openenv_app(tasks="sample_tasks", sandbox="bwrap")      # serve it with uvicorn
    with VerifyCliEnvClient(base_url="http://127.0.0.1:8001").sync() as env:
        obs = env.reset(task_id="coding/roman-numerals").observation    # prompt, files
        env.step(TaskAction(tool="write_file", path="roman.py", content=source))
        env.step(TaskAction(tool="run_tests"))          # the visible tests' outcomes, no reward
        result = env.step(TaskAction(tool="submit"))    # reward: the task's score; done

Actions: ``list_files``, ``read_file`` (path), ``write_file`` (path, content; editable paths
only), ``run_tests`` (grades the workspace, shows only the visible tests' outcomes), ``submit``
(grades it: reward = score, ``done``). The workspace lives in the environment, not in a
sandbox: running arbitrary commands (``exec``) needs the session API and is not offered.

An infrastructure error at ``submit`` (after ``infra_retries``) ends the episode with reward
``None`` and ``status == "infra_error"``: OpenEnv has no third state, so the trainer
must mask or retry such an episode; it is never a reward of 0.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any, Literal

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from verify_cli.adapters.grading import CompletionGrader
from verify_cli.models.prompts import user_message
from verify_cli.tasks.model import TESTS_DIR
from verify_cli.tasks.paths import matches_any, unsafe_relative_path


class TaskAction(Action):
    tool: Literal["list_files", "read_file", "write_file", "run_tests", "submit"]
    path: str | None = Field(None, description="read_file, write_file: a work-folder path")
    content: str | None = Field(None, description="write_file: the file's new content")


class TaskObservation(Observation):
    task_id: str = ""
    prompt: str = ""
    files: list[str] = Field(default_factory=list, description="The workspace's files")
    output: str = Field("", description="What the tool answered (a file's text, an error)")
    tests: list[dict[str, Any]] = Field(default_factory=list, description="run_tests: visible outcomes")
    status: str = Field("", description="run_tests, submit: graded, infra_error or parse_error")
    error: str = Field("", description="Why the action was refused (a bad or read-only path, ...)")


class VerifyCliEnvironment(Environment[TaskAction, TaskObservation, State]):
    """One episode per task: reset(task_id=...) (or the next task in turn), tools, submit."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, grader: CompletionGrader, order: itertools.cycle[str] | None = None) -> None:
        super().__init__()
        self.grader = grader
        self._order = order or itertools.cycle(grader.task_ids)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._task: Any = None
        self._files: dict[str, str] = {}
        self._done = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              **kwargs: Any) -> TaskObservation:
        self._task = self.grader.task(task_id or next(self._order))
        self._files = {}
        for rel, p in self._task.starter_files().items():
            if matches_any(self._task.editable, rel):
                try:
                    self._files[rel] = p.read_text(encoding="utf-8")
                except UnicodeDecodeError:
                    continue
        self._done = False
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0, task_id=self._task.id)
        return self._observe(prompt=user_message(self._task))

    def _observe(self, **fields: Any) -> TaskObservation:
        return TaskObservation(task_id=self._task.id if self._task else "", files=sorted(self._files), **fields)

    def step(self, action: TaskAction, timeout_s: float | None = None, **kwargs: Any) -> TaskObservation:
        if self._task is None:
            return TaskObservation(output="call reset first", error="no episode")
        if self._done:
            return self._observe(done=True, output="the episode is over: reset for the next one")
        self._state.step_count += 1
        if action.tool == "list_files":
            return self._observe(output="\n".join(sorted(self._files)))
        if action.tool in ("read_file", "write_file"):
            path = (action.path or "").replace("\\", "/")
            why = unsafe_relative_path(path)
            if why:
                return self._observe(output=f"path {path!r} {why}", error="bad path")
            if action.tool == "read_file":
                if path in self._files:
                    return self._observe(output=self._files[path])
                visible = self._task.root / path
                if path.startswith(TESTS_DIR + "/") and visible.is_file():
                    return self._observe(output=visible.read_text(encoding="utf-8", errors="replace"))
                return self._observe(output=f"no file {path!r}", error="no such file")
            if not matches_any(self._task.editable, path):
                return self._observe(output=f"{path!r} is not editable: {', '.join(self._task.editable)}",
                                     error="not editable")
            self._files[path] = action.content or ""
            return self._observe(output=f"wrote {path}")
        result = self.grader.grade_files(self._task.id, self._files)
        if action.tool == "run_tests":
            visible = [t for t in result.get("tests", []) if str(t.get("id", "")).startswith(TESTS_DIR + ".")
                       or str(t.get("id", "")).startswith(TESTS_DIR + "/")]
            return self._observe(tests=visible, status=result["status"],
                                 output=f"{sum(t['outcome'] == 'passed' for t in visible)}/{len(visible)} "
                                        "visible tests passed")
        self._done = True
        reward = None if result["status"] == "infra_error" else float(result["score"] or 0.0)
        return self._observe(done=True, reward=reward, status=result["status"],
                             output="; ".join(result.get("problems") or []))

    @property
    def state(self) -> State:
        return self._state


def create_openenv_app(*, tasks: str | Path | list[str | Path], sandbox: str = "auto", jobs: int = 2,
                       max_concurrent_envs: int = 16) -> Any:
    """The OpenEnv FastAPI app (HTTP and WebSocket) over the task folders ``tasks``."""
    grader = CompletionGrader(tasks=tasks, sandbox=sandbox, jobs=jobs)
    order = itertools.cycle(grader.task_ids)
    return create_app(lambda: VerifyCliEnvironment(grader, order), TaskAction, TaskObservation,
                      env_name="verify_cli", max_concurrent_envs=max_concurrent_envs)


class VerifyCliEnvClient(EnvClient[TaskAction, TaskObservation, State]):
    """OpenEnv's client for :class:`VerifyCliEnvironment`."""

    def _step_payload(self, action: TaskAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TaskObservation]:
        obs = dict(payload.get("observation", {}))
        obs.update(done=payload.get("done", False), reward=payload.get("reward"))
        return StepResult(observation=TaskObservation(**obs), reward=payload.get("reward"),
                          done=payload.get("done", False))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)
