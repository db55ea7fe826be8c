"""The interface every task kind provides, with do-nothing defaults.

A *kind* is one way of grading a task: the test runner it uses, or verify-cli's built-in runner
(``calls``, ``stdio``). Everything that differs from one kind to another lives on its
:class:`Kind`, so that the grader, the warm runner, two-process grading and audit ask the kind
and never name one:

- the run's environment variables (:meth:`Kind.run_environment`, :meth:`Kind.request_environment`);
- the command actually run (:meth:`Kind.test_command`: node adds its seal reporter);
- how the results are sealed and checked (:meth:`Kind.needs_seal_key`, :meth:`Kind.check_seal`);
- which JUnit outcomes count (:meth:`Kind.outcomes`);
- whether and how it runs warm (:meth:`Kind.warm_invocation`);
- how two-process grading lays it out (:attr:`Kind.two_process`, :meth:`Kind.two_process_runtime`);
- the harness files its runs use (:attr:`Kind.harness_files`);
- what audit may do with it (:meth:`Kind.traces_coverage`, :meth:`Kind.stops_early`,
  :meth:`Kind.traceable`, :meth:`Kind.trace_needs_two_process`).

Why ``Kind`` and not ``TaskKind`` or ``Runner``: :class:`verify_cli.tasks.model.TaskKind` already
names the built-in values of task.toml's ``kind`` field in the task layer (which must not import
grading), and "runner" already means the built-in runner harness modules
(``verify_calls``/``verify_stdio``) and :class:`~verify_cli.grading.warm.WarmRunner`.

A kind is a stateless object registered once by name (:data:`verify_cli.kinds.registry.KINDS`);
docs/task-kinds.md says how to add one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from verify_cli.sandbox.base import RunResult, RunSpec, WarmHost, WarmInvocation
from verify_cli.tasks.model import Task

#: A command word that runs Python (``python``, ``python3``, ``python3.11``, by any path).
_PYTHON_WORD = re.compile(r"(?:^|[\s;&|(`'\"/])python(?:3(?:\.\d+)?)?(?=[\s;&|)`'\"]|$)")

if TYPE_CHECKING:  # grading imports this module: its own modules are imported where used
    from verify_cli.grading.junit import TestOutcome
    from verify_cli.grading.workspace import Phase
    from verify_cli.sandbox.base import RuntimeLayer, Sandbox
    from verify_cli.sandbox.sessions.base import Session, SessionLimits


@dataclass(frozen=True)
class OwnRun:
    """A phase run by a kind that runs its phases itself (:meth:`Kind.run_phase`): the evidence,
    the candidate's files it did not take, and the isolation it ran under with its notes."""

    run: RunResult
    ignored: tuple[str, ...] = ()
    isolation: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TwoProcessRuntime:
    """How one kind grades two-process (docs/wire-protocol.md).

    ``server_command`` starts the candidate server in the candidate's sandbox (it may use
    ``$VERIFY_CANDIDATE_HARNESS``); ``trusted_env(task, work_folder, env)`` returns the
    variables the test command needs on top of ``env`` (the run's) to load the stand-in plugin.
    """

    kind: str
    server_command: tuple[str, ...]
    trusted_env: Callable[[Task, Path, dict[str, str]], dict[str, str]]
    #: Suffixes of the candidate's code files, which the tests' side sees empty.
    code_suffixes: tuple[str, ...] = ()


class HarnessOptions(Protocol):
    """The harness options of a grading request (:class:`~verify_cli.grading.grader.GradeRequest`)."""

    @property
    def select_tests(self) -> frozenset[str] | None: ...
    @property
    def fail_fast(self) -> bool: ...
    @property
    def test_seconds(self) -> float | None: ...
    @property
    def coverage_files(self) -> tuple[str, ...]: ...
    @property
    def coverage_lines(self) -> tuple[tuple[str, tuple[int, ...]], ...]: ...


class Kind:
    """One task kind. Subclass it, set :attr:`name`, override what differs, and register an
    instance (:func:`~verify_cli.kinds.registry.register_kind`)."""

    #: The name task.toml's ``kind`` gives.
    name: ClassVar[str] = ""
    #: One line for humans (the docs, the contract suite).
    summary: ClassVar[str] = ""
    #: The old ``test.framework`` value (under ``kind = "tests"``) that meant this kind, if any.
    legacy_framework: ClassVar[str | None] = None
    #: Files of the run-time harness folder this kind's runs use, by the bare names its commands
    #: give them (``verify_calls.py``; the sources live in ``verify_cli/harness/<role>/``, and the
    #: harness ships them all; a test checks each one exists).
    harness_files: ClassVar[tuple[str, ...]] = ()
    #: Whether its tasks run only in an image (docker): bwrap cannot realise them yet.
    needs_image: ClassVar[bool] = False

    def __init__(self) -> None:
        #: How two-process grading lays the kind out; None: its tasks run in-process.
        self.two_process: TwoProcessRuntime | None = None

    def __repr__(self) -> str:
        return f"<task kind {self.name!r}>"

    # -- the run ------------------------------------------------------------------------------

    def run_environment(self, task: Task) -> dict[str, str]:
        """The kind's variables for every run of ``task`` (on top of the hash seed and shuffle)."""
        return {}

    def needs_seal_key(self, task: Task) -> bool:
        """Whether runs of ``task`` get a per-run seal key (:meth:`check_seal` then checks it)."""
        return False

    def request_environment(self, task: Task, options: HarnessOptions,
                            seal_key: str | None) -> dict[str, str]:
        """The variables one request adds: the seal key, and the harness options the kind
        honours (the others are ignored)."""
        return {}

    def test_command(self, task: Task) -> str:
        """The shell command the run executes."""
        return task.test.command

    def needs_python(self, task: Task) -> bool:
        """Whether runs of ``task`` need a Python interpreter in their environment (the command
        they run names one): graded in an image without one, such a task is an environment
        error, never a score."""
        return bool(_PYTHON_WORD.search(self.test_command(task)))

    def trusted_files(self, task: Task) -> dict[str, bytes]:
        """Files (work-folder path to content) the grader writes over every layout of ``task``,
        after the candidate's: the trusted side's own configuration of the test runner. A
        candidate file of that path is never taken; in a two-process run the candidate sees them
        read-only. Default: none."""
        return {}

    # -- the evidence -------------------------------------------------------------------------

    def outcomes(self, task: Task, tests: list[TestOutcome]) -> list[TestOutcome]:
        """The JUnit outcomes as they count. Default: a passing "test" named after one of the
        task's test files (``node --test`` reports a file that ran none of its tests so, and a
        command may run node) proves nothing and fails."""
        from verify_cli.grading.junit import Outcome, TestOutcome

        files = list(task.test_files())
        out: list[TestOutcome] = []
        for t in tests:
            leaf = t.id.rsplit("::", 1)[-1]
            if t.outcome.ok and any(leaf == f or leaf.endswith("/" + f) for f in files):
                t = TestOutcome(t.id, Outcome.FAILED, t.duration,
                                "the test file ran none of its tests (did it exit early?)")
            out.append(t)
        return out

    def check_seal(self, task: Task, run: RunResult, key: str, tests: list[TestOutcome],
                   problems: list[str]) -> bool:
        """Hold the outcomes against the kind's signed record of the run; False when they cannot
        be trusted. May add to ``tests`` (tests the record saw but the results lack) and
        ``problems``. Called only with a key (:meth:`needs_seal_key`). Default: trusted."""
        return True

    def score(self, task: Task, tests: list[TestOutcome], run: RunResult) -> float | None:
        """The score of trusted evidence where the kind scores it itself (Harbor's rewards: the
        mean of the reward keys); None: the task's scoring policy over ``tests``."""
        return None

    def findings(self, task: Task) -> list[tuple[str, str, bool]]:
        """What the kind sees of ``task`` without running it, as (check name, reason, defect):
        check-tasks reports a defect as a failed check, the rest as warnings."""
        return []

    # -- phases the kind runs itself ------------------------------------------------------------

    def runs_itself(self, task: Task) -> bool:
        """Whether the kind runs ``task``'s phases itself (:meth:`run_phase`) rather than the
        task's test command in one sandbox run (Harbor: an agent container, then the verifier's)."""
        return False

    def run_phase(self, task: Task, phase: Phase, candidate: Mapping[str, bytes] | None, *, sandbox: Sandbox,
                  image: str | None, layer: RuntimeLayer | None = None) -> OwnRun:
        """Run one phase of ``task`` in the built environment: ``image`` (a backend that runs in
        images), or ``layer`` (its exported root, on a backend that runs over one) (only where
        :meth:`runs_itself`)."""
        raise NotImplementedError(f"{self.name} runs its tasks' test command")

    def open_session(self, task: Task, image: str | None, limits: SessionLimits, *,
                     layer: RuntimeLayer | None = None) -> Session | None:
        """An agent's session in ``task``'s environment where the kind opens its own (Harbor: a
        container of the task's image at its workdir); None: the backend's session."""
        return None

    # -- warm runs ----------------------------------------------------------------------------

    def warm_invocation(self, task: Task, host: WarmHost, spec: RunSpec) -> WarmInvocation | None:
        """``task``'s command as one job ``host`` can run warm, or None (it runs cold)."""
        return None

    # -- two-process grading ------------------------------------------------------------------

    def two_process_runtime(self, task: Task) -> TwoProcessRuntime | None:
        """How ``task`` grades two-process, or None (in-process)."""
        return self.two_process

    # -- audit --------------------------------------------------------------------------------

    def traces_coverage(self, task: Task) -> bool:
        """Whether a run can record per-test line coverage of the candidate's files."""
        return False

    def stops_early(self, task: Task) -> bool:
        """Whether the harness can stop at the first failing test (``fail_fast``)."""
        return False

    def traceable(self, task: Task) -> bool:
        """Whether a run can record every message to and from the candidate (observed equivalence)."""
        return False

    def trace_needs_two_process(self, task: Task) -> bool:
        """Whether a trace is trusted only from a two-process run (else the candidate shared the
        process that wrote it). The built-in runners trace from their own process."""
        return True


__all__ = ["HarnessOptions", "Kind", "OwnRun", "TwoProcessRuntime"]
