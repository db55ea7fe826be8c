"""A starter that ships a git repository must not hold the future: later commits, tags, stashes,
reflogs and stray objects are found and named; a history that ends at the base commit passes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import write_task
from verify_cli.checks.git_history import examine, git_history_findings
from verify_cli.tasks.loader import load_task

ENV = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
       "GIT_COMMITTER_EMAIL": "a@b", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=ENV).stdout


def repo_task(tmp_path: Path, future: str) -> Path:
    """A task whose starter is a repository at its base commit, with ``future`` left in it."""
    task = write_task(tmp_path / f"task-{future}")
    starter = task / "starter"
    git(starter, "init", "-q", "-b", "main")
    git(starter, "add", "-A")
    git(starter, "commit", "-q", "-m", "base")
    fixed = (task / "solution" / "solution.py").read_text()
    broken = (starter / "solution.py").read_text()
    if future == "later-commit":  # the fix on another branch
        git(starter, "checkout", "-q", "-b", "fix")
        (starter / "solution.py").write_text(fixed)
        git(starter, "commit", "-q", "-am", "fix")
        git(starter, "checkout", "-q", "main")
    elif future == "tag":  # the fix reachable from a tag only
        git(starter, "checkout", "-q", "--detach")
        (starter / "solution.py").write_text(fixed)
        git(starter, "commit", "-q", "-am", "fix")
        git(starter, "tag", "v2")
        git(starter, "checkout", "-q", "main")
    elif future == "reflog":  # the fix committed, then reset away: in the reflog and the objects
        (starter / "solution.py").write_text(fixed)
        git(starter, "commit", "-q", "-am", "fix")
        git(starter, "reset", "-q", "--hard", "HEAD~1")
    elif future == "stash":
        (starter / "solution.py").write_text(fixed)
        git(starter, "stash", "-q")
    elif future == "clean":  # one commit, no reflog: what an importer ships
        git(starter, "reflog", "expire", "--expire=now", "--all")
    assert (starter / "solution.py").read_text() == broken
    return task


@pytest.mark.parametrize("future", ["later-commit", "tag", "reflog", "stash"])
def test_a_starter_repository_holding_the_future_is_caught(tmp_path: Path, future: str) -> None:
    findings = git_history_findings(load_task(repo_task(tmp_path, future)))
    assert findings is not None and not findings.clean
    text = findings.describe()
    assert "an agent can read the future" in text and "Remedy" in text
    if future in ("later-commit", "tag", "reflog"):
        assert findings.extra_objects > 0  # the fix's commit, tree and blob
    if future == "tag":
        assert "refs/tags/v2" in findings.extra_refs
    if future == "stash":
        assert "refs/stash" in findings.extra_refs


def test_a_history_that_ends_at_the_base_commit_passes(tmp_path: Path) -> None:
    findings = git_history_findings(load_task(repo_task(tmp_path, "clean")))
    assert findings is not None and findings.clean, findings


def test_a_starter_without_git_is_not_examined(tmp_path: Path) -> None:
    assert git_history_findings(load_task(write_task(tmp_path / "plain"))) is None


def test_check_tasks_fails_the_task_for_its_history(tmp_path: Path, process_sandbox: object) -> None:
    from verify_cli.checks.report import TaskVerdict
    from verify_cli.checks.solvability import CheckOptions, check_tasks
    from verify_cli.grading.grader import Grader
    from verify_cli.tasks.loader import load_task_set

    repo_task(tmp_path / "set", "later-commit")
    (report,) = check_tasks(load_task_set(tmp_path / "set"), Grader(process_sandbox),  # type: ignore[arg-type]
                            CheckOptions(repeats=1))
    assert report.verdict is TaskVerdict.DEFECTIVE
    assert [c.name for c in report.defects] == ["git-history"]


def test_the_examination_runs_no_program_of_the_repository(tmp_path: Path) -> None:
    """A hostile .git/config (fsmonitor, hooks) runs nothing while it is examined."""
    task = repo_task(tmp_path, "clean")
    marker = tmp_path / "ran"
    git_dir = task / "starter" / ".git"
    with open(git_dir / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = {tmp_path}\n")
    hook = tmp_path / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    assert examine(git_dir).clean
    assert not marker.exists()
