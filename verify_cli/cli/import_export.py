"""``verify-cli import`` and ``verify-cli export``: parse options, delegate, show the result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from verify_cli.cli import console
from verify_cli.cli.console import Table
from verify_cli.errors import ExitCode, UsageError
from verify_cli.exporters import ExportReport, export_tasks
from verify_cli.formats.harbor.convert import FOLDER_PRESETS, Conversion, convert_folder
from verify_cli.importers import PRESETS, ImportReport, import_rows, parse_mapping
from verify_cli.report.files import write_json

MAX_SHOWN = 20


def _split_arguments(words: list[str]) -> tuple[str | None, list[str]]:
    """SOURCE and the FIELD=COLUMN words that followed ``--map`` (``--map a=b c=d``)."""
    source: str | None = None
    mapping: list[str] = []
    for w in words:
        if "=" in w and not Path(w).exists():
            mapping.append(w)
        elif source is None:
            source = w
        else:
            raise UsageError(f"unexpected argument {w!r}", hint="give one SOURCE; --map takes FIELD=COLUMN words")
    return source, mapping


def import_command(
    arguments: Annotated[list[str] | None, typer.Argument(
        metavar="[SOURCE]",
        help="JSONL, Parquet, a datasets folder, or a hub name (optional for --preset humaneval).",
        show_default=False)] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder the task folders are written to.")] = Path("tasks"),
    preset: Annotated[str | None, typer.Option(
        "--preset", "-p", help=f"Layout of the rows: {', '.join(PRESETS)}; or of task folders: "
                               f"{', '.join(FOLDER_PRESETS)} (converted copies).")] = None,
    mapping: Annotated[list[str] | None, typer.Option(
        "--map", "-m", help="FIELD=COLUMN (several after one --map): where a field comes from.")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first row that cannot be converted.")] = False,
    id_prefix: Annotated[str | None, typer.Option("--id-prefix", help="Namespace of task ids without one.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Import only the first N rows.")] = None,
    repos: Annotated[Path | None, typer.Option(
        "--repos", help="Folder of local repository clones (DIR/OWNER__NAME or DIR/NAME) for --preset "
                        "swebench; nothing is fetched.")] = None,
    merge: Annotated[bool, typer.Option(
        "--merge", help="Add the tasks to a non-empty --out (a folder of the same id is replaced).")] = False,
    json_out: Annotated[str | None, typer.Option(
        "--json", help="Write the import report as JSON (- for stdout).")] = None,
) -> None:
    """Turn the rows of a data set into task folders; rows that cannot be converted are reported."""
    if json_out == "-":
        console.use_stderr()
    source, extra = _split_arguments(list(arguments or []))
    if preset in FOLDER_PRESETS:
        if source is None:
            raise UsageError(f"--preset {preset} needs the folder of tasks to convert")
        started = time.monotonic()
        conversions = convert_folder(Path(source), out, preset)
        _show_conversions(conversions, preset, out, time.monotonic() - started)
        if json_out:
            write_json(json_out, {"command": "import", "preset": preset, "out": str(out),
                                  "tasks": [c.to_dict() for c in conversions]})
        return
    fields = parse_mapping([*(mapping or []), *extra])
    report = import_rows(source, out, preset=preset, mapping=fields, strict=strict, id_prefix=id_prefix,
                         limit=limit, merge=merge, repos=repos)
    _show_import(report)
    if json_out:
        write_json(json_out, {"command": "import", **report.to_dict()})
    if report.failures:
        raise typer.Exit(ExitCode.DEFECTIVE)


def _show_conversions(conversions: list[Conversion], preset: str, out: Path, seconds: float) -> None:
    console.info(f"converted {len(conversions)} task folder(s) (preset {preset}) into {out} in {seconds:.2f}s")
    for c in conversions:
        for fld, why in c.unsupported.items():
            console.warning(f"{c.task_id}: {fld}: {why}")


def _show_import(report: ImportReport) -> None:
    rate = report.rows / report.seconds if report.seconds > 0 else 0.0
    console.info(f"imported {len(report.written)} of {report.rows} rows from {report.source} "
                 f"(preset {report.preset}) into {report.out} in {report.seconds:.2f}s ({rate:,.0f} rows/s)")
    if not report.failures:
        return
    table = Table(title=f"{len(report.failures)} row(s) not imported", title_justify="left")
    table.add_column("row", justify="right")
    table.add_column("id")
    table.add_column("why")
    for f in report.failures[:MAX_SHOWN]:
        table.add_row(str(f.index), f.id or "-", f.reason)
    if len(report.failures) > MAX_SHOWN:
        table.add_row("...", "", f"and {len(report.failures) - MAX_SHOWN} more (--json has them all)")
    console.err.print(table)  # diagnostics: stderr, beside the progress (docs/cli.md, "Output streams")


def export_command(
    path: Annotated[Path, typer.Argument(help="A task folder, or a folder searched recursively for tasks.")],
    fmt: Annotated[str, typer.Option(
        "--format", "-f",
        help="verl, jsonl, datasets, swebench (repository tasks: rows and a git repository each), "
             "verl-agent or trl-agent (agent episodes: first messages and the task's session), "
             "harbor (a Harbor task folder each).")] = "verl",
    out: Annotated[Path, typer.Option("--out", "-o", help="Destination file or folder.")] = Path("export"),
    split: Annotated[str, typer.Option("--split", help="Split of tasks whose source names none.")] = "train",
    json_out: Annotated[str | None, typer.Option(
        "--json", help="Write the export report as JSON (- for stdout).")] = None,
) -> None:
    """Write a task set out for a trainer: verl Parquet, JSONL, or a datasets folder."""
    if json_out == "-":
        console.use_stderr()
    started = time.monotonic()
    report = export_tasks(path, fmt, out, split=split)
    _show_export(report, time.monotonic() - started)
    if json_out:
        write_json(json_out, {"command": "export", **report.to_dict()})
    if report.skipped:  # as import does for rows: the rest were written, but not everything
        raise typer.Exit(ExitCode.DEFECTIVE)


def _show_export(report: ExportReport, seconds: float) -> None:
    console.info(f"exported {len(report.exported)} task(s) as {report.format.value} to {report.out} in {seconds:.2f}s")
    for where, why in list(report.unsupported.items())[:MAX_SHOWN]:
        console.warning(f"not expressed in {report.format.value}: {where}: {why}")
    for folder, why in report.skipped[:MAX_SHOWN]:
        console.warning(f"skipped {folder}: {why}")
    if len(report.skipped) > MAX_SHOWN:
        console.warning(f"and {len(report.skipped) - MAX_SHOWN} more skipped (--json has them all)")
