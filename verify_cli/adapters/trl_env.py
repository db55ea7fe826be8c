"""A TRL environment (``GRPOTrainer(environment_factory=...)``, TRL >= 1.x) over ``verify-cli
serve`` sessions (extra ``trl``)::

    from verify_cli.adapters.trl_env import VerifyCliTaskEnvironment

    trainer = GRPOTrainer(model=..., train_dataset=dataset,          # a task_id column
                          environment_factory=VerifyCliTaskEnvironment.factory(url="http://127.0.0.1:8000"))

TRL makes one instance per concurrent rollout, calls :meth:`reset` with the row's columns (the
session is opened over the row's ``task_id``; what it returns is appended to the prompt), offers
the public methods as the model's tools (``bash``, ``read_file``, ``write_file``, ``run_tests``,
``submit``), and calls :meth:`get_reward` once the rollout is done: the trusted grade of the
editable files by the task's full tests (submitting them if the model never called ``submit``).

An infrastructure error (the sandbox or the service failed) is ``None`` from :meth:`get_reward`:
TRL leaves that reward out for the rollout (masked), never a silent 0. A tool call the machinery
failed is reported to the model as such and the rollout's reward is then ``None`` too.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from typing import Any

from verify_cli.agents.tools import truncate
from verify_cli.client import ServiceRequestError, ServiceUnavailableError, VerifyClient
from verify_cli.errors import UsageError


class VerifyCliTaskEnvironment:
    """One rollout's environment: a session on a verify-cli service (see the module)."""

    def __init__(self, url: str | None = None, *, token: str | None = None, task_column: str = "task_id",
                 observation_chars: int = 4000, max_retries: int = 5) -> None:
        url = url or os.environ.get("VERIFY_SERVE_URL")
        if not url:
            raise UsageError("VerifyCliTaskEnvironment needs a verify-cli service", hint="pass url= or set "
                             "VERIFY_SERVE_URL to a running `verify-cli serve`")
        self._client = VerifyClient(url, token=token or os.environ.get("VERIFY_SERVE_TOKEN") or None,
                                    max_retries=max_retries)
        self._task_column = task_column
        self._chars = observation_chars
        self._session: str | None = None
        self._task_id: str | None = None
        self._reward: dict[str, Any] | None = None
        self._broken: str | None = None
        #: Every finished rollout's (task id, reward answer), for reports and tests.
        self.history: list[tuple[str, dict[str, Any]]] = []

    @classmethod
    def factory(cls, url: str | None = None, **options: Any) -> Callable[[], VerifyCliTaskEnvironment]:
        """What ``environment_factory`` takes: a callable making an environment per rollout."""
        return functools.partial(cls, url, **options)

    # -- TRL's environment protocol ---------------------------------------------------------------

    def reset(self, **kwargs: Any) -> str | None:
        """Open a session over the row's task (closing the previous rollout's); the text
        appended to the prompt: the files the work folder holds and which ones are graded."""
        self._end_session()
        task_id = kwargs.get(self._task_column)
        if not task_id:
            raise UsageError(f"the training data set has no {self._task_column!r} column",
                             hint="add the task id of each prompt as a column, or pass task_column=")
        self._task_id = str(task_id)
        self._reward = None
        self._broken = None
        try:
            info = self._client.open_session(self._task_id)
        except (ServiceRequestError, ServiceUnavailableError) as e:
            if isinstance(e, ServiceRequestError) and e.status < 500 and e.status != 429:
                raise  # the data set names a task the service does not serve
            self._broken = str(e)
            return "\n\n(The sandbox could not be opened; this rollout will not be scored.)"
        self._session = str(info["session_id"])
        return (f"\n\nThe work folder ({info['workdir']}) holds: {', '.join(info['files'])}. "
                f"Your answer is the files matching {', '.join(info['editable'])}. Use the tools, then call submit.")

    def get_reward(self) -> float | None:
        """The trusted score of the rollout's editable files; None when the machinery failed."""
        if self._reward is None:
            self._submit()
        reward = self._reward or {"status": "infra_error", "score": None, "reason": self._broken or "no session"}
        self.history.append((self._task_id or "", reward))
        if reward["status"] == "infra_error" or reward.get("score") is None:
            return None
        return float(reward["score"])

    # -- the tools (public methods: TRL shows them to the model) ----------------------------------

    def bash(self, command: str) -> str:
        """Run a shell command (bash) in the task's work folder; files persist between calls.

        Args:
            command: The command line to run.

        Returns:
            The exit code, stdout and stderr.
        """
        def run(sid: str) -> str:
            r = self._client.session_exec(sid, command)
            if r["verdict"] == "infra_error":
                self._broken = r["message"] or "the sandbox failed"
            head = (f"exit code {r['exit_code']}" if r["verdict"] in ("ok", "nonzero_exit")
                    else f"{r['verdict']}: {r['message']}".rstrip(": "))
            return "\n".join([head] + [f"--- {k} ---\n{r[k]}" for k in ("stdout", "stderr") if r[k]])
        return self._tool("bash", run)

    def read_file(self, path: str) -> str:
        """Read a file of the work folder.

        Args:
            path: The file's path, relative to the work folder.

        Returns:
            The file's content.
        """
        return self._tool("read_file", lambda sid: self._client.session_read(sid, path))

    def write_file(self, path: str, content: str) -> str:
        """Write (create or replace) a file of the work folder.

        Args:
            path: The file's path, relative to the work folder.
            content: The whole new content of the file.

        Returns:
            How many bytes were written.
        """
        return self._tool("write_file", lambda sid: f"wrote {self._client.session_write(sid, path, content)['bytes']} "
                          f"bytes to {path}")

    def run_tests(self) -> str:
        """Run the task's visible tests against the current files.

        Returns:
            Each test's outcome, and the first lines of each failure.
        """
        def run(sid: str) -> str:
            t = self._client.session_run_tests(sid)
            lines = [f"{t['passed']} passed, {t['failed']} failed"]
            lines += [f"{x['outcome'].upper()} {x['id']}" + (f"\n  {x['message'][:400]}" if x.get("message") else "")
                      for x in t["tests"]]
            return "\n".join(lines)
        return self._tool("run_tests", run)

    def submit(self) -> str:
        """Submit the current files as the answer; they are graded by the task's full tests.

        Returns:
            That the answer was submitted.
        """
        if self._reward is not None:
            return "already submitted"
        self._submit()
        return "submitted"

    # -- internals --------------------------------------------------------------------------------

    def _tool(self, name: str, fn: Callable[[str], str]) -> str:
        if self._reward is not None:
            return "the episode has ended (submitted)"
        if self._session is None:
            return f"the sandbox is not available (not your fault): {self._broken}"
        try:
            text = fn(self._session)
        except ServiceRequestError as e:
            if e.status >= 500:
                self._broken = e.message
                return f"the sandbox failed (not your fault): {e.message}"
            return f"{name}: {e.message}"
        except ServiceUnavailableError as e:
            self._broken = str(e)
            return f"the sandbox service is unavailable (not your fault): {e}"
        return truncate(text, self._chars)[0]

    def _submit(self) -> None:
        if self._session is None or self._broken is not None:
            self._end_session()
            return
        try:
            self._reward = self._client.session_submit(self._session)
        except (ServiceRequestError, ServiceUnavailableError) as e:
            self._broken = str(e)
            self._end_session()
        else:
            self._session = None

    def _end_session(self) -> None:
        if self._session is not None:
            with contextlib.suppress(ServiceRequestError, ServiceUnavailableError):  # else reclaimed when idle
                self._client.close_session(self._session)
            self._session = None


__all__ = ["VerifyCliTaskEnvironment"]
