"""The Task: a validated, immutable view of one task folder."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from verify_cli.tasks.paths import list_files


class ScoringPolicy(StrEnum):
    ALL_OR_NOTHING = "all-or-nothing"
    FRACTION = "fraction"
    WEIGHTED = "weighted"


class Isolation(StrEnum):
    """How the tests meet the candidate's code (task.toml ``isolation``)."""

    TWO_PROCESS = "two-process"  # tests in a trusted process; candidate in its own sandbox
    IN_PROCESS = "in-process"  # candidate modules imported into the test process: trusts it


@dataclass(frozen=True)
class Environment:
    image: str
    runtime: str
    preload: tuple[str, ...] = ()


@dataclass(frozen=True)
class TestSpec:
    __test__ = False  # not a pytest test class

    command: str
    results: str = "*.xml"


@dataclass(frozen=True)
class Scoring:
    policy: ScoringPolicy
    weights: Mapping[str, float] = field(default_factory=dict)
    default_weight: float = 1.0


@dataclass(frozen=True)
class TaskLimits:
    wall_seconds: float
    memory_mb: int = 1024
    processes: int = 128
    output_bytes: int = 1048576


class TaskKind(StrEnum):
    """The built-in values of task.toml's ``kind``: how a task is graded (its own test command
    under a test runner, or one of verify-cli's built-in runners). Each names a module of
    :mod:`verify_cli.kinds`, which says what the kind does; plugins add names of their own, so
    :attr:`Task.kind` is a plain string (one of these members for a built-in kind)."""

    PYTEST = "pytest"  # the task's pytest command
    NODE = "node"  # the task's node --test command
    COMMAND = "command"  # any other test command that writes JUnit XML
    STDIO = "stdio"  # input/output pairs fed to a program
    CALLS = "calls"  # calls of a named function, compared by value


#: The old form: ``kind = "tests"`` (or no kind) with ``[test] framework`` naming the runner.
#: Still read, with a deprecation note; this maps the old framework to the kind it meant.
LEGACY_TESTS_KIND = "tests"
LEGACY_FRAMEWORKS: Mapping[str, TaskKind] = {
    "pytest": TaskKind.PYTEST, "node": TaskKind.NODE, "other": TaskKind.COMMAND}


@dataclass(frozen=True)
class StdioSpec:
    """The ``[stdio]`` table: how the stdin/stdout runner runs and judges the program."""

    program: str
    compare: str = "lines"
    tolerance: float = 1e-06
    checker: str = ""
    case_seconds: float = 5.0


@dataclass(frozen=True)
class CallsSpec:
    """The ``[calls]`` table: which function the call runner calls and how its tests are written."""

    entry_point: str
    module: str
    style: str = "check"
    call_seconds: float = 5.0


#: The test command of a task graded by a built-in runner (a harness module on the sandbox's
#: PYTHONPATH); task.toml names it so that every tool that reads test.command still works.
RUNNER_COMMANDS: Mapping[TaskKind, str] = {
    TaskKind.STDIO: 'python -m verify_stdio',
    TaskKind.CALLS: 'python -m verify_calls',
}
RUNNER_RESULTS = "junit.xml"

# Folder names inside a task folder.
TASK_FILE = "task.toml"
PROMPT_FILE = "prompt.md"
STARTER_DIR = "starter"
SOLUTION_DIR = "solution"
TESTS_DIR = "tests"
HIDDEN_TESTS_DIR = "hidden_tests"


@dataclass(frozen=True)
class Task:
    """One task. Fields mirror ``task_schemas/task.schema.json`` (a test keeps them in step)."""

    root: Path
    schema_version: int
    id: str
    domain: str
    language: str
    environment: Environment
    test: TestSpec
    scoring: Scoring
    limits: TaskLimits
    editable: tuple[str, ...]
    title: str = ""
    tags: tuple[str, ...] = ()
    isolation: Isolation = Isolation.TWO_PROCESS
    #: The ``[difficulty]`` table written by ``verify-cli difficulty --write-back``, if any.
    difficulty: Mapping[str, object] | None = None
    #: The task kind's registered name (:mod:`verify_cli.kinds`): a :class:`TaskKind` member
    #: for the built-in kinds.
    kind: str = TaskKind.COMMAND
    stdio: StdioSpec | None = None
    calls: CallsSpec | None = None
    #: Notes on old forms this task.toml still uses (shown once per task set by the CLI).
    deprecations: tuple[str, ...] = ()

    @property
    def task_file(self) -> Path:
        return self.root / TASK_FILE

    @property
    def prompt(self) -> str:
        p = self.root / PROMPT_FILE
        return p.read_text(encoding="utf-8") if p.is_file() else ""

    def starter_files(self) -> dict[str, Path]:
        return list_files(self.root / STARTER_DIR)

    def solution_files(self) -> dict[str, Path]:
        return list_files(self.root / SOLUTION_DIR)

    def test_files(self) -> dict[str, Path]:
        """Visible and hidden tests, keyed by their path in the work folder (``tests/...``)."""
        out: dict[str, Path] = {}
        for folder in (TESTS_DIR, HIDDEN_TESTS_DIR):
            for rel, p in list_files(self.root / folder).items():
                out[f"{folder}/{rel}"] = p
        return out

    def content_hash(self) -> str:
        """SHA-256 over every file of the task folder (paths and bytes)."""
        h = hashlib.sha256()
        for rel, p in list_files(self.root).items():
            h.update(rel.encode())
            h.update(b"\0")
            h.update(p.read_bytes())
            h.update(b"\0")
        return h.hexdigest()
