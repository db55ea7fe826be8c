"""A repository candidate given as a unified diff, turned into the edited files grading takes."""

from __future__ import annotations

from collections.abc import Mapping

from verify_cli.errors import VerifyError
from verify_cli.grading.workspace import candidate_path_refusal, is_repository_test_file
from verify_cli.tasks.file_states import REMOVED_FILE
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import matches_any
from verify_cli.tasks.repository import PatchError, apply_patch_by, patch_files, starter_inputs


class CandidatePatchError(VerifyError):
    """A candidate's diff that cannot be graded: it does not apply to the starter, or it
    writes or removes a file a candidate may not change (a test file, a harness file, a path
    outside ``editable``)."""


def candidate_from_patch(task: Task, diff: str | bytes) -> dict[str, bytes]:
    """The files a candidate's unified diff leaves in the work folder, for
    ``GradeRequest.candidate``: the diff applied to the task's starter (:func:`apply_candidate_patch`),
    with :data:`~verify_cli.tasks.file_states.REMOVED_FILE` for each file it deletes or renames away."""
    return apply_candidate_patch(task, diff)[0]


def apply_candidate_patch(task: Task, diff: str | bytes) -> tuple[dict[str, bytes], str]:
    """The files a candidate's unified diff leaves in the work folder, and how it applied:
    strict ``git apply`` first, then SWE-bench's permissive fallbacks (``git apply --reject``,
    ``patch --fuzz=5``) for a model's diff whose context drifted.

    git's extended headers apply too: a copy (``copy from`` / ``copy to``) writes the new file, a
    ``GIT binary patch`` (``git diff --binary``) its binary contents, a mode change or a new
    executable file its mode (each written file is a :class:`~verify_cli.tasks.file_states.ModedFile`).
    A deletion, and the old side of a rename, are :data:`~verify_cli.tasks.file_states.REMOVED_FILE`
    values: the layout removes that starter file. Raises CandidatePatchError naming the path (a
    test file or a path outside the editable globs, written, deleted or renamed away; a harness
    file such as ``conftest.py`` or a file the task's runner lays out, deleted or renamed away; a
    binary file changed without its contents) or the hunk that does not apply. Test files always
    come from the task, so a diff that edits or deletes one is refused rather than silently dropped.
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
    tests = task.test_files()
    trusted = _trusted_files(task)
    removes = touched.removes
    for rel in (*touched.writes, *removes):
        renamed = next((new for old, new in touched.renames if old == rel), None)
        verb = "deletes" if renamed is None and rel in removes else "edits" if renamed is None \
            else f"renames (to {renamed!r})"
        if _is_test_path(task, tests, rel):
            raise CandidatePatchError(f"the candidate's diff {verb} the test file {rel!r}",
                                      hint="tests always come from the task; change only source files")
        why = candidate_path_refusal(task, rel, test_paths=tests, trusted=trusted)
        # An edit of a harness file is left out at layout (and listed as ignored), as for any
        # candidate; a removal of one is refused: it would take a file of the task's away.
        if why and (rel in removes or not matches_any(task.editable, rel)):
            raise CandidatePatchError(f"the candidate's diff {verb} {rel!r}, which {why}")
    starter = task.starter_files()
    try:
        files, method = apply_patch_by(data, starter_inputs(starter, touched.reads), lenient=True)
    except PatchError as e:
        raise CandidatePatchError(f"the candidate's diff does not apply to the starter: {e}") from None
    missing = [rel for rel in removes if rel not in starter]
    if missing:  # git apply refuses this; a permissive fallback may not
        raise CandidatePatchError(f"the candidate's diff deletes {missing[0]!r}, which the starter does not have")
    return {**files, **dict.fromkeys(removes, REMOVED_FILE)}, method


def _trusted_files(task: Task) -> Mapping[str, bytes]:
    from verify_cli.kinds.registry import kind_of  # kinds build on grading: imported late

    return kind_of(task).trusted_files(task)


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

