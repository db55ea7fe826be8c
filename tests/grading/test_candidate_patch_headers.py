"""Candidate diffs as git writes them: a copy applies, a binary file's ``GIT binary patch``
applies byte for byte, and a binary change without its contents is refused with what to do
instead (renames and deletions: test_candidate_patch_removals.py)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_task
from tests.importers.test_swebench import git
from verify_cli.grading.candidate_patch import CandidatePatchError, apply_candidate_patch
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task
from verify_cli.tasks.repository import patch_files

BLOB = bytes(range(256)) * 4


@pytest.fixture(scope="module")
def task_and_diff(tmp_path_factory: pytest.TempPathFactory) -> tuple[Task, Callable[[Callable[[Path], None], str],
                                                                                  str]]:
    """A task whose starter holds solution.py and a binary data.bin (both editable), and a maker of
    git diffs against that starter (an edit of a clone, then ``git diff`` with the options given)."""
    root = tmp_path_factory.mktemp("headers")

    def mutate(doc: dict[str, Any]) -> None:
        doc["editable"] = ["*.py", "*.bin"]

    task_dir = write_task(root / "task", mutate=mutate)
    (task_dir / "starter" / "data.bin").write_bytes(BLOB)
    (task_dir / "solution" / "data.bin").write_bytes(BLOB)
    task = load_task(task_dir)
    clone = root / "clone"
    shutil.copytree(task_dir / "starter", clone)
    git(clone, "init", "-q")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "starter")

    def diff(edit: Callable[[Path], None], options: str) -> str:
        edit(clone)
        git(clone, "add", "-A")
        try:
            return git(clone, "diff", "--cached", *options.split())
        finally:
            git(clone, "reset", "-q", "--hard")
            git(clone, "clean", "-qfd")

    return task, diff


def _copy(clone: Path) -> None:
    shutil.copy(clone / "solution.py", clone / "solution_copy.py")


def test_a_copy_applies(task_and_diff: tuple[Task, Any]) -> None:
    task, diff = task_and_diff
    copied = diff(_copy, "-C --find-copies-harder")
    assert "copy from solution.py" in copied and "+++" not in copied
    files, method = apply_candidate_patch(task, copied)
    assert method == "git apply"
    assert files == {"solution_copy.py": (task.root / "starter" / "solution.py").read_bytes()}


def test_a_binary_patch_applies_byte_for_byte(task_and_diff: tuple[Task, Any]) -> None:
    task, diff = task_and_diff
    changed = BLOB[:100] + b"\x00\xff" + BLOB[102:]
    binary = diff(lambda c: (c / "data.bin").write_bytes(changed), "--binary")
    assert "GIT binary patch" in binary
    assert patch_files(binary).binaries == ("data.bin",)
    files, _ = apply_candidate_patch(task, binary)
    assert files == {"data.bin": changed}


@pytest.mark.parametrize(("edit", "options", "reason"), [
    (lambda c: (c / "data.bin").write_bytes(BLOB[::-1]), "",
     "changes the binary file 'data.bin' without its contents"),
])
def test_what_cannot_be_applied_is_refused_with_a_remedy(task_and_diff: tuple[Task, Any], edit: Any, options: str,
                                                         reason: str) -> None:
    task, diff = task_and_diff
    with pytest.raises(CandidatePatchError) as raised:
        apply_candidate_patch(task, diff(edit, options))
    assert reason in raised.value.message
