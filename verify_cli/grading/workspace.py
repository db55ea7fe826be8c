"""Lay out the work folder of one phase of a task.

Order matters: starter first, then the phase's files (only the editable paths of a candidate),
then the pristine tests and hidden tests last, so nothing a candidate ships can replace them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from verify_cli.tasks.model import HIDDEN_TESTS_DIR, TESTS_DIR, Task
from verify_cli.tasks.paths import matches_any, unsafe_relative_path


class Phase(StrEnum):
    REFERENCE = "reference"  # starter + solution
    STARTER = "starter"  # starter alone
    CANDIDATE = "candidate"  # starter + a candidate's editable files
    MUTANT = "mutant"  # a candidate made by mutating the reference
    PROBE = "probe"  # an adversarial candidate


@dataclass(frozen=True)
class LaidOut:
    root: Path
    #: Candidate files that were not taken (outside the editable globs, or unsafe paths).
    ignored: tuple[str, ...]


def _folder_for(dest: str, made: set[str] | None) -> None:
    folder = os.path.dirname(dest)
    if made is not None and folder in made:
        return
    if not os.path.isdir(folder):
        os.makedirs(folder, exist_ok=True)
    if made is not None:
        made.add(folder)


def _fresh_destination(root: Path, rel: str, made: set[str] | None = None) -> str:
    """``root / rel`` with its folder made and any file (or link) already there removed (plain
    system calls: this runs for every file of every graded run)."""
    dest = os.path.join(root, rel)
    _folder_for(dest, made)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(dest)
    return dest


def _write(root: Path, rel: str, data: bytes, made: set[str] | None = None) -> None:
    with open(_fresh_destination(root, rel, made), "wb") as fh:
        fh.write(data)


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def _copy(root: Path, rel: str, src: Path, made: set[str] | None = None) -> None:
    """Copy ``src`` to ``root / rel`` as a new file of its own (never a link to the pristine
    task's file, which a candidate could then rewrite): create-exclusive first, since the
    folder is usually fresh, and replace what is there only when something is. A plain
    sendfile copy: no same-file and special-file checks, which cost a third of a repository
    task's layout."""
    dest = os.path.join(root, rel)
    _folder_for(dest, made)
    try:
        out = os.open(dest, _NEW_FILE, 0o666)
    except FileExistsError:
        os.unlink(dest)
        out = os.open(dest, _NEW_FILE, 0o666)
    try:
        inp = os.open(src, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(inp)
            size = st.st_size
            if st.st_mode & 0o100:  # the task's executable files stay executable (./runtests.py)
                os.fchmod(out, 0o755)
            sent = 0
            while sent < size:
                n = os.sendfile(out, inp, sent, size - sent)
                if n == 0:
                    break
                sent += n
        finally:
            os.close(inp)
    finally:
        os.close(out)


def _in_test_folders(rel: str) -> bool:
    """True for paths inside tests/ or hidden_tests/: those come from the pristine task only,
    whatever the editable globs say (``**/*.py`` must not let a candidate add tests/conftest.py)."""
    return rel.split("/", 1)[0] in (TESTS_DIR, HIDDEN_TESTS_DIR)


#: Files that configure the test runner or the interpreter rather than hold a solution.
HARNESS_FILES = ("conftest.py", "sitecustomize.py", "usercustomize.py", "pytest.ini")
HARNESS_SUFFIXES = (".pth", ".pyc")
_HARNESS_DIR = Path(__file__).resolve().parent.parent / "harness"
#: The harness's own module names (``verify_calls.py``, ``verify_wire.py``, ...). The trusted side
#: imports them by name from a search path that starts with the work folder (``python -m
#: verify_calls`` runs in it), so a candidate file of that name would run as the trusted side:
#: refused at any depth, whatever the editable globs say.
HARNESS_MODULES = frozenset(p.name for p in (*_HARNESS_DIR.glob("*.py"), *_HARNESS_DIR.glob("*/*.py"))
                            if p.name != "__init__.py")


def _controls_the_harness(rel: str, editable: tuple[str, ...]) -> bool:
    """True for a candidate file that would reconfigure pytest or Python itself (a planted
    ``conftest.py``, ``sitecustomize.py``, a ``.pth`` or stale ``.pyc``), unless an editable glob
    names that exact path: a wildcard never admits one. A file named like a harness module is
    refused even then."""
    name = rel.rsplit("/", 1)[-1]
    if name in HARNESS_MODULES:
        return True
    if name not in HARNESS_FILES and not name.endswith(HARNESS_SUFFIXES) and "__pycache__" not in rel.split("/"):
        return False
    return rel not in editable


def is_repository_test_file(task: Task, rel: str) -> bool:
    """True for a path the task's ``[repository] test_files`` globs name: the project's own
    tests come from the task, whatever the editable globs say."""
    return task.repository is not None and matches_any(task.repository.test_files, rel)


def lay_out(task: Task, phase: Phase, root: Path, candidate: Mapping[str, bytes] | None = None) -> LaidOut:
    """Fill the empty folder ``root`` with the work folder of ``phase``."""
    made: set[str] = set()  # folders already made in this layout
    for rel, src in task.starter_files().items():
        _copy(root, rel, src, made)
    ignored: list[str] = []
    if phase is Phase.REFERENCE:
        for rel, src in task.solution_files().items():
            _copy(root, rel, src, made)
    elif phase is not Phase.STARTER:
        test_paths = task.test_files()
        for rel, data in sorted((candidate or {}).items()):
            rel = rel.replace("\\", "/")
            while rel.startswith("./"):
                rel = rel[2:]
            if (unsafe_relative_path(rel) or rel in test_paths or _in_test_folders(rel)
                    or not matches_any(task.editable, rel) or _controls_the_harness(rel, task.editable)
                    or is_repository_test_file(task, rel)):
                ignored.append(rel)
                continue
            try:
                _write(root, rel, data, made)
            except OSError:  # clashes with a folder or file already laid out: the candidate's fault
                ignored.append(rel)
    for rel, src in task.test_files().items():
        _copy(root, rel, src, made)
    return LaidOut(root, tuple(ignored))


def solution_as_candidate(task: Task) -> dict[str, bytes]:
    """The reference solution's files, as a candidate would submit them."""
    return {rel: p.read_bytes() for rel, p in task.solution_files().items()}
