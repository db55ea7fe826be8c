"""Editable globs that reach what a solution must never ship: the tests and the harness's files.

The grader takes only editable files from a candidate, and even then never a file under
``tests/`` or ``hidden_tests/`` and never a harness file (``conftest.py``, ``sitecustomize.py``,
a ``.pth``, ...) admitted by a wildcard. A glob that matches such paths is still a mistake the
author should hear about: a solution that relies on those files fails for no visible reason, and a
glob naming a harness file exactly hands the test runner's configuration to the candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify_cli.grading.workspace import HARNESS_FILES, HARNESS_MODULES, HARNESS_SUFFIXES
from verify_cli.tasks.model import HIDDEN_TESTS_DIR, TESTS_DIR, Task
from verify_cli.tasks.paths import glob_matches

#: Files the grader does not refuse but that configure pytest when present in the work folder.
RUNNER_CONFIG_FILES = ("pyproject.toml", "setup.cfg", "tox.ini")

#: Stand-ins for files a candidate could add to a test folder.
_TEST_FOLDER_SAMPLES = ("test_x.py", "conftest.py", "x.test.js", "data.json", "sub/test_x.py")


@dataclass(frozen=True)
class EditableReach:
    """What one editable glob reaches that it should not."""

    glob: str
    test_files: tuple[str, ...]  # under tests/ or hidden_tests/ (always refused)
    refused_harness: tuple[str, ...]  # harness files a wildcard admits (refused)
    admitted_harness: tuple[str, ...]  # harness or runner-config files the grader takes

    def describe(self) -> str:
        parts: list[str] = []
        if self.test_files:
            parts.append(f"test files ({_listing(self.test_files)}), which the grader always takes from the task")
        if self.refused_harness:
            parts.append(f"harness files ({_listing(self.refused_harness)}), which the grader refuses from a "
                         "wildcard")
        if self.admitted_harness:
            parts.append(f"files that configure the test runner ({_listing(self.admitted_harness)}), which "
                         "the grader TAKES from the candidate")
        return f"editable glob {self.glob!r} matches " + "; and ".join(parts)


def _listing(paths: tuple[str, ...], limit: int = 3) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _folders(task: Task) -> list[str]:
    """The work folder's own folders (where the starter and solution put files), top first."""
    found = {""}
    for files in (task.starter_files(), task.solution_files()):
        for rel in files:
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                found.add("/".join(parts[:i]) + "/")
    return sorted(found, key=lambda f: (f.count("/"), f))


def editable_reach(task: Task) -> list[EditableReach]:
    """Each editable glob that matches test files or harness files, with what it matches."""
    real = sorted(task.test_files())  # the task's own test files first, then stand-ins
    test_paths = real + [path for path in (f"{folder}/{name}" for folder in (TESTS_DIR, HIDDEN_TESTS_DIR)
                                           for name in _TEST_FOLDER_SAMPLES) if path not in real]
    harness_names = (*HARNESS_FILES, *sorted(HARNESS_MODULES), *(f"x{suffix}" for suffix in HARNESS_SUFFIXES),
                     "__pycache__/x.pyc")
    harness_paths = [f"{folder}{name}" for folder in _folders(task) for name in harness_names]
    config_paths = [f"{folder}{name}" for folder in _folders(task) for name in RUNNER_CONFIG_FILES]
    out: list[EditableReach] = []
    for glob in task.editable:
        tests = tuple(p for p in test_paths if glob_matches(glob, p))
        harness = [p for p in harness_paths if glob_matches(glob, p)]
        refused = tuple(p for p in harness if p != glob or p.rsplit("/", 1)[-1] in HARNESS_MODULES)
        admitted = tuple([p for p in harness if p == glob and p not in refused]
                         + [p for p in config_paths if glob_matches(glob, p)])
        if tests or refused or admitted:
            out.append(EditableReach(glob, tests, refused, admitted))
    return out
