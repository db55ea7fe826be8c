"""No future in the past: a starter that ships a git repository holds only the base commit's history.

An agent that can read a task's ``.git`` can read the fix from a later commit, a tag, a stash,
the reflog, a remote-tracking ref or a loose object left behind (published: 21 of 100 SWE-bench
Pro tasks so). A starter's ``.git`` must hold nothing that is not reachable from its ``HEAD``:
every object present is one ``git rev-list --objects HEAD`` lists, and no ref but ``HEAD``'s own
branch exists. Tasks whose starter has no ``.git`` (every imported repository task: ``git
archive`` leaves none) pass without a look.

The repository is examined in a private copy with hooks, fsmonitor and system configuration
switched off: git runs no program of the task's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from verify_cli.tasks.model import Task

GIT_DIR = ".git"


@dataclass(frozen=True)
class HistoryFindings:
    """What a starter's ``.git`` holds beyond its ``HEAD``'s history."""

    extra_objects: int
    extra_refs: tuple[str, ...]
    reflog: bool
    error: str = ""

    @property
    def clean(self) -> bool:
        return not (self.extra_objects or self.extra_refs or self.reflog or self.error)

    def describe(self) -> str:
        if self.error:
            return f"the starter's .git could not be examined: {self.error}"
        parts = []
        if self.extra_objects:
            parts.append(f"{self.extra_objects} object(s) not reachable from HEAD (a later commit, a stash, "
                         "a dropped branch)")
        if self.extra_refs:
            shown = ", ".join(self.extra_refs[:4]) + (f" (+{len(self.extra_refs) - 4})" if len(self.extra_refs) > 4
                                                      else "")
            parts.append(f"refs beyond HEAD's branch: {shown}")
        if self.reflog:
            parts.append("a reflog")
        return ("the starter's .git holds " + "; ".join(parts)
                + ": an agent can read the future from it. Remedy: ship the tree without .git, or a "
                  "repository holding only the base commit's history (git clone --single-branch --no-tags, "
                  "then git reflog expire --expire=now --all && git gc --prune=now)")


def _git(git_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(git_dir),
           "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(["git", "--git-dir", str(git_dir), "-c", "core.hooksPath=/dev/null",
                           "-c", "core.fsmonitor=false", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def starter_git_dir(task: Task) -> Path | None:
    """The host folder of the starter's ``.git``, or None where the starter has none."""
    files = task.starter_files()
    marker = next((p for rel, p in files.items() if rel.split("/", 1)[0] == GIT_DIR), None)
    if marker is None:
        return None
    path = marker
    while path.name != GIT_DIR:
        path = path.parent
    return path


def examine(git_dir: Path) -> HistoryFindings:
    """What ``git_dir`` (a repository's ``.git``) holds beyond its ``HEAD``'s history."""
    if shutil.which("git") is None:
        return HistoryFindings(0, (), False, "git is not installed")
    with tempfile.TemporaryDirectory(prefix="verify-git-") as tmp:
        copy = Path(tmp) / "repo.git"
        shutil.copytree(git_dir, copy, symlinks=True)
        head = _git(copy, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        if head.returncode != 0:
            return HistoryFindings(0, (), False, "HEAD names no commit")
        reachable = _git(copy, "rev-list", "--objects", "HEAD")
        present = _git(copy, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
        if reachable.returncode != 0 or present.returncode != 0:
            return HistoryFindings(0, (), False, (reachable.stderr or present.stderr).strip()[:200])
        allowed = {line.split()[0] for line in reachable.stdout.splitlines() if line.strip()}
        extra = {line.strip() for line in present.stdout.splitlines() if line.strip()} - allowed
        branch = _git(copy, "symbolic-ref", "-q", "HEAD").stdout.strip()
        refs = _git(copy, "for-each-ref", "--format=%(refname)").stdout.split()
        extra_refs = tuple(r for r in refs if r != branch)
        if (copy / "refs" / "stash").exists() and "refs/stash" not in extra_refs:
            extra_refs = (*extra_refs, "refs/stash")
        logs = copy / "logs"
        reflog = logs.is_dir() and any(p.is_file() and p.stat().st_size for p in logs.rglob("*"))
        return HistoryFindings(len(extra), extra_refs, reflog)


def git_history_findings(task: Task) -> HistoryFindings | None:
    """:func:`examine` of the starter's ``.git``; None where the starter has none."""
    git_dir = starter_git_dir(task)
    return examine(git_dir) if git_dir is not None else None


__all__ = ["HistoryFindings", "examine", "git_history_findings", "starter_git_dir"]
