"""The Task: a validated, immutable view of one task folder."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from verify_cli.formats.harbor.spec import INSTRUCTION_FILE, HarborSpec
from verify_cli.tasks.paths import list_files
from verify_cli.tasks.repository import (
    SOLUTION_PATCH,
    RepositorySpec,
    applied_solution,
    repository_files,
    solution_patch_removals,
    unpacked_starter,
)


class ScoringPolicy(StrEnum):
    ALL_OR_NOTHING = "all-or-nothing"
    FRACTION = "fraction"
    WEIGHTED = "weighted"
    #: Repository tasks: every FAIL_TO_PASS test passes and no PASS_TO_PASS test breaks (1), else 0.
    SWEBENCH = "swebench"
    #: Repository tasks: the fraction of FAIL_TO_PASS tests that pass, 0 if a PASS_TO_PASS test breaks.
    FAIL_TO_PASS_FRACTION = "fail-to-pass-fraction"

    @property
    def uses_test_lists(self) -> bool:
        return self in (ScoringPolicy.SWEBENCH, ScoringPolicy.FAIL_TO_PASS_FRACTION)


class Isolation(StrEnum):
    """How the tests meet the candidate's code (task.toml ``isolation``)."""

    TWO_PROCESS = "two-process"  # tests in a trusted process; candidate in its own sandbox
    IN_PROCESS = "in-process"  # candidate modules imported into the test process: trusts it


@dataclass(frozen=True)
class Environment:
    """What a task runs in (task.toml ``[environment]``): the base image and runtime, and what
    the task adds to them (docs/environments.md). A task that adds nothing runs in the default
    environment (verify-cli's own interpreter on bwrap, ``image`` on docker)."""

    image: str
    runtime: str
    preload: tuple[str, ...] = ()
    #: Python requirements (PEP 508 lines), those of ``requirements_file`` after the list's.
    requirements: tuple[str, ...] = ()
    #: A requirements or lock file in the task folder (relative path), or None.
    requirements_file: str | None = None
    #: The Python version the environment's interpreter must have ("3.11"), or None for the
    #: backend's own.
    python: str | None = None
    #: Debian packages installed at build time (docker; an image's root file system on bwrap).
    system_packages: tuple[str, ...] = ()
    #: Shell commands run once at build time in /workspace holding the starter files, with the
    #: environment's interpreter first on PATH (``pip install -e .``, a build step).
    setup: tuple[str, ...] = ()
    #: A Dockerfile in the task folder (relative path); its folder is the build context.
    dockerfile: str | None = None

    @property
    def declared(self) -> bool:
        """Whether the task adds anything to its base image and runtime (an environment to build)."""
        return bool(self.requirements or self.requirements_file or self.python or self.system_packages
                    or self.setup or self.dockerfile)


@dataclass(frozen=True)
class TestSpec:
    __test__ = False  # not a pytest test class

    command: str
    results: str = "*.xml"
    #: pytest node ids (``tests/test_x.py::test_y``) that must go from failing (starter) to
    #: passing (reference), and that must pass on both; read from list files where task.toml
    #: names one.
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    #: kind = "log": which parser reads the runner's log (``django``, ``sympy``, ``pytest-log``).
    log_parser: str = ""

    @property
    def has_test_lists(self) -> bool:
        return bool(self.fail_to_pass or self.pass_to_pass)


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
    LOG = "log"  # a project's own test runner, its log parsed into results (Django, SymPy)


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
    #: The ``[repository]`` table of a repository task (a whole project, maybe packed), if any.
    repository: RepositorySpec | None = None
    #: Notes on old forms this task.toml still uses (shown once per task set by the CLI).
    deprecations: tuple[str, ...] = ()
    #: A Harbor task's own settings, where the folder is a Harbor task read as it is
    #: (:mod:`verify_cli.formats.harbor`); None for verify-cli's own format.
    harbor: HarborSpec | None = None

    @property
    def task_file(self) -> Path:
        return self.root / TASK_FILE

    @property
    def prompt(self) -> str:
        if self.harbor is not None and self.harbor.instruction is not None:
            return self.harbor.instruction
        p = self.root / (INSTRUCTION_FILE if self.harbor is not None else PROMPT_FILE)
        return p.read_text(encoding="utf-8") if p.is_file() else ""

    def starter_files(self) -> dict[str, Path]:
        """The starter's files by work-folder path (from a bundle or archive's cache folder for
        a packed repository task)."""
        if self.repository is not None and self.repository.packed:
            return repository_files(unpacked_starter(self.root, self.repository))
        return list_files(self.root / STARTER_DIR)

    @property
    def solution_is_patch(self) -> bool:
        return (self.root / SOLUTION_PATCH).is_file() and not (self.root / SOLUTION_DIR).is_dir()

    def solution_files(self) -> dict[str, Path]:
        """The reference's files: solution/, or the files ``solution.patch`` writes (applied to
        the starter; raises TaskFormatError naming the hunk that does not apply)."""
        if self.solution_is_patch:
            return list_files(applied_solution(self.root, self.starter_files()))
        return list_files(self.root / SOLUTION_DIR)

    def solution_removals(self) -> tuple[str, ...]:
        """The starter files the reference removes: those ``solution.patch`` deletes or renames
        away (a ``solution/`` folder only adds and replaces files)."""
        return solution_patch_removals(self.root) if self.solution_is_patch else ()

    def test_files(self) -> dict[str, Path]:
        """Visible and hidden tests, keyed by their path in the work folder (``tests/...``, or
        their path inside those folders for ``test_layout = "repository"``)."""
        return self._tests_in((TESTS_DIR, HIDDEN_TESTS_DIR))

    def visible_test_files(self) -> dict[str, Path]:
        """The visible tests alone (what a solver may see), keyed as :meth:`test_files` keys them.
        A Harbor task's tests are the verifier's: none is visible."""
        return {} if self.harbor is not None else self._tests_in((TESTS_DIR,))

    def _tests_in(self, folders: tuple[str, ...]) -> dict[str, Path]:
        flat = self.repository is not None and self.repository.test_layout == "repository"
        out: dict[str, Path] = {}
        for folder in folders:
            for rel, p in list_files(self.root / folder).items():
                out[rel if flat else f"{folder}/{rel}"] = p
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
