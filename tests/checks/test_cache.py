"""The result cache: an unchanged task on the same backend is served without a sandbox run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from verify_cli.checks.cache import ResultCache, cache_key, default_cache_dir
from verify_cli.checks.report import TaskReport, TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.grading import Grader
from verify_cli.tasks import load_task_set

OPTIONS = CheckOptions(repeats=2, jobs=2)
RUNS_PER_TASK = OPTIONS.repeats + 1


def run_check(
    root: Path,
    sandbox: Any,
    cache: ResultCache | None,
    *,
    backend_id: str = "process",
    options: CheckOptions = OPTIONS,
) -> list[TaskReport]:
    return check_tasks(
        load_task_set(root), Grader(sandbox), options, cache=cache, backend_id=backend_id
    )


def test_second_run_is_served_from_cache(
    make_task: Any, counting_sandbox: Any, tmp_path: Path
) -> None:
    root = make_task(fast=True)
    cache = ResultCache(tmp_path / "cache", "check-tasks")

    start = time.monotonic()
    (first,) = run_check(root, counting_sandbox, cache)
    cold = time.monotonic() - start
    assert counting_sandbox.runs == RUNS_PER_TASK
    assert first.cached is False
    assert first.verdict is TaskVerdict.SOUND

    start = time.monotonic()
    (second,) = run_check(root, counting_sandbox, cache)
    warm = time.monotonic() - start
    assert counting_sandbox.runs == RUNS_PER_TASK  # no sandbox run at all
    assert second.cached is True
    assert warm < cold / 5
    assert second.verdict is TaskVerdict.SOUND
    assert [c.to_dict() for c in second.checks] == [c.to_dict() for c in first.checks]
    assert second.runs == first.runs


def test_changing_a_task_file_invalidates(
    make_task: Any, counting_sandbox: Any, tmp_path: Path
) -> None:
    root = make_task(fast=True)
    cache = ResultCache(tmp_path / "cache", "check-tasks")
    run_check(root, counting_sandbox, cache)
    assert counting_sandbox.runs == RUNS_PER_TASK

    # The starter now solves the task: a changed file must be rechecked, and the new defect found.
    (root / "starter" / "solution.py").write_text("def total(values):\n    return sum(values)\n")
    (report,) = run_check(root, counting_sandbox, cache)
    assert counting_sandbox.runs == 2 * RUNS_PER_TASK
    assert report.cached is False
    assert [c.name for c in report.defects] == ["starter-fails"]


def test_other_backend_or_repeats_miss(
    make_task: Any, counting_sandbox: Any, tmp_path: Path
) -> None:
    root = make_task(fast=True)
    cache = ResultCache(tmp_path / "cache", "check-tasks")
    run_check(root, counting_sandbox, cache, backend_id="process")
    run_check(root, counting_sandbox, cache, backend_id="bwrap")
    assert counting_sandbox.runs == 2 * RUNS_PER_TASK
    run_check(root, counting_sandbox, cache, options=CheckOptions(repeats=1, jobs=2))
    assert counting_sandbox.runs == 2 * RUNS_PER_TASK + 2


def test_no_cache_runs_every_time(make_task: Any, counting_sandbox: Any, tmp_path: Path) -> None:
    root = make_task(fast=True)
    for _ in range(2):
        (report,) = run_check(root, counting_sandbox, None)
        assert report.cached is False
    assert counting_sandbox.runs == 2 * RUNS_PER_TASK


def test_only_changed_tasks_rerun(make_task: Any, counting_sandbox: Any, tmp_path: Path) -> None:
    def other_id(doc: dict[str, Any]) -> None:
        doc["id"] = "demo/other"

    make_task("set/a", fast=True)
    second = make_task("set/b", mutate=other_id, fast=True)
    cache = ResultCache(tmp_path / "cache", "check-tasks")
    run_check(tmp_path / "set", counting_sandbox, cache)
    assert counting_sandbox.runs == 2 * RUNS_PER_TASK
    (second / "prompt.md").write_text("# Sum, reworded\n")
    reports = run_check(tmp_path / "set", counting_sandbox, cache)
    assert counting_sandbox.runs == 3 * RUNS_PER_TASK
    assert [r.cached for r in reports] == [True, False]


def test_corrupt_entries_are_misses(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, "ns")
    key = cache_key("x")
    assert cache.get(key) is None
    cache.put(key, {"a": 1})
    assert cache.get(key) == {"a": 1}
    (tmp_path / "ns" / f"{key}.json").write_text("{not json")
    assert cache.get(key) is None
    (tmp_path / "ns" / f"{key}.json").write_text(json.dumps([1, 2]))
    assert cache.get(key) is None


def test_unwritable_cache_is_not_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = ResultCache(blocker, "ns")
    cache.put(cache_key("x"), {"a": 1})  # must not raise
    assert cache.get(cache_key("x")) is None


def test_keys_depend_on_every_part() -> None:
    assert cache_key("a", "b") != cache_key("a", "c")
    assert cache_key("ab", "c") != cache_key("a", "bc")
    assert cache_key("a", "b") == cache_key("a", "b")


def test_default_cache_dir_follows_xdg(monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "verify-cli"


def test_cache_is_bounded_least_recently_used_first(tmp_path: Path) -> None:
    import os

    cache = ResultCache(tmp_path, "ns", max_entries=10)
    for i in range(10):
        cache.put(f"k{i}", {"i": i})
        os.utime(cache.folder / f"k{i}.json", (1000 + i, 1000 + i))
    assert cache.get("k0") == {"i": 0}  # a hit makes k0 the most recently used
    cache.put("k10", {"i": 10})  # 11 > 10: evict down to 9
    left = sorted(p.stem for p in cache.folder.glob("*.json"))
    assert len(left) == 9
    assert "k0" in left and "k10" in left
    assert "k1" not in left and "k2" not in left


def test_a_failed_cache_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path, "ns")
    cache.put("ok", {"a": 1})
    cache.put("bad", {"a": object()})  # not JSON: the write fails half-way
    assert sorted(p.name for p in cache.folder.iterdir()) == ["ok.json"]
    assert cache.get("bad") is None
