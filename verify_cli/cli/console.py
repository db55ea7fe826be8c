"""The one module that prints. Everything the user sees goes through here (rich)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from verify_cli.checks.report import CheckStatus, TaskReport, TaskVerdict


def _console(stderr: bool) -> Console:
    c = Console(stderr=stderr, highlight=False)
    if not c.is_terminal:  # logs and CI: wide enough that tables do not fold every cell
        c = Console(stderr=stderr, highlight=False, width=160)
    return c


out = _console(False)
err = _console(True)

_VERDICT_STYLE = {TaskVerdict.SOUND: "bold green", TaskVerdict.DEFECTIVE: "bold red",
                  TaskVerdict.ERROR: "bold yellow"}


def use_stderr() -> None:
    """Send human output to stderr (when stdout carries JSON)."""
    global out
    out = err


def error(message: str) -> None:
    # Messages quote user input (TOML tables, regex classes): "[...]" must print as written.
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)


def warning(message: str) -> None:
    err.print(f"[yellow]{escape(message)}[/]")


def info(message: str) -> None:
    out.print(escape(message))


def plain(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Any]:
    """A progress bar on stderr; yields ``advance(text)``. Silent when stderr is not a terminal."""
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.fields[current]}"), console=err,
                        transient=True, disable=not err.is_terminal)
    with progress:
        tid = progress.add_task(description, total=total, current="")

        def advance(text: str = "", completed: int | None = None) -> None:
            if completed is None:
                progress.advance(tid)
            else:
                progress.update(tid, completed=completed)
            progress.update(tid, current=escape(text))

        yield advance


def check_tasks_table(reports: Sequence[TaskReport], *, backend: str, isolation: str, repeats: int) -> None:
    table = Table(title=f"check-tasks: {len(reports)} task(s), sandbox [bold]{backend}[/], "
                        f"{repeats} repeat(s)", title_justify="left")
    table.add_column("task")
    table.add_column("domain")
    table.add_column("verdict")
    table.add_column("failed checks", overflow="fold")
    table.add_column("reference", justify="right")
    for r in reports:
        problems = [f"[red]{c.name}[/]: {escape(c.message)}" for c in r.defects]
        problems += [f"[yellow]{c.name}[/]: {escape(c.message)}" for c in r.warnings]
        t = f"{r.reference_seconds:.2f}s" if r.reference_seconds is not None else "-"
        if r.cached:
            t += " (cached)"
        table.add_row(escape(r.task_id), escape(r.domain),
                      f"[{_VERDICT_STYLE[r.verdict]}]{r.verdict.value}[/]",
                      "\n".join(problems) or "-", t)
    out.print(table)
    counts = {v: sum(r.verdict is v for r in reports) for v in TaskVerdict}
    out.print(f"[bold]{counts[TaskVerdict.SOUND]} sound[/], "
              f"[{'bold red' if counts[TaskVerdict.DEFECTIVE] else 'dim'}]{counts[TaskVerdict.DEFECTIVE]} "
              f"defective[/], [{'bold yellow' if counts[TaskVerdict.ERROR] else 'dim'}]"
              f"{counts[TaskVerdict.ERROR]} error[/]  (sandbox: {backend} — {isolation})")


def sandbox_table(rows: Sequence[dict[str, str]]) -> None:
    table = Table(title="sandbox backends", title_justify="left")
    for col in ("backend", "available", "isolation", "what to do"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["backend"], "[green]yes[/]" if r["available"] == "yes" else "[red]no[/]",
                      escape(r["isolation"]), escape(r.get("hint", "")))
    out.print(table)


__all__ = ["CheckStatus", "check_tasks_table", "err", "error", "info", "out", "plain",
           "progress_bar", "sandbox_table", "use_stderr", "warning"]


def doctor_report(diagnoses: Sequence[Any]) -> None:
    """The ``sandbox doctor`` table: availability, proof of containment, latency, what to do."""
    table = Table(title="sandbox doctor (a backend is safe only when every hostile program was contained here)",
                  title_justify="left")
    for col in ("backend", "available", "proven safe", "contained", "not contained", "trivial run p50/p95",
                "what to do"):
        table.add_column(col, overflow="fold")
    for d in diagnoses:
        contained = sum(1 for r in d.results if r.contained)
        lat = (f"{d.latency_p50_s * 1000:.0f} / {d.latency_p95_s * 1000:.0f} ms"
               if d.latency_p50_s is not None and d.latency_p95_s is not None else "-")
        hint = escape(f"{d.reason}. {d.install_hint}") if not d.available else escape(d.error)
        table.add_row(d.backend, "[green]yes[/]" if d.available else "[red]no[/]",
                      "[bold green]yes[/]" if d.proven_safe else "[bold red]no[/]",
                      f"{contained}/{len(d.results)}" if d.results else "-",
                      escape(", ".join(d.limitations)) or "-", lat, hint or "-")
    out.print(table)
