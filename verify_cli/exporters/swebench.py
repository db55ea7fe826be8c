"""Repository tasks as SWE-bench rows, with a git repository per task for the harness to check out.

SWE-bench's harness (and SWE-Gym, SWE-smith) reads rows of ``instance_id``, ``repo``,
``base_commit``, ``patch``, ``test_patch``, ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (JSON text),
``problem_statement``, ``version``, ``environment_setup_commit``, ``hints_text`` and
``created_at``, and checks the repository out at ``base_commit``. A verify-cli task has no commit
of its own, so the export makes one: ``repos/<owner>__<name>`` beside the rows is a git
repository whose one commit (fixed author and date, so the same task always gives the same
hash) is the starter. ``patch`` is the reference as a diff against it; ``test_patch`` adds the
task's test files (visible and hidden) at their work-folder paths, so the harness, which resets
exactly the files of the test patch, always runs the task's tests. The folder is what
``verify-cli import --preset swebench --repos`` reads back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from verify_cli.errors import UsageError
from verify_cli.tasks.metadata import task_source
from verify_cli.tasks.model import Task

OWNER = "verify-cli"
_FIXED_DATE = "2000-01-01T00:00:00+00:00"


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "verify-cli", "GIT_AUTHOR_EMAIL": "export@verify-cli.invalid",
           "GIT_COMMITTER_NAME": "verify-cli", "GIT_COMMITTER_EMAIL": "export@verify-cli.invalid",
           "GIT_AUTHOR_DATE": _FIXED_DATE, "GIT_COMMITTER_DATE": _FIXED_DATE, "GIT_CONFIG_NOSYSTEM": "1",
           "HOME": str(cwd), "LC_ALL": "C"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UsageError(f"git {args[0]} failed in {cwd}: {done.stderr.strip()[:300]}",
                         hint="is git installed and the export folder writable?")
    return done.stdout


def repo_name(task: Task) -> str:
    """``owner/name`` of the repository a task's row names."""
    return f"{OWNER}/{task.id.replace('/', '-')}"


def _overlay(root: Path, files: dict[str, Path]) -> None:
    for rel, src in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            os.chmod(dest, 0o644)
        shutil.copyfile(src, dest)
        os.chmod(dest, 0o644)


def _staged_diff(root: Path, base: str) -> str:
    _git(root, "add", "-A")
    diff = _git(root, "diff", "--cached", "--binary", base)
    _git(root, "reset", "-q", "--hard", base)
    return diff


def swebench_row(task: Task, repos: Path) -> dict[str, Any]:
    """The SWE-bench row of a repository task; its repository is written under ``repos``."""
    if not task.test.fail_to_pass:
        raise ValueError("not a repository task: task.toml lists no test.fail_to_pass")
    name = repo_name(task)
    folder = repos / name.replace("/", "__")
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    _git(folder, "init", "-q", "-b", "main")
    _overlay(folder, task.starter_files())
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "--allow-empty", "-m", f"{task.id}: starter")
    base = _git(folder, "rev-parse", "HEAD").strip()
    _overlay(folder, task.solution_files())
    for rel in task.solution_removals():  # a gold patch's deletions and renames stay in the row's patch
        (folder / rel).unlink(missing_ok=True)
    patch = _staged_diff(folder, base)
    _overlay(folder, task.test_files())
    test_patch = _staged_diff(folder, base)
    source = task_source(task) or {}
    return {
        "instance_id": str(source.get("original_id") or task.id.replace("/", "__")),
        "repo": name,
        "base_commit": base,
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps(list(task.test.fail_to_pass)),
        "PASS_TO_PASS": json.dumps(list(task.test.pass_to_pass)),
        "problem_statement": task.prompt,
        "hints_text": "",
        "created_at": "",
        "version": str(source.get("version") or "1.0"),
        "environment_setup_commit": base,
        # Not SWE-bench's: how verify-cli runs the tests (the harness takes its command from
        # its own per-repository specs).
        "verify_cli_test_command": task.test.command,
        "verify_cli_task_id": task.id,
    }


def write_swebench(tasks: list[Task], out: Path) -> tuple[Path, list[tuple[str, str]]]:
    """Rows of ``tasks`` into ``out`` (a ``.jsonl`` file, or a folder getting ``swebench.jsonl``)
    with their repositories in ``repos/`` beside it; returns the file and the tasks skipped."""
    dest = out if out.suffix in (".jsonl", ".ndjson") else out / "swebench.jsonl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    repos = dest.parent / "repos"
    skipped: list[tuple[str, str]] = []
    with tempfile.NamedTemporaryFile("w", dir=dest.parent, suffix=".part", delete=False, encoding="utf-8") as fh:
        for task in tasks:
            try:
                row = swebench_row(task, repos)
            except ValueError as e:
                skipped.append((str(task.root), str(e)))
                continue
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(fh.name, dest)
    return dest, skipped
