"""``verify-cli export``: a task set to verl Parquet, JSONL, a ``datasets`` folder, or SWE-bench rows."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from verify_cli.errors import UsageError
from verify_cli.exporters.rows import TASK_PAYLOAD, export_row
from verify_cli.exporters.schemas import ROW_SCHEMA, VERL_SCHEMA
from verify_cli.tasks.loader import TaskLoadFailure, load_task_set
from verify_cli.tasks.model import Task


class ExportFormat(StrEnum):
    VERL = "verl"
    JSONL = "jsonl"
    DATASETS = "datasets"
    SWEBENCH = "swebench"  # repository tasks: SWE-bench rows and a git repository per task
    VERL_AGENT = "verl-agent"  # verl's multi-turn tool-agent rows (exporters/agent.py)
    TRL_AGENT = "trl-agent"  # TRL environment-mode rows (exporters/agent.py)
    HARBOR = "harbor"  # a Harbor task folder per task (formats/harbor/convert.py)


@dataclass
class ExportReport:
    format: ExportFormat
    out: Path
    exported: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (folder, why)
    #: What the format cannot express, per task and field ("task: field" -> why).
    unsupported: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"format": self.format.value, "out": str(self.out), "exported": len(self.exported),
                "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
                **({"unsupported": dict(self.unsupported)} if self.unsupported else {})}


def verl_row(row: dict[str, Any], index: int) -> dict[str, Any]:
    """A generic row in verl's layout."""
    return {
        "data_source": row["data_source"],
        "prompt": row["messages"],  # the chat verify-cli sends: its system message and the task
        "ability": row["domain"],
        "reward_model": {"style": "rule", "ground_truth": row["ground_truth"]},
        "extra_info": {"index": index, "split": row["split"], "task_id": row["id"], "kind": row["kind"],
                       "entry_point": row["entry_point"], "solution": row["solution"],
                       "difficulty": row["difficulty"], "difficulty_bucket": row["difficulty_bucket"],
                       TASK_PAYLOAD: row[TASK_PAYLOAD]},
    }


def _write_verl(rows: list[dict[str, Any]], out: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    dest = out if out.suffix == ".parquet" else out / "train.parquet"
    dest.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([verl_row(r, i) for i, r in enumerate(rows)], schema=VERL_SCHEMA)
    pq.write_table(table, dest)
    return dest


def _write_jsonl(rows: list[dict[str, Any]], out: Path) -> Path:
    dest = out if out.suffix in (".jsonl", ".ndjson") else out / "tasks.jsonl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with dest.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return dest


def _write_datasets(rows: list[dict[str, Any]], out: Path) -> Path:
    import datasets
    import pyarrow as pa

    datasets.disable_progress_bars()  # library code does not print
    splits: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        splits.setdefault(r["split"], []).append(r)
    features = datasets.Features.from_arrow_schema(ROW_SCHEMA)
    dd = datasets.DatasetDict({
        name: datasets.Dataset(pa.Table.from_pylist(part, schema=ROW_SCHEMA),
                               info=datasets.DatasetInfo(features=features))
        for name, part in splits.items()})
    dd.save_to_disk(str(out))
    return out


_WRITERS: dict[ExportFormat, Callable[[list[dict[str, Any]], Path], Path]] = {
    ExportFormat.VERL: _write_verl, ExportFormat.JSONL: _write_jsonl, ExportFormat.DATASETS: _write_datasets}


def export_tasks(path: Path, fmt: str, out: Path, *, split: str = "train",
                 on_task: Callable[[str], None] | None = None) -> ExportReport:
    """Export every task under ``path``; folders that do not load are skipped and listed."""
    try:
        chosen = ExportFormat(fmt)
    except ValueError:
        raise UsageError(f"unknown export format {fmt!r}",
                         hint=f"formats: {', '.join(f.value for f in ExportFormat)}") from None
    out = Path(out)
    _check_destination(Path(path), out, chosen)
    report = ExportReport(chosen, out)
    rows: list[dict[str, Any]] = []
    items: Iterable[Task | TaskLoadFailure] = load_task_set(path)
    if chosen is not ExportFormat.HARBOR:
        items = _without_harbor_tasks(items, report)
    if chosen is ExportFormat.SWEBENCH:
        return _export_swebench(items, out, report, on_task)
    if chosen in (ExportFormat.VERL_AGENT, ExportFormat.TRL_AGENT):
        return _export_agent(items, chosen, out, report, split, on_task)
    if chosen is ExportFormat.HARBOR:
        return _export_harbor(items, Path(path), out, report, on_task)
    for item in items:
        if isinstance(item, TaskLoadFailure):
            report.skipped.append((str(item.root), item.error.message))
            continue
        rows.append(export_row(item, split=split))
        report.exported.append(item.id)
        if on_task is not None:
            on_task(item.id)
    if not rows:
        raise UsageError(f"{path}: no task could be loaded to export",
                         hint=f"{report.skipped[0][0]}: {report.skipped[0][1]}" if report.skipped
                         else "run 'verify-cli check-tasks' on it to see why")
    try:
        report.out = _WRITERS[chosen](rows, out)
    except OSError as e:
        raise UsageError(f"{e.filename or out}: cannot write the export ({e.strerror or e})",
                         hint="give --out a place you can write to") from None
    return report


def _export_swebench(items: Iterable[Task | TaskLoadFailure], out: Path, report: ExportReport,
                     on_task: Callable[[str], None] | None) -> ExportReport:
    from verify_cli.exporters.swebench import write_swebench

    tasks: list[Task] = []
    for item in items:
        if isinstance(item, TaskLoadFailure):
            report.skipped.append((str(item.root), item.error.message))
        else:
            tasks.append(item)
    try:
        report.out, skipped = write_swebench(tasks, out)
    except OSError as e:
        raise UsageError(f"{e.filename or out}: cannot write the export ({e.strerror or e})",
                         hint="give --out a place you can write to") from None
    report.skipped.extend(skipped)
    skipped_roots = {root for root, _ in skipped}
    for task in tasks:
        if str(task.root) not in skipped_roots:
            report.exported.append(task.id)
            if on_task is not None:
                on_task(task.id)
    if not report.exported:
        raise UsageError("no repository task to export as SWE-bench rows (tasks need [test] fail_to_pass)",
                         hint="see docs/task-format.md, 'Repository tasks'")
    return report


def _export_agent(items: Iterable[Task | TaskLoadFailure], fmt: ExportFormat, out: Path, report: ExportReport,
                  split: str, on_task: Callable[[str], None] | None) -> ExportReport:
    from verify_cli.exporters.agent import write_trl_agent, write_verl_agent

    tasks: list[Task] = []
    for item in items:
        if isinstance(item, TaskLoadFailure):
            report.skipped.append((str(item.root), item.error.message))
            continue
        tasks.append(item)
        report.exported.append(item.id)
        if on_task is not None:
            on_task(item.id)
    if not tasks:
        raise UsageError(f"{out}: no task could be loaded to export",
                         hint="run 'verify-cli check-tasks' on it to see why")
    write = write_verl_agent if fmt is ExportFormat.VERL_AGENT else write_trl_agent
    try:
        report.out = write(tasks, out, split=split)
    except OSError as e:
        raise UsageError(f"{e.filename or out}: cannot write the export ({e.strerror or e})",
                         hint="give --out a place you can write to") from None
    return report


#: Why a row export leaves out a Harbor (or Terminal-Bench 1) task folder.
HARBOR_ROW_SKIP = ("a Harbor task folder: its rows would not hold its environment and verifier; trainers that "
                   "read Harbor take the folder as it is")


def _without_harbor_tasks(items: Iterable[Task | TaskLoadFailure],
                          report: ExportReport) -> Iterator[Task | TaskLoadFailure]:
    for item in items:
        if isinstance(item, Task) and item.harbor is not None:
            report.skipped.append((str(item.root), HARBOR_ROW_SKIP))
        else:
            yield item


def _export_harbor(items: Iterable[Task | TaskLoadFailure], source: Path, out: Path, report: ExportReport,
                   on_task: Callable[[str], None] | None) -> ExportReport:
    """A Harbor folder per task, at the task's place in the set (the round trip keeps the layout)."""
    from verify_cli.formats.harbor.convert import relative_place, to_harbor

    for item in items:
        if isinstance(item, TaskLoadFailure):
            report.skipped.append((str(item.root), item.error.message))
            continue
        if item.harbor is not None:
            report.skipped.append((str(item.root), "already a Harbor task: copy the folder as it is"))
            continue
        dest = out / relative_place(item.root, source)
        if dest.exists():
            raise UsageError(f"{dest}: already exists", hint="give --out a new folder")
        try:
            conversion = to_harbor(item, dest)
        except OSError as e:
            raise UsageError(f"{e.filename or dest}: cannot write the export ({e.strerror or e})",
                             hint="give --out a place you can write to") from None
        report.exported.append(item.id)
        report.unsupported.update({f"{item.id}: {k}": v for k, v in conversion.unsupported.items()})
        if on_task is not None:
            on_task(item.id)
    if not report.exported:
        if report.skipped and all(why.startswith("already a Harbor task") for _, why in report.skipped):
            raise UsageError(f"{source}: already Harbor task folders", hint="Harbor reads them as they are")
        raise UsageError(f"{out}: no task could be loaded to export",
                         hint="run 'verify-cli check-tasks' on it to see why")
    return report


#: Formats written as one file when --out ends with one of these suffixes (else into a folder).
_FILE_SUFFIXES = {ExportFormat.VERL: (".parquet",), ExportFormat.JSONL: (".jsonl", ".ndjson"),
                  ExportFormat.DATASETS: (), ExportFormat.SWEBENCH: (".jsonl", ".ndjson"),
                  ExportFormat.VERL_AGENT: (".parquet",), ExportFormat.TRL_AGENT: (".jsonl", ".ndjson"),
                  ExportFormat.HARBOR: ()}


def _check_destination(source: Path, out: Path, fmt: ExportFormat) -> None:
    """Refuse a datasets folder written over the task set itself, a file where a folder is
    written, and a folder where a file is."""
    if fmt is ExportFormat.DATASETS and (out.resolve() == source.resolve() or (out / "task.toml").is_file()):
        raise UsageError(f"{out}: holds tasks; the datasets export writes a folder of its own",
                         hint="give --out a new folder (this one would then read as a datasets folder)")
    if out.suffix in _FILE_SUFFIXES[fmt]:
        if out.is_dir():
            raise UsageError(f"{out}: a folder, where the {fmt.value} export writes a file",
                             hint="remove it or give another name")
        return
    if out.exists() and not out.is_dir():
        files = " / ".join(_FILE_SUFFIXES[fmt])
        raise UsageError(f"{out}: a file, where the {fmt.value} export writes a folder",
                         hint=f"give a folder{f' or a {files} file' if files else ''}")
