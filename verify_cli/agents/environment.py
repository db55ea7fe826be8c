"""A task as an agent's environment: a session over the task's starter and visible tests, the
tools run in it, and the trusted grade of what the agent leaves behind.

What the session holds: the starter files and the visible tests (``tests/``), nothing else; never
the hidden tests, the reference, the harness or a seal key. The agent may do anything inside it.

``run_tests`` and the final grade never trust the session: the editable files are taken out of
it by value (:meth:`Session.snapshot`) and graded by the trusted grader (the task's own runner,
two-process where the task allows), ``run_tests`` against a copy of the task that holds only its
visible tests, the final grade against the whole task. Files outside the editable globs and any
change to the visible tests are ignored by construction: grading takes them from the task.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from verify_cli.agents.tools import Observation, ToolCall, check_call, truncate
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.kinds.registry import kind_of
from verify_cli.sandbox.base import RuntimeLayer
from verify_cli.sandbox.sessions.base import (
    ExecResult,
    ExecVerdict,
    Session,
    SessionDeadError,
    SessionFileError,
    SessionInfraError,
    SessionLimits,
    Workspace,
)
from verify_cli.tasks.model import HIDDEN_TESTS_DIR, SOLUTION_DIR, Task
from verify_cli.tasks.repository import SOLUTION_PATCH

if TYPE_CHECKING:
    from verify_cli.environments import Realised

#: Characters of each failing test's message shown by run_tests.
TEST_MESSAGE_CHARS = 400


class SessionOpener(Protocol):
    """What opens an episode's session: a :class:`~verify_cli.sandbox.base.Sandbox`, or an
    :class:`~verify_cli.executors.base.Executor` (a Ray cluster's: the session on one node)."""

    def open_session(self, workspace: Workspace = None, limits: SessionLimits | None = None, *,
                     env: Mapping[str, str] | None = None, image: str | None = None,
                     labels: Mapping[str, str] | None = None, layer: RuntimeLayer | None = None) -> Session: ...


class GradesOne(Protocol):
    """What grades an episode's files: a :class:`~verify_cli.grading.grader.Grader`, or an
    :class:`~verify_cli.executors.base.Executor`."""

    def grade(self, request: GradeRequest) -> GradeResult: ...


def session_environment(task: Task, grader: GradesOne) -> Realised | None:
    """The built environment an episode of ``task`` runs in (the one its grade runs in: the
    grader's, built if it is not yet), or None where the task declares none. A declaration that
    does not build is SessionInfraError (the task's fault, never the agent's: unscored); a
    grader that builds no environments (a cluster's) cannot open such a session yet."""
    from verify_cli.environments import spec_of
    from verify_cli.errors import EnvironmentBuildError

    if spec_of(task) is None:
        return None
    environments = getattr(grader, "environments", None) or getattr(getattr(grader, "grader", None),
                                                                    "environments", None)
    if environments is None:
        raise SessionInfraError(f"{task.id} declares an environment, and agent sessions in one are opened "
                                "only with a local grader yet (docs/environments.md)")
    try:
        return environments.realise(task)
    except EnvironmentBuildError as e:
        raise SessionInfraError(f"environment-error: environment {e.identity} did not build: {e.cause}") from None


def session_workspace(task: Task) -> dict[str, bytes]:
    """The files an agent starts with: the starter and the visible tests (``tests/...``)."""
    files = {rel: p.read_bytes() for rel, p in task.starter_files().items()}
    files.update((rel, p.read_bytes()) for rel, p in task.visible_test_files().items())
    return files


def session_limits(task: Task, *, command_seconds: float | None = None) -> SessionLimits:
    """A session's limits from the task's: its memory and processes; each command gets the
    task's wall limit (or ``command_seconds``)."""
    lim = task.limits
    return SessionLimits(memory_mb=lim.memory_mb, processes=max(lim.processes, 64),
                         command_seconds=command_seconds or max(lim.wall_seconds, 10.0),
                         output_bytes=max(16 * 1024, min(lim.output_bytes, 256 * 1024)))


class VisibleTests:
    """A copy of a task that holds only its visible tests (what ``run_tests`` grades against);
    made once, removed by :meth:`close`."""

    def __init__(self, task: Task) -> None:
        self._root = Path(tempfile.mkdtemp(prefix=f"verify-visible-{task.id[:40].replace('/', '-')}-"))
        for entry in task.root.iterdir():
            if entry.name in (HIDDEN_TESTS_DIR, SOLUTION_DIR, SOLUTION_PATCH):
                continue
            dest = self._root / entry.name
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, dest, symlinks=True)
            elif entry.is_file():
                shutil.copyfile(entry, dest)
        # Empty (a placeholder), not absent: a test command naming the hidden-tests folder still runs.
        (self._root / HIDDEN_TESTS_DIR).mkdir(exist_ok=True)
        (self._root / HIDDEN_TESTS_DIR / ".keep").touch()
        self.task = replace(task, root=self._root)
        self.count = len(task.visible_test_files())

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)


@dataclass(frozen=True)
class EpisodeOutcome:
    """How an agent's work was judged: ``status`` is ``passed``, ``failed`` (the grade, or a
    session the agent killed) or ``infra_error`` (the machinery failed: never scored)."""

    status: str
    score: float | None
    reason: str = ""
    grade: GradeResult | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"status": self.status, "score": self.score, "reason": self.reason}
        if self.grade is not None:
            d["grade"] = self.grade.to_dict(with_run=False)
        return d


def format_exec(result: ExecResult, limit: int) -> tuple[str, int]:
    """An exec result as the model sees it: how it ended, then stdout and stderr (bounded)."""
    if result.verdict is ExecVerdict.OK or result.verdict is ExecVerdict.NONZERO_EXIT:
        head = f"exit code {result.exit_code}"
    elif result.verdict is ExecVerdict.TIMEOUT:
        head = f"timed out ({result.message or 'the command ran past its time limit'}); its processes were killed"
    elif result.verdict is ExecVerdict.SIGNAL:
        head = f"killed by signal {result.signal}"
    else:
        head = f"{result.verdict.value}: {result.message}".rstrip(": ")
    parts = [head]
    out, err = result.stdout.text, result.stderr.text
    if out:
        parts.append(f"--- stdout ---\n{out}")
    if err:
        parts.append(f"--- stderr ---\n{err}")
    return truncate("\n".join(parts), limit)


class TaskEnvironment:
    """One episode's environment: a live session, the tools over it, and the trusted grade.

    Open with :meth:`open`; thread-safe (one call at a time); :meth:`close` ends the session.
    """

    def __init__(self, task: Task, session: Session, grader: GradesOne, *, observation_chars: int = 4000,
                 command_seconds: float | None = None) -> None:
        self.task = task
        self.session = session
        self.grader = grader
        self.observation_chars = observation_chars
        self.command_seconds = command_seconds
        self.submitted = False
        #: Why the session died because of what the agent ran (None while alive).
        self.dead: str | None = None
        #: The machinery failed under the session (never the agent's fault).
        self.broken: str | None = None
        self._visible: VisibleTests | None = None
        self._lock = threading.Lock()

    @classmethod
    def open(cls, task: Task, sandbox: SessionOpener, grader: GradesOne, *, observation_chars: int = 4000,
             command_seconds: float | None = None, avoid: Collection[str] = ()) -> TaskEnvironment:
        """A fresh session over ``task``'s starter and visible tests (SessionInfraError when the
        backend cannot build one). ``avoid``: nodes an executor should pass over (an episode
        re-queued from one; a sandbox takes none)."""
        more: dict[str, Any] = {"avoid": avoid} if avoid else {}
        image: str | None = task.environment.image or None
        built = session_environment(task, grader)
        if built is not None:
            image = built.image or image
            if built.layer is not None:
                more["layer"] = built.layer
        limits = session_limits(task, command_seconds=command_seconds)
        own = kind_of(task).open_session(task, image, limits)  # a Harbor task's container, at its workdir
        session = own if own is not None else sandbox.open_session(
            session_workspace(task), limits, image=image,
            labels={"verify-cli.task": task.id, "verify-cli.phase": "episode"}, **more)
        return cls(task, session, grader, observation_chars=observation_chars, command_seconds=command_seconds)

    @property
    def ended(self) -> bool:
        return self.submitted or self.dead is not None or self.broken is not None

    # -- the tools ---------------------------------------------------------------------------

    def call(self, call: ToolCall) -> Observation:
        """Run one tool call; a malformed call is an observation saying what was wrong."""
        started = time.monotonic()
        problem = check_call(call)
        if problem is not None:
            return Observation(problem, error=True, seconds=time.monotonic() - started)
        args: Mapping[str, Any] = call.arguments or {}
        with self._lock:
            try:
                text = self._run(call.name, args)
            except SessionDeadError as e:
                self.dead = str(e)
                text = f"the session has died: {e}"
            except SessionInfraError as e:
                self.broken = str(e)
                text = f"the sandbox failed (not your fault): {e}"
            except SessionFileError as e:
                return Observation(f"{call.name}: {e}", error=True, seconds=time.monotonic() - started)
        shown, cut = truncate(text, self.observation_chars)
        return Observation(shown, truncated_chars=cut, seconds=time.monotonic() - started)

    def _run(self, name: str, args: Mapping[str, Any]) -> str:
        if name == "bash":
            result = self.session.exec(str(args["command"]), timeout=self.command_seconds)
            if result.verdict is ExecVerdict.SESSION_DEAD:
                self.dead = result.message or "the session's exec server died"
                return f"the session has died because of what ran in it: {self.dead}"
            if result.verdict is ExecVerdict.INFRA_ERROR:
                self.broken = result.message or "the sandbox failed"
                return f"the sandbox failed (not your fault): {self.broken}"
            return format_exec(result, self.observation_chars)[0]
        if name == "read_file":
            return self.session.read_file(str(args["path"])).decode("utf-8", "replace")
        if name == "write_file":
            content = str(args["content"])
            self.session.write_file(str(args["path"]), content)
            return f"wrote {len(content.encode())} bytes to {args['path']}"
        if name == "run_tests":
            return self.run_tests()
        if name == "submit":
            self.submitted = True
            return "submitted: your editable files will be graded"
        raise AssertionError(f"check_call let through an unknown tool {name!r}")  # pragma: no cover

    def _visible_tests(self) -> VisibleTests:
        if self._visible is None:
            self._visible = VisibleTests(self.task)
        return self._visible

    def run_tests(self) -> str:
        """The visible tests against the session's current editable files, graded by the
        trusted grader: a line per test (failures with their first lines)."""
        visible = self._visible_tests()
        if visible.count == 0:
            return "this task has no visible tests: submit when you are confident"
        files = self.session.snapshot(self.task.editable)
        result = self.grader.grade(GradeRequest(task=visible.task, phase=Phase.CANDIDATE, candidate=files,
                                                label="run_tests"))
        if result.status is GradeStatus.INFRA_ERROR:
            self.broken = "; ".join(result.problems) or "the grader failed"
            return f"the tests could not be run (not your fault): {self.broken}"
        passed = [t for t in result.tests if t.outcome.ok]
        failed = [t for t in result.tests if not t.outcome.ok]
        lines = [f"{len(passed)} passed, {len(failed)} failed"]
        lines += [f"PASSED {t.id}" for t in passed]
        for t in failed:
            message = truncate((t.message or "").strip(), TEST_MESSAGE_CHARS)[0]
            lines.append(f"{t.outcome.value.upper()} {t.id}" + (f"\n  {message}" if message else ""))
        if not result.tests:
            lines += [f"problem: {p}" for p in result.problems[:3]]
        return "\n".join(lines)

    # -- the end -----------------------------------------------------------------------------

    def outcome(self) -> EpisodeOutcome:
        """The trusted grade of the session's editable files (or why there is none)."""
        taken = self.take()
        return taken if isinstance(taken, EpisodeOutcome) else grade_files(self.task, self.grader, taken)

    def take(self) -> dict[str, bytes] | EpisodeOutcome:
        """The session's editable files to grade, or the outcome when there are none to grade
        (the machinery failed, the agent killed its session, the files could not be taken). The
        grade needs no session: :func:`grade_files` may run after :meth:`close`."""
        if self.broken is not None:
            return EpisodeOutcome("infra_error", None, f"the machinery failed: {self.broken}")
        if self.dead is not None:
            return EpisodeOutcome("failed", 0.0, f"the agent's session died: {self.dead}")
        try:
            return self.session.snapshot(self.task.editable)
        except SessionDeadError as e:
            return EpisodeOutcome("failed", 0.0, f"the agent's session died: {e}")
        except SessionFileError as e:
            return EpisodeOutcome("failed", 0.0, f"the editable files could not be taken: {e}")
        except SessionInfraError as e:
            return EpisodeOutcome("infra_error", None, f"the machinery failed: {e}")

    def close(self) -> None:
        self.session.close()
        if self._visible is not None:
            self._visible.close()


def grade_files(task: Task, grader: GradesOne, files: Mapping[str, bytes]) -> EpisodeOutcome:
    """The trusted grade of an episode's editable files (taken by :meth:`TaskEnvironment.take`)."""
    grade = grader.grade(GradeRequest(task=task, phase=Phase.CANDIDATE, candidate=dict(files), label="episode"))
    if grade.status is GradeStatus.INFRA_ERROR:
        return EpisodeOutcome("infra_error", None, "; ".join(grade.problems), grade)
    return EpisodeOutcome("passed" if grade.passed else "failed", grade.score, "", grade)


__all__ = ["EpisodeOutcome", "GradesOne", "SessionOpener", "TaskEnvironment", "VisibleTests", "format_exec",
           "grade_files", "session_limits", "session_workspace"]
