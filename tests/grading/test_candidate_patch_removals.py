"""Candidate diffs and gold patches that delete and rename files, as ``git diff -M`` writes them.

A real git repository's diff (a rename with an edit, a deletion that empties a package folder,
a mode change to 100755) is the gold patch of a repository task and, applied by
:func:`apply_candidate_patch`, a candidate: on every backend, cold and warm, the tests run where
the removed files are really absent and the script is executable. A diff that deletes a test,
a harness file or a file outside the editable globs is refused for its reason, before anything
runs, and the layout never removes one whatever a candidate's files say.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from tests.conftest import PYTEST_COMMAND, SandboxFor
from tests.importers.test_swebench import git
from verify_cli.grading import CandidatePatchError, Grader, GradeRequest, GradeStatus, Phase, apply_candidate_patch
from verify_cli.grading.workspace import lay_out, solution_as_candidate
from verify_cli.tasks.file_states import REMOVED_FILE, ModedFile, is_removed
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

OLD = "".join(f"LINE_{i} = {i}\n" for i in range(12)) + "\n\ndef value():\n    return 1\n"
NEW = OLD.replace("return 1", "return 2")
HIDDEN = '''\
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_renamed_module_answers():
    from app.new_name import value
    assert value() == 2


def test_old_name_is_gone():
    assert not os.path.exists(os.path.join(ROOT, "app", "old_name.py"))


def test_deleted_files_are_gone():
    assert not os.path.exists(os.path.join(ROOT, "app", "legacy.py"))
    assert not os.path.exists(os.path.join(ROOT, "app", "only"))  # its folder went with its one file


def test_script_is_executable():
    assert subprocess.run([os.path.join(ROOT, "tools", "check.sh")]).returncode == 0
'''
STARTER = {"app/__init__.py": "", "app/old_name.py": OLD, "app/legacy.py": "LEGACY = True\n",
           "app/only/gone.py": "GONE = True\n", "tools/check.sh": "#!/bin/sh\nexit 0\n",
           "conftest.py": "# the project's own conftest\n", "README.md": "app\n",
           "tools/run.sh": "#!/bin/sh\necho run\nexit 0\n"}
TEST_IDS = ("hidden_tests.test_app::test_renamed_module_answers", "hidden_tests.test_app::test_old_name_is_gone",
            "hidden_tests.test_app::test_deleted_files_are_gone", "hidden_tests.test_app::test_script_is_executable")


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


class Repo:
    """A git clone of the starter, and ``git diff`` of an edit of it."""

    def __init__(self, clone: Path) -> None:
        self.clone = clone

    def diff(self, *, rename: bool = True, delete: bool = True, chmod: bool = True, extra: str = "",
             rename_script: bool = False) -> str:
        c = self.clone
        if rename_script:
            git(c, "mv", "tools/run.sh", "tools/go.sh")
            (c / "tools" / "go.sh").write_text("#!/bin/sh\necho run\nexit 0\n# renamed\n")
        if rename:
            git(c, "mv", "app/old_name.py", "app/new_name.py")
            (c / "app" / "new_name.py").write_text(NEW)
        if delete:
            git(c, "rm", "-q", "app/legacy.py", "app/only/gone.py")
        if chmod:
            (c / "tools" / "check.sh").chmod(0o755)
        if extra:
            git(c, "rm", "-q", extra)
        git(c, "add", "-A")
        try:
            return git(c, "diff", "--cached", "-M")
        finally:
            git(c, "reset", "-q", "--hard")


@pytest.fixture(scope="module")
def repo_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VERIFY_REPO_CACHE", str(tmp_path_factory.mktemp("repo-cache")))
        yield


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, repo_cache: None) -> tuple[Task, Repo]:
    """A repository task whose gold patch is ``git diff -M`` of the rename, the deletions and the
    mode change, and the clone its diffs come from."""
    root = tmp_path_factory.mktemp("removals")
    clone = root / "clone"
    _write(clone, STARTER)
    (clone / "tools" / "run.sh").chmod(0o755)
    git(clone, "init", "-q")
    git(clone, "config", "core.fileMode", "true")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "base")
    repo = Repo(clone)
    task_dir = root / "task"
    shutil.copytree(clone, task_dir / "starter", ignore=shutil.ignore_patterns(".git"))
    _write(task_dir, {"hidden_tests/test_app.py": HIDDEN, "prompt.md": "Rename old_name to new_name.\n",
                      "solution.patch": repo.diff()})
    doc: dict[str, Any] = {
        "schema_version": 1, "id": "demo/removals", "title": "Removals", "domain": "coding", "language": "python",
        "kind": "pytest", "isolation": "in-process", "editable": ["**/*.py", "tools/*.sh"],
        "environment": {"image": "verify-cli/python:3.11", "runtime": "python"},
        "test": {"command": PYTEST_COMMAND.replace(" tests", " hidden_tests"), "results": "junit.xml"},
        "scoring": {"policy": "all-or-nothing"},
        "limits": {"wall_seconds": 60, "memory_mb": 512, "processes": 64},
    }
    (task_dir / "task.toml").write_text(tomli_w.dumps(doc))
    return load_task(task_dir), repo


def test_a_git_diff_with_a_rename_deletions_and_a_mode_change_becomes_the_candidates_files(
        built: tuple[Task, Repo]) -> None:
    task, repo = built
    diff = repo.diff()
    assert "rename from app/old_name.py" in diff and "similarity index" in diff
    assert "deleted file mode 100644" in diff and "new mode 100755" in diff
    files, method = apply_candidate_patch(task, diff)
    assert method == "git apply"
    assert files == {"app/new_name.py": NEW.encode(), "tools/check.sh": b"#!/bin/sh\nexit 0\n",
                     "app/old_name.py": b"", "app/legacy.py": b"", "app/only/gone.py": b""}
    assert {rel for rel, data in files.items() if is_removed(data)} == {"app/old_name.py", "app/legacy.py",
                                                                         "app/only/gone.py"}
    assert isinstance(files["tools/check.sh"], ModedFile) and files["tools/check.sh"].executable
    assert isinstance(files["app/new_name.py"], ModedFile) and not files["app/new_name.py"].executable


def test_a_renamed_executable_keeps_its_mode_strict_or_fuzzed(built: tuple[Task, Repo]) -> None:
    """A rename with an edit of a 100755 file: the new file is executable and the old removed,
    whether strict git apply takes the diff or, its context drifted, patch with fuzz does."""
    task, repo = built
    diff = repo.diff(rename=False, delete=False, chmod=False, rename_script=True)
    assert "rename from tools/run.sh" in diff and "index" in diff and "100755" in diff
    drifted = diff.replace(" echo run\n", " echo drifted\n")  # a context line the starter does not have
    for text, how in ((diff, "git apply"), (drifted, "patch --fuzz=5")):
        files, method = apply_candidate_patch(task, text)
        assert method == how
        assert files["tools/go.sh"] == b"#!/bin/sh\necho run\nexit 0\n# renamed\n"
        assert isinstance(files["tools/go.sh"], ModedFile) and files["tools/go.sh"].executable
        assert is_removed(files["tools/run.sh"])


def test_the_gold_patch_removes_and_renames_in_the_reference(built: tuple[Task, Repo], tmp_path: Path) -> None:
    task, _ = built
    assert set(task.solution_removals()) == {"app/old_name.py", "app/legacy.py", "app/only/gone.py"}
    lay_out(task, Phase.REFERENCE, tmp_path)
    assert (tmp_path / "app" / "new_name.py").read_text() == NEW
    assert not (tmp_path / "app" / "old_name.py").exists() and not (tmp_path / "app" / "only").exists()
    assert (tmp_path / "tools" / "check.sh").stat().st_mode & 0o100
    assert (tmp_path / "conftest.py").is_file() and (tmp_path / "hidden_tests" / "test_app.py").is_file()
    # As a candidate, the reference says the same (what mutants and probes start from).
    as_candidate = solution_as_candidate(task)
    assert is_removed(as_candidate["app/legacy.py"]) and as_candidate["tools/check.sh"].executable  # type: ignore[attr-defined]


@pytest.mark.parametrize(("extra", "why"), [
    ("conftest.py", "deletes 'conftest.py', which would configure the test runner"),
    ("README.md", "deletes 'README.md', which is outside the editable globs (**/*.py, tools/*.sh)"),
])
def test_a_diff_that_deletes_what_a_candidate_may_not_is_refused_for_its_reason(built: tuple[Task, Repo],
                                                                               extra: str, why: str) -> None:
    task, repo = built
    with pytest.raises(CandidatePatchError) as raised:
        apply_candidate_patch(task, repo.diff(extra=extra))
    assert why in raised.value.message


def test_a_diff_that_deletes_or_renames_a_test_file_is_refused(built: tuple[Task, Repo]) -> None:
    task, _ = built
    deleted = ("diff --git a/hidden_tests/test_app.py b/hidden_tests/test_app.py\ndeleted file mode 100644\n"
               "--- a/hidden_tests/test_app.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-import os\n")
    with pytest.raises(CandidatePatchError, match=r"deletes the test file 'hidden_tests/test_app\.py'"):
        apply_candidate_patch(task, deleted)
    renamed = ("diff --git a/hidden_tests/test_app.py b/app/stolen.py\nsimilarity index 100%\n"
               "rename from hidden_tests/test_app.py\nrename to app/stolen.py\n")
    with pytest.raises(CandidatePatchError, match=r"renames \(to 'app/stolen.py'\) the test file"):
        apply_candidate_patch(task, renamed)


def test_the_layout_never_removes_a_test_harness_or_non_editable_file(built: tuple[Task, Repo],
                                                                      tmp_path: Path) -> None:
    """A candidate's files given directly (not a diff) are held to the same guards: a removal of a
    test, the task's conftest.py or a path outside the editable globs is ignored and listed."""
    task, _ = built
    laid = lay_out(task, Phase.CANDIDATE, tmp_path, {
        "hidden_tests/test_app.py": REMOVED_FILE, "conftest.py": REMOVED_FILE, "README.md": REMOVED_FILE,
        "../outside.py": REMOVED_FILE, "app/legacy.py": REMOVED_FILE})
    assert set(laid.ignored) == {"hidden_tests/test_app.py", "conftest.py", "README.md", "../outside.py"}
    assert (tmp_path / "hidden_tests" / "test_app.py").is_file() and (tmp_path / "conftest.py").is_file()
    assert (tmp_path / "README.md").is_file() and not (tmp_path / "app" / "legacy.py").exists()


def test_a_removal_and_a_new_file_in_the_same_folder_both_hold(built: tuple[Task, Repo], tmp_path: Path) -> None:
    """Removing a folder's one file prunes the folder; a file the candidate writes there after it
    (in path order) makes it again. Plain bytes keep the mode of the starter file they replace."""
    task, _ = built
    laid = lay_out(task, Phase.CANDIDATE, tmp_path, {"app/only/gone.py": REMOVED_FILE, "app/only/z.py": b"Z = 1\n"})
    assert laid.ignored == ()
    assert sorted(os.listdir(tmp_path / "app" / "only")) == ["z.py"]


def test_plain_bytes_keep_the_mode_of_the_starter_file_they_replace(tmp_path: Path, built: tuple[Task, Repo],
                                                                    make_task: Any) -> None:
    task = load_task(make_task("exec", mutate=lambda d: d.update(editable=["solution.py", "run.sh"]),
                               files={"starter/run.sh": "#!/bin/sh\n", "solution/run.sh": "#!/bin/sh\n"}))
    (task.root / "starter" / "run.sh").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    lay_out(task, Phase.CANDIDATE, work, {"run.sh": b"#!/bin/sh\nexit 0\n", "new.sh": b"#!/bin/sh\n"})
    assert (work / "run.sh").stat().st_mode & 0o100
    work2 = tmp_path / "work2"
    work2.mkdir()
    lay_out(task, Phase.CANDIDATE, work2, {"run.sh": ModedFile(b"#!/bin/sh\n", executable=False)})
    assert not (work2 / "run.sh").stat().st_mode & 0o100


#: (backend, warm) pairs: each backend cold, and the warm hosts of the two that have them.
RUNS = [pytest.param("process", False, id="process"),
        pytest.param("bwrap", False, id="bwrap-cold", marks=pytest.mark.bwrap),
        pytest.param("bwrap", True, id="bwrap-warm", marks=pytest.mark.bwrap),
        pytest.param("docker-single-use", False, id="docker-cold", marks=pytest.mark.docker),
        pytest.param("docker", True, id="docker-warm", marks=pytest.mark.docker)]


@pytest.mark.parametrize(("backend", "warm"), RUNS)
def test_removals_hold_on_every_backend(built: tuple[Task, Repo], sandbox_for: SandboxFor, backend: str,
                                        warm: bool) -> None:
    """The gold patch's reference and the same ``git diff -M`` as a candidate pass every test
    (the renamed module answers, the removed files are absent, the script runs); the same
    diff without its deletions fails exactly the test that checks them; the starter fails."""
    task, repo = built
    with Grader(sandbox_for(backend), warm=warm) as grader:
        reference = grader.grade(GradeRequest(task, Phase.REFERENCE))
        assert reference.status is GradeStatus.GRADED and reference.passed, reference.problems
        assert {t.id for t in reference.tests} == set(TEST_IDS)
        good = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate=apply_candidate_patch(task, repo.diff())[0]))
        kept = grader.grade(GradeRequest(task, Phase.CANDIDATE,
                                         candidate=apply_candidate_patch(task, repo.diff(delete=False))[0]))
        stats = grader.warm_stats
    if warm:  # the warm workers ran them, over the same laid-out folder
        assert stats is not None and stats.warm_runs >= 3 and stats.fallbacks == 0, stats
    assert good.status is GradeStatus.GRADED and good.passed and good.score == 1.0, good.problems
    assert kept.status is GradeStatus.GRADED and not kept.passed
    assert [t.id for t in kept.tests if t.outcome.value != "passed"] == [
        "hidden_tests.test_app::test_deleted_files_are_gone"]
