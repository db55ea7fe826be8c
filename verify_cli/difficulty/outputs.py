"""What a difficulty run writes: difficulty.parquet, samples.parquet, the re-bucketed data set
(in ``datasets``' format, written with pyarrow), the measured difficulty in each task.toml, and a histogram PNG."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from verify_cli.difficulty.buckets import BUCKETS, DEFECTIVE, PROMPT_TOO_LONG, SOLVED, UNSAMPLED, UNSOLVED
from verify_cli.difficulty.runner import DifficultyReport, TaskDifficulty
from verify_cli.difficulty.samples import SampleRecord
from verify_cli.difficulty.schema import DIFFICULTY_SCHEMA, SAMPLES_SCHEMA
from verify_cli.errors import UsageError
from verify_cli.report import hf_dataset
from verify_cli.sampling.status import SampleStatus

DIFFICULTY_FILE = "difficulty.parquet"
SAMPLES_FILE = "samples.parquet"
DATASET_DIR = "dataset"
BUCKET_PARQUET_DIR = "buckets"
HISTOGRAM_FILE = "pass_rates.png"


def difficulty_rows(report: DifficultyReport) -> list[dict[str, Any]]:
    rows = []
    for t in report.tasks:
        s = t.stats
        rows.append({
            "task_id": t.task_id, "path": t.path, "bucket": t.bucket, "n": s.n, "correct": s.correct,
            "pass_rate": s.pass_rate, "wilson_low": s.wilson_low, "wilson_high": s.wilson_high,
            "confidence": report.options.confidence, "pass_at_k": list(s.pass_at.items()),
            "mean_score": s.mean_score, "visible_pass_rate": s.visible_pass_rate,
            "visible_pass_hidden_fail": s.visible_pass_hidden_fail,
            **{k.value: s.status_counts.get(k.value, 0) for k in SampleStatus},
            "prompt_tokens": t.prompt_tokens,
            "stopped_early": t.stopped_early, "defect": t.defect, "model": report.model_id,
        })
    return rows


#: Samples per row group of samples.parquet: the rows are converted and written a group at a
#: time, so writing 20,000 samples holds one group's rows in memory, not every sample's twice over.
SAMPLE_ROW_GROUP = 1024


def _sample_row(r: SampleRecord, model: str) -> dict[str, Any]:
    d = r.to_dict()
    d["files"] = list(r.files.items())
    d["model"] = model
    return {name: d.get(name) for name in SAMPLES_SCHEMA.names}


def iter_sample_rows(report: DifficultyReport) -> Iterator[dict[str, Any]]:
    """The rows of samples.parquet, one sample at a time, task by task."""
    for t in report.tasks:
        for r in t.records:
            yield _sample_row(r, report.model_id)


def sample_rows(report: DifficultyReport) -> list[dict[str, Any]]:
    return list(iter_sample_rows(report))


def _iter_records(report: DifficultyReport) -> Iterator[SampleRecord]:
    for t in report.tasks:
        yield from t.records


#: samples.parquet's columns other than ``files`` and ``model``, each a record's attribute
_RECORD_COLUMNS = tuple(n for n in SAMPLES_SCHEMA.names if n not in ("files", "model"))


def sample_table(records: Sequence[SampleRecord], model: str) -> pa.Table:
    """The rows of ``records`` as samples.parquet holds them, built a column at a time (the
    same table as ``pa.Table.from_pylist`` of :func:`iter_sample_rows`' rows, without a dict
    per sample)."""
    columns: dict[str, list[Any]] = {n: [getattr(r, n) for r in records] for n in _RECORD_COLUMNS}
    columns["files"] = [list(r.files.items()) for r in records]
    columns["model"] = [model] * len(records)
    return pa.Table.from_pydict({n: columns[n] for n in SAMPLES_SCHEMA.names}, schema=SAMPLES_SCHEMA)


def write_samples(report: DifficultyReport, path: Path, *, row_group: int = SAMPLE_ROW_GROUP) -> Path:
    """samples.parquet, written :data:`SAMPLE_ROW_GROUP` rows at a time."""
    with pq.ParquetWriter(path, SAMPLES_SCHEMA) as writer:
        batch: list[SampleRecord] = []
        written = 0
        for record in _iter_records(report):
            batch.append(record)
            if len(batch) >= row_group:
                writer.write_table(sample_table(batch, report.model_id))
                written, batch = written + len(batch), []
        if batch or not written:  # the last rows; an empty file still has its (empty) row group
            writer.write_table(sample_table(batch, report.model_id))
    return path


def write_tables(report: DifficultyReport, out: Path) -> tuple[Path, Path]:
    """difficulty.parquet and samples.parquet under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    diff = out / DIFFICULTY_FILE
    pq.write_table(pa.Table.from_pylist(difficulty_rows(report), schema=DIFFICULTY_SCHEMA), diff)
    return diff, write_samples(report, out / SAMPLES_FILE)


def select_buckets(keep: Sequence[str] | None, drop_extremes: bool) -> tuple[str, ...]:
    """The buckets the data set keeps: ``keep`` as given, else every bucket but ``defective``,
    ``unsampled`` and ``prompt_too_long`` (less ``unsolved`` and ``solved`` with ``drop_extremes``)."""
    if keep:
        unknown = [b for b in keep if b not in BUCKETS]
        if unknown:
            raise UsageError(f"--keep: unknown bucket {unknown[0]!r}", hint=f"buckets: {', '.join(BUCKETS)}")
        chosen = tuple(keep)
    else:
        chosen = tuple(b for b in BUCKETS if b not in (DEFECTIVE, UNSAMPLED, PROMPT_TOO_LONG))
    if drop_extremes:
        chosen = tuple(b for b in chosen if b not in (UNSOLVED, SOLVED))
    return chosen


def _dataset_row(t: TaskDifficulty, model: str) -> dict[str, Any]:
    s = t.stats
    return {"task_id": t.task_id, "path": t.path, "bucket": t.bucket, "domain": t.domain, "language": t.language,
            "prompt": t.prompt, "n": s.n, "correct": s.correct, "pass_rate": s.pass_rate,
            "wilson_low": s.wilson_low, "wilson_high": s.wilson_high, "model": model}


#: The re-bucketed data set's columns (each bucket's split of ``dataset/`` and its
#: ``buckets/*.parquet``); the ``datasets`` features are these types.
DATASET_SCHEMA = pa.schema([
    ("task_id", pa.string()), ("path", pa.string()), ("bucket", pa.string()), ("domain", pa.string()),
    ("language", pa.string()), ("prompt", pa.string()), ("n", pa.int32()), ("correct", pa.int32()),
    ("pass_rate", pa.float64()), ("wilson_low", pa.float64()), ("wilson_high", pa.float64()),
    ("model", pa.string())])


def write_dataset(report: DifficultyReport, out: Path, buckets: Iterable[str]) -> dict[str, int]:
    """The re-bucketed data set: a ``datasets.DatasetDict`` keyed by bucket (buckets with at least
    one task) saved as ``save_to_disk`` does under ``out/dataset``, and one Parquet file per
    bucket under ``out/buckets`` as ``Dataset.to_parquet`` writes it (both with pyarrow alone:
    :mod:`verify_cli.report.hf_dataset`). Returns the task count per bucket written."""
    wanted = list(buckets)
    by_bucket: dict[str, list[dict[str, Any]]] = {}
    for t in report.tasks:
        if t.bucket in wanted:
            by_bucket.setdefault(t.bucket, []).append(_dataset_row(t, report.model_id))
    splits = {b: pa.Table.from_pylist(by_bucket[b], schema=DATASET_SCHEMA) for b in wanted if b in by_bucket}
    hf_dataset.save_dataset_dict(splits, out / DATASET_DIR)
    parquet_dir = out / BUCKET_PARQUET_DIR
    parquet_dir.mkdir(parents=True, exist_ok=True)
    for name, table in splits.items():
        hf_dataset.write_parquet(table, parquet_dir / f"{name}.parquet")
    return {name: table.num_rows for name, table in splits.items()}


def write_back(report: DifficultyReport, *, today: dt.date | None = None) -> list[Path]:
    """Record the measured difficulty in each sampled task's task.toml (a ``[difficulty]``
    table), leaving the rest of the file as it was (comments, order, formatting)."""
    import tomlkit

    written = []
    date = (today or dt.datetime.now(dt.UTC).date()).isoformat()
    for t in report.tasks:
        if t.stats.n == 0 or t.bucket == DEFECTIVE:
            continue
        path = Path(t.path) / "task.toml"
        doc = tomlkit.parse(path.read_text("utf-8"))
        table = tomlkit.table()
        table["pass_rate"] = round(t.stats.pass_rate or 0.0, 6)
        table["bucket"] = t.bucket
        table["n"] = t.stats.n
        table["wilson_low"] = round(t.stats.wilson_low, 6)
        table["wilson_high"] = round(t.stats.wilson_high, 6)
        table["model"] = report.model_id
        table["date"] = date
        if "difficulty" in doc:
            del doc["difficulty"]
        doc["difficulty"] = table
        path.write_text(tomlkit.dumps(doc), "utf-8")
        written.append(path)
    return written


def histogram_counts(report: DifficultyReport, bins: int = 10) -> list[int]:
    """Tasks per pass-rate bin [0, 0.1), ..., [0.9, 1.0] (sampled tasks only)."""
    counts = [0] * bins
    for t in report.tasks:
        if t.stats.pass_rate is not None and t.bucket != DEFECTIVE:
            counts[min(bins - 1, int(t.stats.pass_rate * bins))] += 1
    return counts


def write_histogram_png(report: DifficultyReport, path: Path, bins: int = 10) -> Path:
    """A bar chart of tasks per pass-rate bin (matplotlib, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = histogram_counts(report, bins)
    fig, ax = plt.subplots(figsize=(7, 3.5), dpi=100)
    edges = [i / bins for i in range(bins)]
    ax.bar(edges, counts, width=1 / bins, align="edge", edgecolor="black", color="#4c72b0")
    ax.set_xlim(0, 1)
    ax.set_xlabel("pass rate")
    ax.set_ylabel("tasks")
    ax.set_title(f"pass rates under {Path(report.model_id).name or report.model_id} "
                 f"({report.sampled} samples, {len([t for t in report.tasks if t.stats.n])} tasks)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
