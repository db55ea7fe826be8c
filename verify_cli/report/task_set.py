"""Counts over a task set (``tasks stats``) and each task's check status, read from a
check-tasks JSON report or the check-tasks cache (never by running anything)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verify_cli.checks.cache import ResultCache
from verify_cli.checks.solvability import CacheIdentity, CheckOptions, check_cache_key
from verify_cli.errors import UsageError
from verify_cli.tasks.catalog import TaskEntry

UNCHECKED = "unchecked"
STAT_FIELDS = ("domain", "language", "kind", "difficulty", "check")


def statuses_from_report(path: Path) -> dict[str, str]:
    """task id -> verdict from ``check-tasks --json`` output."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        return {str(t["task_id"]): str(t["verdict"]) for t in doc["tasks"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a check-tasks JSON report ({e})",
                         hint="write one with 'verify-cli check-tasks PATH --json FILE'") from None


def statuses_from_cache(entries: Sequence[TaskEntry], cache_dir: Path, backend: str | CacheIdentity,
                        repeats: int) -> dict[str, str]:
    """task id -> verdict of the cached check-tasks result for the task's current content, on
    the sandbox whose cache identity ``backend`` gives (``Sandbox.cache_identity``: the same
    one check-tasks keyed its verdicts by)."""
    cache = ResultCache(cache_dir, "check-tasks")
    out: dict[str, str] = {}
    for e in entries:
        if e.task is None:
            out[e.id] = "defective"  # it does not even load
            continue
        hit = cache.get(check_cache_key(e.task, backend, CheckOptions(repeats=repeats)))
        if hit is not None:
            out[e.id] = _verdict(hit)
    return out


def _verdict(report: dict[str, Any]) -> str:
    from verify_cli.checks.report import TaskReport

    try:
        return TaskReport.from_dict(report).verdict.value
    except (KeyError, TypeError, ValueError):
        return UNCHECKED


def task_set_stats(entries: Sequence[TaskEntry], statuses: dict[str, str]) -> dict[str, Any]:
    """Counts by domain, language, kind, difficulty bucket and check status."""
    counts: dict[str, Counter[str]] = {f: Counter() for f in STAT_FIELDS}
    for e in entries:
        counts["domain"][e.domain] += 1
        counts["language"][e.language] += 1
        counts["kind"][e.kind] += 1
        counts["difficulty"][e.difficulty] += 1
        counts["check"][statuses.get(e.id, UNCHECKED)] += 1
    return {"tasks": len(entries), "failed_to_load": sum(e.task is None for e in entries),
            **{f: dict(c.most_common()) for f, c in counts.items()}}
