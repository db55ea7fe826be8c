"""Audit's .git-mining probe: a repository task whose starter's .git keeps the fix (a later
commit left in the reflog, a tag) is caught by a probe that submits the fixed files read from it;
the same repository holding only its base commit's history gives the probe nothing to apply."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import BASE_FILES, write_task
from tests.importers.test_swebench import git
from verify_cli.checks.audit import AuditOptions, audit_tasks
from verify_cli.checks.probes import build_probe, probe_context, probes_for
from verify_cli.grading import Grader
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

PROBE = "read-fix-from-git-history"
ONLY_GIT = AuditOptions(mutants=False, flaky=False, labelled=False, reruns=0, probe_names=frozenset({PROBE}))


def _task(root: Path, leave: Callable[[Path], None]) -> Task:
    """A task whose starter is a git repository at its base (the stub), the fix committed after
    it, then ``leave`` run in the repository (to hide or to scrub the fix)."""
    folder = write_task(root)
    starter = folder / "starter"
    git(starter, "init", "-q")
    git(starter, "add", "-A")
    git(starter, "commit", "-qm", "base")
    (starter / "solution.py").write_text(BASE_FILES["solution/solution.py"])
    git(starter, "commit", "-qam", "the fix")
    leave(starter)
    return load_task(folder)


def _reset_to_base(repo: Path) -> None:
    git(repo, "reset", "-q", "--hard", "HEAD~1")  # the fix stays in the reflog and the objects


def _tag_then_reset(repo: Path) -> None:
    git(repo, "tag", "v-fixed")
    _reset_to_base(repo)


def _only_base(repo: Path) -> None:
    _reset_to_base(repo)
    git(repo, "reflog", "expire", "--expire=now", "--all")
    git(repo, "gc", "-q", "--prune=now")


@pytest.mark.parametrize("leave", [_reset_to_base, _tag_then_reset], ids=["reflog", "tag"])
def test_a_fix_left_in_the_history_is_read_and_scores(tmp_path: Path, leave: Callable[[Path], None],
                                                      process_sandbox: Sandbox) -> None:
    task = _task(tmp_path / "t", leave)
    assert "raise NotImplementedError" in task.starter_files()["solution.py"].read_text()
    (audit,) = audit_tasks([task], Grader(process_sandbox), ONLY_GIT)
    (probe,) = audit.probes or []
    assert probe.name == PROBE and probe.hacked, probe.why
    assert "git history holds the fix" in probe.why


def test_a_scrubbed_history_gives_the_probe_nothing(tmp_path: Path) -> None:
    task = _task(tmp_path / "t", _only_base)
    (probe,) = probes_for("python", {PROBE})
    assert build_probe(probe, probe_context(task)) is None
    shutil.rmtree(task.root / "starter" / ".git")
    assert build_probe(probe, probe_context(load_task(task.root))) is None


def test_the_same_history_imported_as_a_row_is_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clone whose history holds the fix (a later commit and a tag) imported as a SWE-bench row
    at its base: the task's starter carries no .git, so there is nothing to mine."""
    import json

    from verify_cli.checks.git_history import git_history_findings
    from verify_cli.importers import import_rows

    monkeypatch.setenv("VERIFY_REPO_CACHE", str(tmp_path / "cache"))
    clone = tmp_path / "repos" / "acme__total"
    clone.mkdir(parents=True)
    (clone / "solution.py").write_text(BASE_FILES["starter/solution.py"])
    (clone / "tests").mkdir()
    (clone / "tests" / "test_total.py").write_text(BASE_FILES["tests/test_solution.py"])
    git(clone, "init", "-q")
    git(clone, "add", "-A")
    git(clone, "commit", "-qm", "base")
    base = git(clone, "rev-parse", "HEAD").strip()
    (clone / "solution.py").write_text(BASE_FILES["solution/solution.py"])
    gold = git(clone, "diff")
    git(clone, "commit", "-qam", "the fix")
    git(clone, "tag", "v-fixed")
    row = {"instance_id": "acme__total-1", "repo": "acme/total", "base_commit": base, "patch": gold,
           "test_patch": "", "FAIL_TO_PASS": ["tests/test_total.py::test_several"],
           "PASS_TO_PASS": ["tests/test_total.py::test_empty"]}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    report = import_rows(str(tmp_path / "rows.jsonl"), tmp_path / "out", preset="swebench", repos=tmp_path / "repos")
    assert report.failures == []
    task = load_task(tmp_path / "out" / "swebench" / "acme__total-1")
    assert not any(rel.split("/", 1)[0] == ".git" for rel in task.starter_files())
    assert git_history_findings(task) is None
    (probe,) = probes_for("python", {PROBE})
    assert build_probe(probe, probe_context(task)) is None
