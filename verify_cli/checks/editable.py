"""Editable globs that reach what a solution must never ship: the tests and the harness's files.

The grader takes only editable files from a candidate, and even then never a file under
``tests/`` or ``hidden_tests/`` and never a harness file (``conftest.py``, ``sitecustomize.py``,
a ``.pth``, ...) admitted by a wildcard. A glob is reported only for what is true of the task:
it matches the task's own test files, or a harness file the task's own starter or solution ships
(the grader refuses it, so a solution that relies on it fails for no visible reason), or it lets a
candidate configure the test runner (a harness file named exactly, or ``pyproject.toml`` and its
kin, which the grader takes). A wildcard such as ``**/*.py`` that merely could match a harness
file is not a mistake: the grader refuses such a file whatever the globs say.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify_cli.grading.workspace import HARNESS_FILES, HARNESS_MODULES, HARNESS_SUFFIXES
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import glob_matches

#: Files the grader does not refuse but that configure pytest when present in the work folder.
RUNNER_CONFIG_FILES = ("pyproject.toml", "setup.cfg", "tox.ini")

@dataclass(frozen=True)
class EditableReach:
    """What one editable glob reaches that it should not."""

    glob: str
    test_files: tuple[str, ...]  # the task's files under tests/ or hidden_tests/ (always refused)
    refused_harness: tuple[str, ...]  # harness files of the starter/solution a wildcard admits (refused)
    admitted_harness: tuple[str, ...]  # harness or runner-config paths the grader takes

    def describe(self) -> str:
        parts: list[str] = []
        if self.test_files:
            parts.append(f"test files ({_listing(self.test_files)}), which the grader always takes from the task")
        if self.refused_harness:
            parts.append(f"harness files of the task's own starter or solution ({_listing(self.refused_harness)}), "
                         "which the grader refuses from a wildcard (a solution relying on them fails)")
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


def _is_harness_file(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return (name in HARNESS_FILES or name in HARNESS_MODULES or name.endswith(HARNESS_SUFFIXES)
            or "__pycache__" in rel.split("/"))


def editable_reach(task: Task) -> list[EditableReach]:
    """Each editable glob that matches test files or harness files, with what it matches."""
    test_paths = sorted(task.test_files())  # the task's own, never files it does not have
    shipped = sorted({*task.starter_files(), *task.solution_files()})
    harness_paths = [p for p in shipped if _is_harness_file(p)]
    config_paths = [f"{folder}{name}" for folder in _folders(task) for name in RUNNER_CONFIG_FILES]
    out: list[EditableReach] = []
    for glob in task.editable:
        tests = tuple(p for p in test_paths if glob_matches(glob, p))
        refused = tuple(p for p in harness_paths if glob_matches(glob, p)
                        and (p != glob or p.rsplit("/", 1)[-1] in HARNESS_MODULES))
        named = not any(c in glob for c in "*?[") and glob.rsplit("/", 1)[-1] in HARNESS_FILES
        admitted = tuple(([glob] if named else [])
                         + [p for p in config_paths if glob_matches(glob, p)])
        if tests or refused or admitted:
            out.append(EditableReach(glob, tests, refused, admitted))
    return out
