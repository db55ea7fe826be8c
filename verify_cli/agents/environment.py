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

import re
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from verify_cli.agents.tools import Observation, ToolCall, check_call, clean_text, truncate
from verify_cli.grading.failure_text import is_collection_failure
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase, candidate_path_refusal
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
    Snapshot,
    Workspace,
)
from verify_cli.tasks.file_states import REMOVED_FILE
from verify_cli.tasks.model import HIDDEN_TESTS_DIR, SOLUTION_DIR, Task
from verify_cli.tasks.paths import matches_any
from verify_cli.tasks.repository import SOLUTION_PATCH

if TYPE_CHECKING:
    from verify_cli.environments import Realised

#: Editable files an agent may add to the starter's before its files can no longer be graded.
MAX_NEW_FILES = 500
#: The longest command line bash runs (a longer one is refused with an observation).
MAX_COMMAND_BYTES = 100_000
#: Characters of each failing test's message shown by run_tests.
TEST_MESSAGE_CHARS = 400


class _PastWall(Exception):
    """A tool call reached the episode's wall-clock limit."""


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
        if self.count == 0:
            self.task, self.count = project_tests(self.task)

    def close(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)


def project_tests(task: Task) -> tuple[Task, int]:
    """A repository task laid out as its project (``test_layout = "repository"``) whose tests are
    all hidden (an imported SWE-bench row): its PASS_TO_PASS tests, run from the project's own
    test files at the base (the starter's copies: never the hidden FAIL_TO_PASS versions), so an
    agent can run the project's tests. Other tasks are returned as they are, with no test."""
    repo = task.repository
    if repo is None or repo.test_layout != "repository" or not task.test.pass_to_pass or str(task.kind) != "pytest":
        return task, 0
    starter = task.starter_files()
    ids = [tid for tid in task.test.pass_to_pass if tid.split("::", 1)[0] in starter]
    files = sorted({tid.split("::", 1)[0] for tid in ids})
    if not files:
        return task, 0
    command = ('python -m pytest -p no:cacheprovider -rA --junitxml="$VERIFY_RESULTS_DIR/junit.xml" '
               + " ".join(shlex.quote(f) for f in files))
    return replace(task, test=replace(task.test, command=command, fail_to_pass=(), pass_to_pass=tuple(ids))), len(ids)


@dataclass(frozen=True)
class EpisodeOutcome:
    """How an agent's work was judged: ``status`` is ``passed``, ``failed`` (the grade, or a
    session the agent killed) or ``infra_error`` (the machinery failed: never scored)."""

    status: str
    score: float | None
    reason: str = ""
    grade: GradeResult | None = None

    def to_dict(self, *, trainable: bool = False) -> dict[str, Any]:
        """The outcome as plain data. ``trainable``: for a record that could be trained on (an
        episode in samples.parquet): each test's id and outcome only, no test message and no
        problem text of the grade, which may quote the hidden tests' source."""
        d: dict[str, Any] = {"status": self.status, "score": self.score, "reason": self.reason}
        if self.grade is not None:
            if trainable:
                g = self.grade
                d["grade"] = {"status": g.status.value, "score": g.score, "passed": g.passed,
                              "tests": [{"id": t.id, "outcome": t.outcome.value} for t in g.tests]}
            else:
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
        #: The most editable files a snapshot may hold: the starter's and MAX_NEW_FILES more.
        self.max_files = sum(matches_any(task.editable, rel) for rel in task.starter_files()) + MAX_NEW_FILES
        #: A call was stopped at the episode's wall-clock limit.
        self.past_wall = False
        #: A command's own wall limit (the session's default for its commands).
        self.command_limit = command_seconds or session_limits(task).command_seconds
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
        # a Harbor task's container, at its workdir
        over = {"layer": built.layer} if built is not None and built.layer is not None else {}
        own = kind_of(task).open_session(task, image, limits, **over)
        session = own if own is not None else sandbox.open_session(
            session_workspace(task), limits, image=image,
            labels={"verify-cli.task": task.id, "verify-cli.phase": "episode"}, **more)
        return cls(task, session, grader, observation_chars=observation_chars, command_seconds=command_seconds)

    @property
    def ended(self) -> bool:
        return self.submitted or self.dead is not None or self.broken is not None

    # -- the tools ---------------------------------------------------------------------------

    def call(self, call: ToolCall, *, seconds_left: float | None = None) -> Observation:
        """Run one tool call; a malformed call is an observation saying what was wrong.
        ``seconds_left``: the episode's wall clock left; no call runs past it (a command is
        stopped at it, another call is abandoned at it) and :attr:`past_wall` says it was hit."""
        started = time.monotonic()
        problem = check_call(call)
        if problem is not None:
            return Observation(problem, error=True, seconds=time.monotonic() - started)
        args: Mapping[str, Any] = call.arguments or {}
        with self._lock:
            try:
                text = self._bounded(call.name, args, seconds_left)
            except SessionDeadError as e:
                self.dead = str(e)
                text = f"the session has died: {e}"
            except SessionInfraError as e:
                self.broken = str(e)
                text = f"the sandbox failed (not your fault): {e}"
            except SessionFileError as e:
                return Observation(clean_text(f"{call.name}: {e}"), error=True, seconds=time.monotonic() - started)
            except _PastWall:
                self.past_wall = True
                text = f"{call.name} was stopped: the episode's wall-clock limit was reached"
        shown, cut = truncate(clean_text(text), self.observation_chars)
        return Observation(shown, truncated_chars=cut, seconds=time.monotonic() - started)

    def _bounded(self, name: str, args: Mapping[str, Any], seconds_left: float | None) -> str:
        """:meth:`_run` within ``seconds_left`` (None: unbounded). A command gets the shorter of
        its own limit and what is left (the session stops it, and kills what it started); any
        other call runs in a thread that is abandoned at the limit."""
        if seconds_left is None:
            return self._run(name, args)
        if seconds_left <= 0:
            raise _PastWall
        if name == "bash":
            return self._run(name, args, timeout=min(self.command_limit, seconds_left))
        done = threading.Event()
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["text"] = self._run(name, args)
            except BaseException as e:  # handed to the caller
                box["error"] = e
            finally:
                done.set()

        threading.Thread(target=run, daemon=True, name=f"tool-{name}").start()
        if not done.wait(seconds_left):
            raise _PastWall
        if "error" in box:
            raise box["error"]
        return str(box["text"])

    def _run(self, name: str, args: Mapping[str, Any], *, timeout: float | None = None) -> str:
        if name == "bash":
            size = len(str(args["command"]).encode("utf-8", "surrogatepass"))
            if size > MAX_COMMAND_BYTES:  # past what an exec request or one argument can carry
                return (f"not run: the command is {size} bytes, over {MAX_COMMAND_BYTES}; write a script "
                        "with write_file and run it")
            result = self.session.exec(str(args["command"]), timeout=timeout or self.command_seconds)
            if result.verdict is ExecVerdict.SESSION_DEAD:
                self.dead = result.message or "the session's exec server died"
                return f"the session has died because of what ran in it: {self.dead}"
            if result.verdict is ExecVerdict.INFRA_ERROR:
                self.broken = result.message or "the sandbox failed"
                return f"the sandbox failed (not your fault): {self.broken}"
            return format_exec(result, self.observation_chars)[0]
        if name in ("read_file", "write_file") and len(str(args["path"]).encode("utf-8", "surrogatepass")) > 4096:
            raise SessionFileError("the path is longer than 4096 bytes", path=str(args["path"])[:200])
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
        files = self.editable_files()
        result = self.grader.grade(GradeRequest(task=visible.task, phase=Phase.CANDIDATE, candidate=dict(files),
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
        if not result.tests or any(is_collection_failure(t.message) for t in failed):
            why = candidate_error(result.run.stdout.text + "\n" + result.run.stderr.text, files)
            if why:
                lines.append(f"why the tests could not load your code:\n{why}")
        note = skipped_note(files)
        if note:
            lines.append(note)
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
            return self.editable_files()
        except SessionDeadError as e:
            return EpisodeOutcome("failed", 0.0, f"the agent's session died: {e}")
        except SessionFileError as e:
            return EpisodeOutcome("failed", 0.0, f"the editable files could not be taken: {e}")
        except SessionInfraError as e:
            return EpisodeOutcome("infra_error", None, f"the machinery failed: {e}")

    def editable_files(self) -> dict[str, bytes]:
        """The session's editable files, by value (a :class:`Snapshot`), with
        :data:`~verify_cli.tasks.file_states.REMOVED_FILE` for each editable starter file the
        agent removed. SessionFileError when
        they are more than :attr:`max_files`: a grader lays each out (one mount each, on some
        backends), and how many files an agent writes must never decide whether its episode can
        be graded."""
        files = self.session.snapshot(self.task.editable)
        if len(files) > self.max_files:
            raise SessionFileError(f"the editable globs match {len(files)} files, more than the {self.max_files} "
                                   f"a grade takes (the starter's and {MAX_NEW_FILES} more): nothing was graded",
                                   path="")
        if not kind_of(self.task).runs_itself(self.task):  # (a kind that runs itself takes files only)
            # A starter file the agent removed (rm, git mv, or replaced by a link, which is never
            # taken) stays removed in the grade, as a candidate diff's deletion does.
            tests = self.task.test_files()
            for rel in self.task.starter_files():
                if rel not in files and not candidate_path_refusal(self.task, rel, test_paths=tests):
                    files[rel] = REMOVED_FILE
        return files

    def close(self) -> None:
        self.session.close()
        if self._visible is not None:
            self._visible.close()


_EXCEPTION_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::.*)?$")
_FRAME_LINE = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)')
#: Lines of a candidate's error shown by run_tests.
ERROR_LINES = 8


def candidate_error(output: str, files: Collection[str]) -> str:
    """Why the candidate's code did not load, from a run of the visible tests: the last exception
    in ``output`` and, where a frame of it is in one of ``files`` (the candidate's), that frame
    and its source line, paths shown relative to the work folder; "" where there is none."""
    lines = [line[4:] if line.startswith("E   ") else line for line in output.splitlines()]
    end = next((i for i in range(len(lines) - 1, -1, -1) if _EXCEPTION_LINE.match(lines[i])), None)
    if end is None:
        return ""
    start = end
    for i in range(end - 1, max(-1, end - 60), -1):
        frame = _FRAME_LINE.match(lines[i])
        if frame is None:
            continue
        path = frame.group("path")
        rel = next((f for f in files if path == f or path.endswith("/" + f)), None)
        if rel is not None:
            lines[i] = lines[i].replace(path, rel, 1)
            start = i
            break
    block = lines[start:end + 1]
    if len(block) > ERROR_LINES:
        block = [*block[:ERROR_LINES - 1], lines[end]]
    return "\n".join(line.rstrip() for line in block)


def skipped_note(files: Mapping[str, bytes]) -> str:
    """What a snapshot left out of the grade (a :class:`Snapshot`'s note; "" for a plain dict)."""
    return files.note() if isinstance(files, Snapshot) else ""


def grade_files(task: Task, grader: GradesOne, files: Mapping[str, bytes]) -> EpisodeOutcome:
    """The trusted grade of an episode's editable files (taken by :meth:`TaskEnvironment.take`);
    the outcome's reason names what the snapshot left out."""
    grade = grader.grade(GradeRequest(task=task, phase=Phase.CANDIDATE, candidate=dict(files), label="episode"))
    if grade.status is GradeStatus.INFRA_ERROR:
        return EpisodeOutcome("infra_error", None, "; ".join(grade.problems), grade)
    return EpisodeOutcome("passed" if grade.passed else "failed", grade.score, skipped_note(files), grade)


__all__ = ["EpisodeOutcome", "GradesOne", "SessionOpener", "TaskEnvironment", "VisibleTests", "candidate_error",
           "format_exec", "grade_files", "session_limits", "session_workspace", "skipped_note"]
