"""difficulty's outputs written with pyarrow alone are the files the libraries they replace write:
the re-bucketed data set byte for byte as ``datasets``' ``save_to_disk`` and ``to_parquet`` write
it (its random fingerprint aside), and samples.parquet byte for byte as the row-dict writer wrote
it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verify_cli.difficulty.outputs import DATASET_SCHEMA, iter_sample_rows, write_samples
from verify_cli.difficulty.runner import DifficultyOptions, DifficultyReport, TaskDifficulty
from verify_cli.difficulty.samples import SampleRecord
from verify_cli.difficulty.schema import SAMPLES_SCHEMA
from verify_cli.difficulty.stats import task_stats
from verify_cli.models.base import SamplingParams
from verify_cli.report import hf_dataset


def _row(i: int, bucket: str, prompt_chars: int = 50) -> dict[str, Any]:
    return {"task_id": f"set/t{i}", "path": f"/tasks/t{i}", "bucket": bucket, "domain": "coding",
            "language": "python" if i % 3 else "", "prompt": "Implement `f`. " * (i % prompt_chars),
            "n": 4 + i % 3, "correct": i % 5, "pass_rate": None if i % 7 == 0 else (i % 5) / 4,
            "wilson_low": 0.01 * (i % 9), "wilson_high": 1.0 - 0.01 * (i % 11), "model": "replay:x"}


def _features() -> datasets.Features:
    return datasets.Features.from_arrow_schema(DATASET_SCHEMA)


def _by_datasets(splits: dict[str, list[dict[str, Any]]], out: Path) -> None:
    datasets.disable_progress_bars()
    dd = datasets.DatasetDict({b: datasets.Dataset.from_list(rows, features=_features()) for b, rows in splits.items()})
    dd.save_to_disk(str(out / "dataset"))
    (out / "buckets").mkdir()
    for name, ds in dd.items():
        ds.to_parquet(str(out / "buckets" / f"{name}.parquet"))


def _by_pyarrow(splits: dict[str, list[dict[str, Any]]], out: Path) -> None:
    tables = {b: pa.Table.from_pylist(rows, schema=DATASET_SCHEMA) for b, rows in splits.items()}
    hf_dataset.save_dataset_dict(tables, out / "dataset")
    (out / "buckets").mkdir()
    for name, table in tables.items():
        hf_dataset.write_parquet(table, out / "buckets" / f"{name}.parquet")


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("sizes", [{"hard": 1}, {"unsolved": 3, "medium": 2, "easy": 2600}])
def test_the_data_set_is_the_files_datasets_writes(tmp_path: Path, sizes: dict[str, int]) -> None:
    # 2,600 rows: the Arrow stream holds three batches (datasets writes 1,000 rows a batch).
    splits = {b: [_row(i, b) for i in range(n)] for b, n in sizes.items()}
    _by_datasets(splits, tmp_path / "ref")
    _by_pyarrow(splits, tmp_path / "ours")
    ref, ours = _files(tmp_path / "ref"), _files(tmp_path / "ours")
    assert sorted(ours) == sorted(ref)
    for name in ref:
        if name.endswith("state.json"):  # the fingerprint is random in both
            a, b = json.loads(ref[name]), json.loads(ours[name])
            assert len(b.pop("_fingerprint")) == len(a.pop("_fingerprint")) == 16
            assert a == b
            continue
        assert ours[name] == ref[name], name
    loaded = datasets.load_from_disk(str(tmp_path / "ours" / "dataset"))
    assert {b: len(ds) for b, ds in loaded.items()} == sizes
    assert loaded[next(iter(sizes))].features == _features()
    assert loaded[next(iter(sizes))][0] == splits[next(iter(sizes))][0]


def test_a_column_datasets_has_no_plain_value_for_is_refused() -> None:
    with pytest.raises(TypeError, match="'xs'"):
        hf_dataset.features_dict(pa.schema([("xs", pa.list_(pa.int32()))]))


def _record(i: int) -> SampleRecord:
    files = {} if i % 4 == 3 else {"solution.py": f"def f():\n    return {i}\n", "b/c.py": "x = 1\n"}
    return SampleRecord(task_id=f"set/t{i % 3}", sample_index=i, completion=f"```python\n{i}\n```", files=files,
                        status=("passed", "failed", "timeout", "parse_error")[i % 4], score=None if i % 5 == 0 else 0.5,
                        passed=i % 4 == 0, visible_passed=(None, True, False)[i % 3],
                        tests=[{"id": f"tests/test_x.py::test_{j}", "outcome": "passed"} for j in range(i % 3)],
                        problems=["oops"] * (i % 2), finish_reason="stop", token_ids=list(range(i % 4)),
                        gen_seconds=0.1 * i, grade_seconds=0.2, attempts=i % 3)


def test_samples_parquet_is_the_file_the_row_writer_wrote(tmp_path: Path) -> None:
    records = [_record(i) for i in range(7)]
    stats = task_stats((r.outcome for r in records), ks=(1,), confidence=0.95)
    task = TaskDifficulty(task_id="set/a", path="/x", bucket="medium", stats=stats, records=records)
    report = DifficultyReport(tasks=[task], model_id="replay:x", params=SamplingParams(), options=DifficultyOptions())
    ours = write_samples(report, tmp_path / "ours.parquet", row_group=3)
    rows = list(iter_sample_rows(report))
    with pq.ParquetWriter(tmp_path / "ref.parquet", SAMPLES_SCHEMA) as writer:  # the writer it replaced
        for start in range(0, len(rows), 3):
            writer.write_table(pa.Table.from_pylist(rows[start:start + 3], schema=SAMPLES_SCHEMA))
    assert ours.read_bytes() == (tmp_path / "ref.parquet").read_bytes()
