"""Lay out the work folder of one phase of a task.

Order matters: starter first, then the phase's files (only the editable paths of a candidate),
then the pristine tests and hidden tests last, so nothing a candidate ships can replace them.
A candidate's :data:`~verify_cli.tasks.file_states.REMOVED_FILE` removes a starter file under the
same guards as an edit; a reference's ``solution.patch`` removes the files it deletes or renames
away. Every backend runs over the folder laid out here, so all of them see the same files.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from verify_cli.tasks.file_states import REMOVED_FILE, ModedFile, is_removed, stated_executable
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


def candidate_path_refusal(task: Task, rel: str, *, test_paths: Mapping[str, object] | None = None,
                           trusted: Mapping[str, bytes] | None = None) -> str:
    """Why a candidate may not write or remove ``rel`` (a clause: "is a test file of the task"),
    or "" where it may. The one rule of :func:`lay_out`, also used to refuse a candidate's diff
    with its reason."""
    if why := unsafe_relative_path(rel):
        return why
    tests = task.test_files() if test_paths is None else test_paths
    if rel in tests or _in_test_folders(rel) or is_repository_test_file(task, rel):
        return "is a test file of the task (tests always come from the task)"
    if _controls_the_harness(rel, task.editable):
        return "would configure the test runner or Python (conftest.py, sitecustomize.py, a .pth, a harness module)"
    if trusted is not None and rel in trusted:
        return "is a file the task's runner lays out itself"
    if not matches_any(task.editable, rel):
        return f"is outside the editable globs ({', '.join(task.editable)})"
    return ""


def lay_out(task: Task, phase: Phase, root: Path, candidate: Mapping[str, bytes] | None = None,
            *, trusted: Mapping[str, bytes] | None = None) -> LaidOut:
    """Fill the empty folder ``root`` with the work folder of ``phase``; ``trusted`` (default:
    the task kind's :meth:`~verify_cli.kinds.base.Kind.trusted_files`, the configuration its
    runs' environment names) last of all, and a candidate file of one of their paths is never
    taken. A mutant (the reference, mutated) starts from the reference's removals."""
    if trusted is None:
        from verify_cli.kinds.registry import kind_of  # kinds build on grading: imported late

        trusted = kind_of(task).trusted_files(task)
    made: set[str] = set()  # folders already made in this layout
    for rel, src in task.starter_files().items():
        _copy(root, rel, src, made)
    ignored: list[str] = []
    if phase is Phase.REFERENCE:
        for rel, src in task.solution_files().items():
            _copy(root, rel, src, made)
    if phase in (Phase.REFERENCE, Phase.MUTANT):
        for rel in task.solution_removals():
            if not unsafe_relative_path(rel):
                _remove(root, rel, made)
    if phase not in (Phase.REFERENCE, Phase.STARTER):
        test_paths = task.test_files()
        for rel, data in sorted((candidate or {}).items()):
            rel = rel.replace("\\", "/")
            while rel.startswith("./"):
                rel = rel[2:]
            if candidate_path_refusal(task, rel, test_paths=test_paths, trusted=trusted):
                ignored.append(rel)
                continue
            try:
                if is_removed(data):
                    _remove(root, rel, made)
                else:
                    _write_candidate(root, rel, data, made)
            except OSError:  # clashes with a folder or file already laid out: the candidate's fault
                ignored.append(rel)
    for rel, src in task.test_files().items():
        _copy(root, rel, src, made)
    for rel, data in trusted.items():
        _write(root, rel, data, made)
    return LaidOut(root, tuple(ignored))


def _write_candidate(root: Path, rel: str, data: bytes, made: set[str]) -> None:
    """A candidate's file, executable where it says so (a :class:`ModedFile`) or, for plain
    bytes, where the starter file it replaces was (editing ``runtests.py`` keeps it runnable)."""
    executable = stated_executable(data)
    if executable is None:
        try:
            st = os.lstat(os.path.join(root, rel))
            executable = stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o100)
        except OSError:
            executable = False
    _write(root, rel, data, made)
    if executable:
        os.chmod(os.path.join(root, rel), 0o755)


def _remove(root: Path, rel: str, made: set[str]) -> None:
    """Remove the file ``root / rel`` where there is one, and the folders it leaves empty (as
    git does: an emptied package folder must not linger as a namespace package). A folder at
    ``rel`` is an OSError: a removal names files."""
    dest = os.path.join(root, rel)
    if not os.path.lexists(dest):
        return
    if os.path.isdir(dest) and not os.path.islink(dest):
        raise IsADirectoryError(dest)
    os.unlink(dest)
    folder = os.path.dirname(rel)
    while folder:
        path = os.path.join(root, folder)
        try:
            os.rmdir(path)
        except OSError:  # not empty (or not there): stop
            break
        made.discard(path)  # a later file of this folder makes it again
        folder = os.path.dirname(folder)


def solution_as_candidate(task: Task) -> dict[str, bytes]:
    """The reference solution's files, as a candidate would submit them: each with its mode (a
    :class:`ModedFile`), and :data:`REMOVED_FILE` for each starter file the reference removes."""
    out: dict[str, bytes] = {rel: ModedFile(p.read_bytes(), bool(p.stat().st_mode & 0o100))
                             for rel, p in task.solution_files().items()}
    for rel in task.solution_removals():
        out.setdefault(rel, REMOVED_FILE)
    return out
