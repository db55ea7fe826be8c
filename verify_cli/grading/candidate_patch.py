"""A repository candidate given as a unified diff, turned into the edited files grading takes."""

from __future__ import annotations

from collections.abc import Mapping

from verify_cli.errors import VerifyError
from verify_cli.grading.workspace import is_repository_test_file
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import matches_any
from verify_cli.tasks.repository import PatchError, apply_patch_by, patch_files


class CandidatePatchError(VerifyError):
    """A candidate's diff that cannot be graded: it does not apply to the starter, or it
    touches a file a candidate may not change (a test file, a path outside ``editable``)."""


def candidate_from_patch(task: Task, diff: str | bytes) -> dict[str, bytes]:
    """The files a candidate's unified diff leaves in the work folder, for
    ``GradeRequest.candidate``: the diff applied to the task's starter (:func:`apply_candidate_patch`)."""
    return apply_candidate_patch(task, diff)[0]


def apply_candidate_patch(task: Task, diff: str | bytes) -> tuple[dict[str, bytes], str]:
    """The files a candidate's unified diff leaves in the work folder, and how it applied:
    strict ``git apply`` first, then SWE-bench's permissive fallbacks (``git apply --reject``,
    ``patch --fuzz=5``) for a model's diff whose context drifted.

    git's extended headers apply too: a copy (``copy from`` / ``copy to``) writes the new file, a
    ``GIT binary patch`` (``git diff --binary``) its binary contents. Raises CandidatePatchError
    naming the path (outside the editable globs, a test file, a deletion, a rename, a binary file
    changed without its contents) or the hunk that does not apply. Test files always come from the task, so a diff
    that edits one is refused rather than silently dropped.
    """
    data = diff.encode("utf-8") if isinstance(diff, str) else diff
    touched = patch_files(data.decode("utf-8", "replace"))
    if not touched.writes and not touched.deletes:
        raise CandidatePatchError("the candidate's diff changes no file",
                                  hint="give a unified diff (git diff output) against the starter")
    if touched.opaque_binaries:
        raise CandidatePatchError(f"the candidate's diff changes the binary file {touched.opaque_binaries[0]!r} "
                                  "without its contents ('Binary files ... differ')",
                                  hint="write the diff with git diff --binary, which carries binary contents")
    if touched.renames:
        old, new = touched.renames[0]
        raise CandidatePatchError(f"the candidate's diff renames {old!r} to {new!r}; a candidate overlays files "
                                  f"on the starter and cannot remove {old!r}",
                                  hint="write the new file as an added file (a copy: git diff -C, or no rename "
                                       "detection: git diff --no-renames), leaving the old one")
    tests = task.test_files()
    for rel in (*touched.writes, *touched.deletes):
        if _is_test_path(task, tests, rel):
            raise CandidatePatchError(f"the candidate's diff edits the test file {rel!r}",
                                      hint="tests always come from the task; change only source files")
        if not matches_any(task.editable, rel):
            raise CandidatePatchError(f"the candidate's diff edits {rel!r}, outside the editable globs "
                                      f"({', '.join(task.editable)})")
    if touched.deletes:
        raise CandidatePatchError(f"the candidate's diff deletes {touched.deletes[0]!r}; a candidate "
                                  "overlays files on the starter and cannot delete one")
    starter = task.starter_files()
    inputs = {rel: starter[rel].read_bytes() for rel in touched.reads if rel in starter}
    try:
        return apply_patch_by(data, inputs, lenient=True)
    except PatchError as e:
        raise CandidatePatchError(f"the candidate's diff does not apply to the starter: {e}") from None


def _is_test_path(task: Task, tests: Mapping[str, object], rel: str) -> bool:
    """A test file of the task: always from the task, never a candidate's."""
    return rel in tests or rel.split("/", 1)[0] in ("tests", "hidden_tests") or is_repository_test_file(task, rel)


def split_file_sections(diff: str) -> list[str]:
    """A unified diff cut into one section per file: at each ``diff --git`` header where it has
    them, else at each ``--- `` line that a ``+++ `` line follows. Text before the first section
    (a commit message) is dropped."""
    lines = diff.splitlines(keepends=True)
    git_style = any(line.startswith("diff --git ") for line in lines)
    starts = [i for i, line in enumerate(lines)
              if (line.startswith("diff --git ") if git_style
                  else line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "))]
    return ["".join(lines[a:b]) for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]


def drop_test_file_sections(task: Task, diff: str) -> tuple[str, tuple[str, ...]]:
    """``diff`` without the sections that change the task's test files, and those files: what
    SWE-bench's harness does to a model's edits of test files (it checks the test files out
    again before applying the test patch), so the rest of the diff is graded."""
    tests = task.test_files()
    kept: list[str] = []
    dropped: list[str] = []
    for section in split_file_sections(diff):
        touched = patch_files(section)
        paths = (*touched.writes, *touched.deletes)
        if paths and all(_is_test_path(task, tests, rel) for rel in paths):
            dropped.extend(paths)
        else:
            kept.append(section)
    return "".join(kept), tuple(dict.fromkeys(dropped))

