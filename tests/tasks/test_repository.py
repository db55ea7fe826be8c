"""Repository tasks: packed starters (git bundle, archive), gold patches, test lists, candidate diffs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

from verify_cli.errors import TaskFormatError
from verify_cli.grading import Grader, GradeRequest, Phase
from verify_cli.grading.candidate_patch import CandidatePatchError, candidate_from_patch
from verify_cli.grading.junit import junit_id_of_node_id, parse_junit
from verify_cli.grading.workspace import lay_out
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks import load_task
from verify_cli.tasks.repository import apply_patch, patch_files

INVENTORY = "repo-inventory-package"
ETL = "repo-orders-etl"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "repo-cache"
    monkeypatch.setenv("VERIFY_REPO_CACHE", str(cache))
    return cache


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def as_bundle(task_root: Path, work: Path) -> str:
    """Replace the task's starter/ with a git bundle of it; returns the base commit."""
    repo = work / "src"
    shutil.copytree(task_root / "starter", repo)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD").strip()
    (repo / "later.txt").write_text("a later commit the starter must not hold\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "later")
    git(repo, "bundle", "create", "-q", str(task_root / "repo.bundle"), "--all")
    shutil.rmtree(task_root / "starter")
    return base


def test_bundle_starter_is_unpacked_once_read_only(sample_tasks_dir: Path, copy_task: Any, tmp_path: Path,
                                                   _private_cache: Path) -> None:
    root = copy_task(sample_tasks_dir / INVENTORY)
    plain = {rel: p.read_bytes() for rel, p in load_task(root).starter_files().items()}
    base = as_bundle(root, tmp_path)
    text = (root / "task.toml").read_text()
    (root / "task.toml").write_text(text + f'\n[repository]\nbundle = "repo.bundle"\nbase_commit = "{base}"\n')
    task = load_task(root)
    files = task.starter_files()
    assert sorted(files) == sorted(plain) and "later.txt" not in files
    assert all(files[rel].read_bytes() == plain[rel] for rel in files)
    some = files["inventory/stock.py"]
    assert _private_cache in some.parents
    assert oct(some.stat().st_mode & 0o777) == "0o444"
    assert task.starter_files()["inventory/stock.py"] == some  # the same cache folder, not a second unpack
    assert set(task.solution_files()) == {"inventory/pricing/discounts.py", "inventory/stock.py"}


def test_bundle_without_the_commit_is_a_task_error(sample_tasks_dir: Path, copy_task: Any, tmp_path: Path) -> None:
    root = copy_task(sample_tasks_dir / INVENTORY)
    as_bundle(root, tmp_path)
    text = (root / "task.toml").read_text()
    (root / "task.toml").write_text(text + '\n[repository]\nbundle = "repo.bundle"\nbase_commit = "1234567"\n')
    with pytest.raises(TaskFormatError) as e:
        load_task(root)
    assert e.value.pointer == "/repository/base_commit"
    assert "'1234567' is not in the bundle repo.bundle" in str(e.value)


def test_archive_starter(sample_tasks_dir: Path, copy_task: Any) -> None:
    root = copy_task(sample_tasks_dir / ETL)
    with tarfile.open(root / "repo.tar.gz", "w:gz") as tar:
        for path in sorted((root / "starter").rglob("*")):
            tar.add(path, arcname=str(path.relative_to(root / "starter")), recursive=False)
    shutil.rmtree(root / "starter")
    (root / "task.toml").write_text((root / "task.toml").read_text() + '\n[repository]\narchive = "repo.tar.gz"\n')
    task = load_task(root)
    assert "orders_etl/transform/aggregate.py" in task.starter_files()


def test_loader_refuses_inconsistent_repository_tables(sample_tasks_dir: Path, copy_task: Any) -> None:
    root = copy_task(sample_tasks_dir / INVENTORY)
    toml = (root / "task.toml").read_text()
    cases = {
        '\n[repository]\nbundle = "repo.bundle"\n': "/repository/base_commit",
        '\n[repository]\narchive = "../x.tar"\n': "/repository/archive",
    }
    for extra, pointer in cases.items():
        (root / "task.toml").write_text(toml + extra)
        with pytest.raises(TaskFormatError) as e:
            load_task(root)
        assert e.value.pointer == pointer, str(e.value)
    (root / "task.toml").write_text(toml.replace('pass_to_pass = "pass_to_pass.txt"', 'pass_to_pass = "nope.txt"'))
    with pytest.raises(TaskFormatError, match=r"'nope\.txt', which is not a file of the task folder"):
        load_task(root)
    (root / "task.toml").write_text(toml.replace('fail_to_pass = "fail_to_pass.txt"\n', ""))
    with pytest.raises(TaskFormatError, match=r"policy 'swebench' needs test\.fail_to_pass"):
        load_task(root)
    (root / "task.toml").write_text(toml)
    (root / "solution").mkdir()
    (root / "solution" / "x.py").write_text("")
    with pytest.raises(TaskFormatError, match=r"solution/ or solution\.patch, not both"):
        load_task(root)


def test_junit_ids_are_what_pytest_reports(tmp_path: Path) -> None:
    """junit_id_of_node_id agrees with pytest's own JUnit XML for plain, class and parametrized
    tests in nested folders."""
    (tmp_path / "pkg" / "tests").mkdir(parents=True)
    (tmp_path / "pkg" / "tests" / "test_deep.py").write_text(
        "import pytest\n\n"
        "class TestA:\n    def test_m(self):\n        pass\n\n"
        "@pytest.mark.parametrize('x', ['a/b', 'c::d', 1])\ndef test_p(x):\n    pass\n\n"
        "def test_plain():\n    pass\n")
    xml = tmp_path / "junit.xml"
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}",
                          "-rA", "pkg"],
                         cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    node_ids = sorted(ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith("PASSED "))
    assert len(node_ids) == 5
    assert sorted(junit_id_of_node_id(n) for n in node_ids) == sorted(t.id for t in parse_junit(xml.read_bytes()))


def test_patch_files_and_apply() -> None:
    patch = (b"diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
             b"diff --git a/new.py b/new.py\nnew file mode 100644\n"
             b"--- /dev/null\n+++ b/new.py\n@@ -0,0 +1 @@\n+y = 3\n")
    touched = patch_files(patch.decode())
    assert touched.reads == ("m.py",) and touched.writes == ("m.py", "new.py") and touched.deletes == ()
    assert apply_patch(patch, {"m.py": b"x = 1\n"}) == {"m.py": b"x = 2\n", "new.py": b"y = 3\n"}


def test_candidate_diff_becomes_files_and_grades(sample_tasks_dir: Path, process_sandbox: Sandbox) -> None:
    task = load_task(sample_tasks_dir / INVENTORY)
    gold = (task.root / "solution.patch").read_text()
    files = candidate_from_patch(task, gold)
    assert set(files) == {"inventory/pricing/discounts.py", "inventory/stock.py"}
    half = gold[:gold.index("diff --git a/inventory/stock.py")]  # only the discount fix
    with Grader(process_sandbox) as grader:
        full = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate=files))
        partial = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate=candidate_from_patch(task, half)))
    assert full.score == 1.0 and full.passed
    assert partial.score == 0.0 and not partial.passed  # swebench: every FAIL_TO_PASS test or nothing


def test_fail_to_pass_fraction_gives_partial_credit(sample_tasks_dir: Path, process_sandbox: Sandbox) -> None:
    task = load_task(sample_tasks_dir / ETL)
    config = {"orders_etl/config.py": (task.root / "solution" / "orders_etl" / "config.py").read_bytes()}
    with Grader(process_sandbox) as grader:
        result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate=config))
    # The config fix makes the 2 config tests of the 4 FAIL_TO_PASS pass; the UTC-day test and
    # the end-to-end one (an order near midnight) still need the grouping fix.
    assert result.score == 0.5 and not result.passed


@pytest.mark.parametrize("path, why", [
    ("tests/test_stock.py", "edits the test file 'tests/test_stock.py'"),
    ("README.md", "outside the editable globs"),
])
def test_candidate_diff_refuses_tests_and_non_editable_paths(sample_tasks_dir: Path, path: str, why: str) -> None:
    task = load_task(sample_tasks_dir / INVENTORY)
    diff = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(CandidatePatchError, match=why):
        candidate_from_patch(task, diff)


def test_candidate_diff_that_does_not_apply_names_the_hunk(sample_tasks_dir: Path) -> None:
    task = load_task(sample_tasks_dir / INVENTORY)
    diff = "--- a/inventory/stock.py\n+++ b/inventory/stock.py\n@@ -3,1 +3,1 @@\n-not this line\n+x\n"
    with pytest.raises(CandidatePatchError, match=r"patch failed: inventory/stock\.py:3"):
        candidate_from_patch(task, diff)


def test_repository_test_files_never_come_from_a_candidate(sample_tasks_dir: Path, copy_task: Any,
                                                           tmp_path: Path) -> None:
    root = copy_task(sample_tasks_dir / ETL)
    (root / "starter" / "orders_etl" / "tests").mkdir()
    (root / "starter" / "orders_etl" / "tests" / "test_inner.py").write_text("def test_x():\n    pass\n")
    text = (root / "task.toml").read_text()
    (root / "task.toml").write_text(text + '\n[repository]\ntest_files = ["**/tests/**"]\n')
    task = load_task(root)
    work = tmp_path / "work"
    work.mkdir()
    laid = lay_out(task, Phase.CANDIDATE, work, {"orders_etl/tests/test_inner.py": b"def test_x():\n    assert 0\n",
                                                 "orders_etl/load.py": b"# edited\n"})
    assert laid.ignored == ("orders_etl/tests/test_inner.py",)
    assert (work / "orders_etl" / "tests" / "test_inner.py").read_text() == "def test_x():\n    pass\n"
    assert (work / "orders_etl" / "load.py").read_text() == "# edited\n"


def test_repository_test_layout(sample_tasks_dir: Path, copy_task: Any, tmp_path: Path) -> None:
    root = copy_task(sample_tasks_dir / ETL)
    (root / "hidden_tests" / "orders_etl" / "tests").mkdir(parents=True)
    (root / "hidden_tests" / "orders_etl" / "tests" / "test_h.py").write_text("def test_h():\n    pass\n")
    shutil.move(root / "tests", root / "hidden_tests" / "tests")
    text = (root / "task.toml").read_text()
    (root / "task.toml").write_text(text + '\n[repository]\ntest_layout = "repository"\n')
    task = load_task(root)
    assert "orders_etl/tests/test_h.py" in task.test_files() and "tests/test_config.py" in task.test_files()
    work = tmp_path / "work"
    work.mkdir()
    laid = lay_out(task, Phase.CANDIDATE, work, {"orders_etl/tests/test_h.py": b"planted"})
    assert laid.ignored == ("orders_etl/tests/test_h.py",)
    assert (work / "orders_etl" / "tests" / "test_h.py").read_text() == "def test_h():\n    pass\n"


def test_laid_out_files_are_copies_never_links_to_the_pristine_task(
        sample_tasks_dir: Path, copy_task: Any, tmp_path: Path) -> None:
    root = copy_task(sample_tasks_dir / INVENTORY)
    task = load_task(root)
    work = tmp_path / "work"
    work.mkdir()
    lay_out(task, Phase.REFERENCE, work)
    pristine = {**task.starter_files(), **task.solution_files(), **task.test_files()}
    for rel, src in pristine.items():
        laid = work / rel
        assert laid.stat().st_nlink == 1 and laid.stat().st_ino != src.stat().st_ino, rel
        assert not laid.is_symlink()
    (work / "inventory" / "models.py").write_text("# rewritten by a candidate\n")
    assert "rewritten" not in (root / "starter" / "inventory" / "models.py").read_text()
    assert (work / "inventory" / "stock.py").read_bytes() == task.solution_files()["inventory/stock.py"].read_bytes()


def test_a_broken_archive_fails_at_load_not_at_grading(sample_tasks_dir: Path, copy_task: Any) -> None:
    root = copy_task(sample_tasks_dir / ETL)  # solution/ folder: nothing else reads the starter at load
    shutil.rmtree(root / "starter")
    (root / "repo.tar.gz").write_bytes(b"not an archive")
    (root / "task.toml").write_text((root / "task.toml").read_text() + '\n[repository]\narchive = "repo.tar.gz"\n')
    with pytest.raises(TaskFormatError, match="cannot unpack the archive"):
        load_task(root)


def test_a_models_diff_whose_context_drifted_applies_by_swebench_fallbacks(sample_tasks_dir: Path) -> None:
    """A diff whose outer context lines were misremembered (as models write them) fails strict
    ``git apply`` and applies with ``patch --fuzz``, which is recorded; a hunk whose context is
    not there at all is still refused with strict git apply's reason."""
    from verify_cli.grading.candidate_patch import apply_candidate_patch

    task = load_task(sample_tasks_dir / INVENTORY)
    exact = ("--- a/inventory/stock.py\n+++ b/inventory/stock.py\n@@ -20,3 +20,3 @@\n"
             "     def on_hand(self, sku: str) -> int:\n"
             "-        self._known(sku)\n"
             "+        self._known(sku)  # checked\n"
             "         return self._on_hand[sku]\n")
    assert apply_candidate_patch(task, exact)[1] == "git apply"
    drifted = exact.replace("     def on_hand(self, sku: str) -> int:", "     def on_hand(self, sku):")
    files, method = apply_candidate_patch(task, drifted)
    assert method == "patch --fuzz=5"
    assert "self._known(sku)  # checked\n        return self._on_hand[sku]" in files["inventory/stock.py"].decode()
    assert "def on_hand(self, sku: str) -> int:" in files["inventory/stock.py"].decode()
    wrong = "--- a/inventory/stock.py\n+++ b/inventory/stock.py\n@@ -3,1 +3,1 @@\n-not this line\n+x\n"
    with pytest.raises(CandidatePatchError, match=r"patch failed: inventory/stock\.py:3"):
        apply_candidate_patch(task, wrong)


def test_run_tests_on_an_imported_repository_task_runs_the_projects_own_tests(
        sample_tasks_dir: Path, copy_task: Any, process_sandbox: Sandbox) -> None:
    """A task laid out as its project whose tests are all hidden (an imported SWE-bench row):
    an agent's run_tests runs the PASS_TO_PASS tests from the project's files at the base, and
    never a hidden FAIL_TO_PASS test."""
    from verify_cli.agents.environment import VisibleTests

    root = copy_task(sample_tasks_dir / INVENTORY)
    shutil.move(root / "tests", root / "starter" / "tests")  # the project's own tests, at the base
    hidden = root / "hidden_tests" / "tests"
    hidden.mkdir(parents=True)
    (hidden / "test_new.py").write_text("def test_new_behaviour():\n    assert False, 'hidden'\n")
    text = (root / "task.toml").read_text().replace(" tests'", " tests hidden_tests'")
    (root / "task.toml").write_text(text + '\n[repository]\ntest_layout = "repository"\n'
                                    'test_files = ["tests/**"]\n')
    task = load_task(root)
    visible = VisibleTests(task)
    try:
        assert visible.count == len(task.test.pass_to_pass) > 0
        candidate = {rel: p.read_bytes() for rel, p in task.starter_files().items() if rel.startswith("inventory/")}
        with Grader(process_sandbox) as grader:
            result = grader.grade(GradeRequest(visible.task, Phase.CANDIDATE, candidate=candidate))
    finally:
        visible.close()
    ran = {t.id for t in result.tests}
    assert {junit_id_of_node_id(t) for t in task.test.pass_to_pass} <= ran
    assert not any("test_new" in t for t in ran)
    kept = {junit_id_of_node_id(t) for t in task.test.pass_to_pass}
    assert all(t.outcome.ok for t in result.tests if t.id in kept)  # PASS_TO_PASS pass at the base


def test_audit_never_mutates_a_projects_test_files(sample_tasks_dir: Path, copy_task: Any) -> None:
    """A repository task whose solution ships a test file its editable globs reach (the project's
    tests, named by [repository] test_files): mutants come from its source files only."""
    from verify_cli.checks.audit.mutation import editable_sources

    root = copy_task(sample_tasks_dir / ETL)
    (root / "solution" / "orders_etl" / "test_helpers.py").write_text("def test_x():\n    assert 1 + 1 == 2\n")
    text = (root / "task.toml").read_text().replace('editable = ["', 'editable = ["orders_etl/test_helpers.py", "')
    (root / "task.toml").write_text(text + '\n[repository]\ntest_files = ["**/test_*.py"]\n')
    sources = editable_sources(load_task(root))
    assert sources and "orders_etl/test_helpers.py" not in sources
