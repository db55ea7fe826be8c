"""The ``.git``-mining probe of repository tasks: an agent that reads the fix from the history its
starter ships.

Where a task's starter holds a ``.git``, the probe looks for commits there that ``HEAD``'s history
does not hold (a later commit on any ref, a tag, a stash, a reflog entry, a stray object) and
submits the editable, non-test files of the newest such commit that changes any. A score means an
agent can read the fix from the repository (published: 21 of 100 SWE-bench Pro tasks were solved
so). The history is read in a private copy, with hooks, fsmonitor and system configuration off.
The probe does not apply to a starter without ``.git`` (every imported task: ``git archive``
leaves none) or whose ``.git`` holds nothing beyond ``HEAD``'s history.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from verify_cli.checks.git_history import GIT_DIR, _git, starter_git_dir
from verify_cli.checks.probes.model import Probe, ProbeContext, ProbeTarget
from verify_cli.grading.workspace import is_repository_test_file
from verify_cli.tasks.paths import matches_any

#: The newest commits beyond HEAD the probe tries, at most.
MAX_COMMITS = 10


def future_commits(git_dir: Path) -> list[str]:
    """The commits ``git_dir`` holds that ``HEAD``'s history does not, newest first (by
    committer date). ``git_dir`` must be a private copy: git runs in it."""
    head = _git(git_dir, "rev-list", "HEAD")
    present = _git(git_dir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
    if head.returncode != 0 or present.returncode != 0:
        return []
    past = set(head.stdout.split())
    commits = [line.split()[0] for line in present.stdout.splitlines()
               if line.endswith(" commit") and line.split()[0] not in past]
    if not commits:
        return []
    # Dated through stdin: a full clone at an old HEAD holds thousands of later commits.
    dated = subprocess.run(["git", "--git-dir", str(git_dir), "-c", "core.hooksPath=/dev/null", "log", "--no-walk",
                            "--stdin", "--format=%ct %H"], input="\n".join(commits) + "\n", capture_output=True,
                           text=True, timeout=300, check=False, env=_env(git_dir))
    order = sorted((line.split() for line in dated.stdout.splitlines() if len(line.split()) == 2), reverse=True)
    return [sha for _, sha in order]


def _env(git_dir: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(git_dir),
            "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"}


def read_fix_from_git_history(ctx: ProbeContext) -> dict[str, bytes] | None:
    """The editable files of the newest commit beyond ``HEAD`` that changes any; None where the
    starter ships no such history."""
    git_dir = starter_git_dir(ctx.task)
    if git_dir is None or shutil.which("git") is None:
        return None
    task = ctx.task
    with tempfile.TemporaryDirectory(prefix="verify-git-probe-") as tmp:
        copy = Path(tmp) / "repo.git"
        shutil.copytree(git_dir, copy, symlinks=True)
        for commit in future_commits(copy)[:MAX_COMMITS]:
            changed = _git(copy, "diff", "--name-only", "--no-renames", "HEAD", commit)
            files: dict[str, bytes] = {}
            for rel in changed.stdout.splitlines():  # the starter's .git is at its top: paths are the same
                if (rel.split("/", 1)[0] == GIT_DIR or not matches_any(task.editable, rel)
                        or is_repository_test_file(task, rel)):
                    continue
                shown = _git_bytes(copy, f"{commit}:{rel}")
                if shown is not None:
                    files[rel] = shown
            if files:
                return files
    return None


def _git_bytes(git_dir: Path, spec: str) -> bytes | None:
    done = subprocess.run(["git", "--git-dir", str(git_dir), "-c", "core.hooksPath=/dev/null", "cat-file", "blob",
                           spec], capture_output=True, timeout=120, check=False, env=_env(git_dir))
    return done.stdout if done.returncode == 0 else None


def git_history_probe(language: str) -> Probe:
    """The probe, for a language's battery (it reads files, whatever the language)."""
    return Probe("read-fix-from-git-history", language, ProbeTarget.TESTS,
                 "submits the editable files of a commit the starter's .git holds beyond HEAD (a later "
                 "commit, a tag, a stash, the reflog, a stray object)",
                 "the repository's git history holds the fix, and an agent can read it (check-tasks' "
                 "git-history check names what; ship the starter without that history)",
                 read_fix_from_git_history)
