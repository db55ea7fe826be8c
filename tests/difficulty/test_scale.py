"""A difficulty run at scale: the sample cache syncs in batches, not once per sample, a run of a
few hundred samples leaves nothing of them behind in the scratch space, and samples.parquet is
written a row group at a time."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verify_cli.difficulty.cache import SYNC_SECONDS, SampleCache
from verify_cli.difficulty.outputs import sample_rows, write_samples
from verify_cli.difficulty.runner import DifficultyOptions, DifficultyReport, TaskDifficulty, run_difficulty
from verify_cli.difficulty.samples import SampleRecord
from verify_cli.difficulty.schema import SAMPLES_SCHEMA
from verify_cli.grading.grader import Grader
from verify_cli.models import create_model_backend
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task_set
from verify_cli.tasks.model import Task

RIGHT = "def total(values):\n    return sum(values)\n"
WRONG = "def total(values):\n    return 1\n"


def _record(i: int) -> SampleRecord:
    return SampleRecord(task_id="set/a", sample_index=i, completion=RIGHT, files={"solution.py": RIGHT},
                        status="passed", score=1.0, passed=True, visible_passed=None)


def test_the_cache_syncs_once_a_second_not_once_a_sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    cache = SampleCache(tmp_path / "cache")
    for i in range(50):
        cache.append("k", _record(i))
    # Fifty appends well inside a second: each line is in the file (a killed run keeps it) ...
    lines = cache.path("k").read_text().splitlines()
    assert [json.loads(line)["sample_index"] for line in lines] == list(range(50))
    # ... and none was synced one by one (the per-line fsync cost ~6 ms a sample).
    assert len(synced) <= 1
    cache.sync()
    assert len(synced) >= 1
    assert [r.sample_index for r in SampleCache(tmp_path / "cache").load("k")] == list(range(50))


def test_the_cache_syncs_again_after_sync_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import verify_cli.difficulty.cache as cache_module

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    now = [1000.0]
    monkeypatch.setattr(cache_module.time, "monotonic", lambda: now[0])
    cache = SampleCache(tmp_path / "cache")
    cache.append("k", _record(0))
    assert synced == []
    now[0] += SYNC_SECONDS
    cache.append("k", _record(1))
    assert len(synced) == 1  # the longest a graded sample waits for the disk


def test_a_run_syncs_its_cache_at_the_end(task_set: Callable[..., tuple[Path, Path]], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    folder, replay = task_set({"a": [RIGHT, WRONG, RIGHT]})
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    tasks = [t for t in load_task_set(folder) if isinstance(t, Task)]
    with create_sandbox("process") as box:
        report = run_difficulty(tasks, create_model_backend("replay", model=str(replay)), Grader(box),
                                DifficultyOptions(samples=3, jobs=1), cache=SampleCache(tmp_path / "cache"))
    assert report.tasks[0].stats.correct == 2
    assert synced  # the graded samples reached the disk before the run returned


def _scratch_entries(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["process", pytest.param("bwrap", marks=pytest.mark.bwrap)])
def test_hundreds_of_samples_leave_no_file_in_the_scratch_space(
        backend: str, task_set: Callable[..., tuple[Path, Path]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-sample work and job folders go where TMPDIR says (scratch_root gives way to it); after
    a warm run of 200 samples, that folder holds what it held before: nothing per sample."""
    from verify_cli.sandbox.environment import candidate_harness_dir, harness_dir

    # The harness folders are made once per process, on first use, where TMPDIR then says: made
    # here first, so that this test passes run alone as it does after other grading tests.
    harness_dir(), candidate_harness_dir()
    folder, replay = task_set({"a": [RIGHT, WRONG] * 50, "b": [WRONG, RIGHT] * 50})
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile caches the folder it chose
    tasks = [t for t in load_task_set(folder) if isinstance(t, Task)]
    with create_sandbox(backend) as box, Grader(box, warm=True) as grader:
        report = run_difficulty(tasks, create_model_backend("replay", model=str(replay)), grader,
                                DifficultyOptions(samples=100, jobs=2), cache=SampleCache(tmp_path / "cache"))
        during = _scratch_entries(scratch)
    assert [t.stats.correct for t in report.tasks] == [50, 50]
    assert report.sampled == 200
    # While the grader is open only its long-lived folders remain (warm workers' own), never
    # one per sample; once it is closed, nothing.
    assert len([e for e in during if "/" not in e]) < 10, during[:20]
    assert _scratch_entries(scratch) == []


def _report(records: list[SampleRecord]) -> DifficultyReport:
    from verify_cli.difficulty.stats import task_stats
    from verify_cli.models.base import SamplingParams

    stats = task_stats((r.outcome for r in records), ks=(1,), confidence=0.95)
    task = TaskDifficulty(task_id="set/a", path="/x", bucket="solved", stats=stats, records=records)
    return DifficultyReport(tasks=[task], model_id="replay:x", params=SamplingParams(), options=DifficultyOptions())


def test_samples_parquet_is_written_a_row_group_at_a_time(tmp_path: Path) -> None:
    """Writing 20,000 samples held every row twice over (dicts, then one Arrow table): the rows
    now go out a group at a time, the same rows in the same order."""
    report = _report([_record(i) for i in range(5)])
    path = write_samples(report, tmp_path / "samples.parquet", row_group=2)
    parquet = pq.ParquetFile(path)
    assert parquet.metadata.num_row_groups == 3
    assert parquet.read().to_pylist() == pa.Table.from_pylist(sample_rows(report), schema=SAMPLES_SCHEMA).to_pylist()
    assert [r["sample_index"] for r in parquet.read().to_pylist()] == [0, 1, 2, 3, 4]


def test_samples_parquet_of_no_sample_has_the_schema(tmp_path: Path) -> None:
    table = pq.read_table(write_samples(_report([]), tmp_path / "samples.parquet"))
    assert table.num_rows == 0 and table.schema.names == SAMPLES_SCHEMA.names


def test_a_run_holds_no_sample_record_in_memory(task_set: Callable[..., tuple[Path, Path]], tmp_path: Path) -> None:
    """Each graded sample's record (completion, files, per-test outcomes) goes to the run's spill
    file as it is graded; the run keeps only what its statistics need, so its memory does not grow
    by kilobytes a sample. samples.parquet still holds every record, as the sample cache has it."""
    import gc

    folder, replay = task_set({"a": [RIGHT, WRONG] * 20, "b": [WRONG, WRONG, WRONG, RIGHT] * 10})
    tasks = [t for t in load_task_set(folder) if isinstance(t, Task)]
    cache = SampleCache(tmp_path / "cache")
    with create_sandbox("process") as box:
        report = run_difficulty(tasks, create_model_backend("replay", model=str(replay)), Grader(box),
                                DifficultyOptions(samples=40, jobs=2), cache=cache)
    gc.collect()
    assert [o for o in gc.get_objects() if type(o) is SampleRecord] == []
    assert [(t.stats.n, t.stats.correct) for t in report.tasks] == [(40, 20), (40, 10)]
    rows = pq.read_table(write_samples(report, tmp_path / "samples.parquet")).to_pylist()
    assert [(r["task_id"], r["sample_index"]) for r in rows] == (
        [("set/a", i) for i in range(40)] + [("set/b", i) for i in range(40)])
    cached = {(r.task_id, r.sample_index): r for path in sorted(cache.folder.glob("*.jsonl"))
              for r in cache.load(path.stem)}
    assert [SampleRecord.from_dict({**r, "files": dict(r["files"])}) for r in rows] == [
        cached[(r["task_id"], r["sample_index"])] for r in rows]


def test_a_resumed_run_spills_its_cached_samples_too(task_set: Callable[..., tuple[Path, Path]],
                                                     tmp_path: Path) -> None:
    folder, replay = task_set({"a": [RIGHT, WRONG, RIGHT, RIGHT]})
    tasks = [t for t in load_task_set(folder) if isinstance(t, Task)]
    cache = SampleCache(tmp_path / "cache")
    with create_sandbox("process") as box:
        backend = create_model_backend("replay", model=str(replay))
        first = run_difficulty(tasks, backend, Grader(box), DifficultyOptions(samples=2, jobs=1), cache=cache)
        again = run_difficulty(tasks, backend, Grader(box), DifficultyOptions(samples=4, jobs=1), cache=cache)
    assert (again.cached, again.generated) == (2, 2)
    assert [r.sample_index for r in again.tasks[0].records] == [0, 1, 2, 3]
    assert list(again.tasks[0].records)[:2] == list(first.tasks[0].records)
    assert again.tasks[0].stats.correct == 3


def test_the_spill_gives_back_each_record_as_it_was() -> None:
    from verify_cli.difficulty.spill import RecordSpill, SpilledRecords

    spill = RecordSpill()
    records = [_record(0), SampleRecord(task_id="set/ü", sample_index=7, completion="é\n\x00 ```", files={},
                                        status="parse_error", score=None, passed=False, visible_passed=False,
                                        tests=[{"id": "t::x", "outcome": "failed"}], problems=["no code"],
                                        token_ids=[1, 2, 3], gen_seconds=0.25, attempts=0)]
    kept = [spill.add(r) for r in records]
    assert [(k.sample_index, k.status, k.score, k.passed) for k in kept] == [(0, "passed", 1.0, True),
                                                                           (7, "parse_error", None, False)]
    view = SpilledRecords(spill, [kept[1].offset, kept[0].offset])
    assert len(view) == 2 and view[0] == records[1] and view[-1] == records[0]
    assert view[:1] == [records[1]] and list(view) == records[::-1] and view == records[::-1]
    spill.close()


def test_generation_waits_once_the_backlog_of_ungraded_completions_is_full(
        task_set: Callable[..., tuple[Path, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend faster than grading (replayed completions here) queued every completion of the
    round in memory before; now at most ``GRADING_BACKLOG`` wait for a grading thread."""
    import verify_cli.difficulty.runner as runner_module

    monkeypatch.setattr(runner_module, "GRADING_BACKLOG", 3)
    folder, replay = task_set({"a": [RIGHT, WRONG] * 8}, slow=0.1)
    tasks = [t for t in load_task_set(folder) if isinstance(t, Task)]
    waiting: list[int] = []
    with create_sandbox("process") as box:
        report = run_difficulty(tasks, create_model_backend("replay", model=str(replay)), Grader(box),
                                DifficultyOptions(samples=16, jobs=1),
                                on_progress=lambda p: waiting.append(p.generated - p.graded))
    assert report.tasks[0].stats.correct == 8
    assert max(waiting) <= 3 + 1, waiting  # the backlog, and the one just generated
