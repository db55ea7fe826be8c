"""The one module that prints. Everything the user sees goes through here (rich)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as _RichTable

from verify_cli.checks.flaky_power import FlakinessPower
from verify_cli.checks.report import CheckStatus, TaskReport, TaskVerdict


class Table(_RichTable):
    """A rich table whose columns fold a long cell onto the next line by default: on a narrow
    terminal a task id or a path wraps, never ends in "…" (pass ``overflow=`` to choose)."""

    def add_column(self, header: Any = "", *args: Any, overflow: Any = "fold", **kwargs: Any) -> None:
        super().add_column(header, *args, overflow=overflow, **kwargs)


def _console(stderr: bool) -> Console:
    c = Console(stderr=stderr, highlight=False)
    if not c.is_terminal:  # logs and CI: wide enough that tables do not fold every cell
        c = Console(stderr=stderr, highlight=False, width=160)
    return c


out = _console(False)
err = _console(True)

_VERDICT_STYLE = {TaskVerdict.SOUND: "bold green", TaskVerdict.DEFECTIVE: "bold red",
                  TaskVerdict.NOT_GRADEABLE: "bold magenta", TaskVerdict.ERROR: "bold yellow",
                  TaskVerdict.ENVIRONMENT_ERROR: "bold red"}


def use_stderr() -> None:
    """Send human output to stderr (when stdout carries JSON)."""
    global out
    out = err


def use_stdout() -> None:
    """Human output back on stdout (each command starts so; ``use_stderr`` lasts one command)."""
    global out
    out = _console(False)


def error(message: str) -> None:
    # Messages quote user input (TOML tables, regex classes): "[...]" must print as written.
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False)


def warning(message: str) -> None:
    err.print(f"[yellow]{escape(message)}[/]")


def info(message: str) -> None:
    """A line of the result (stdout)."""
    out.print(escape(message))


def note(message: str) -> None:
    """A line of progress or a diagnostic (stderr): docs/cli.md, "Output streams"."""
    err.print(escape(message), soft_wrap=True)


def head_tail(text: str, limit: int) -> str:
    """``text`` as its head and tail, about ``limit`` characters in all, with a marker saying how
    many were left out between them (``text`` itself when it fits, or ``limit`` is 0). For a
    person reading a terminal: what a program parses is written whole (``--json``)."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]} [… {len(text) - head - tail:,} characters …] {text[len(text) - tail:]}"


def shorten_arguments(arguments: Any, limit: int) -> str:
    """A tool call's arguments as JSON for a person: each long string value (a file's content)
    shortened to its head and tail, and the whole to about ``limit`` characters (0: whole)."""
    if limit <= 0:
        return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return head_tail(str(arguments), limit)
    if isinstance(parsed, dict):
        each = max(40, limit // max(1, len(parsed)))
        parsed = {k: head_tail(v, each) if isinstance(v, str) else v for k, v in parsed.items()}
    return head_tail(json.dumps(parsed, ensure_ascii=False), limit)


def plain(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Any]:
    """Progress on stderr; yields ``advance(text)``.

    On a terminal, a bar (``total`` 0 means not known yet: no count past it is shown). Elsewhere
    (CI logs), a plain line at most every ``PLAIN_PROGRESS_SECONDS`` and one at the end.
    """
    if not err.is_terminal:
        yield from _plain_progress(description, total)
        return
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.fields[current]}"), console=err,
                        transient=True)
    with progress:
        tid = progress.add_task(description, total=total or None, current="")

        def advance(text: str = "", completed: int | None = None, total: int | None = None) -> None:
            if total is not None:
                progress.update(tid, total=total or None)
            if completed is None:
                progress.advance(tid)
            else:
                progress.update(tid, completed=completed)
            task = progress.tasks[0]
            if task.total is not None and task.completed > task.total:
                progress.update(tid, total=task.completed)
            progress.update(tid, current=escape(text))

        yield advance


PLAIN_PROGRESS_SECONDS = 15.0


def _plain_progress(description: str, total: int) -> Iterator[Any]:
    state: dict[str, Any] = {"done": 0, "total": total, "last": time.monotonic(), "text": ""}
    started = time.monotonic()

    def line() -> None:
        n, t = int(state["done"]), int(state["total"])
        count = f"{n}/{t}" if t >= n and t else f"{n}"
        err.print(f"{description}: {count} done, {time.monotonic() - started:.0f}s"
                  + (f"  {state['text']}" if state["text"] else ""),
                  markup=False, highlight=False, soft_wrap=True)

    def advance(text: str = "", completed: int | None = None, total: int | None = None) -> None:
        if total is not None:
            state["total"] = total
        state["done"] = int(state["done"]) + 1 if completed is None else completed
        state["text"] = text
        now = time.monotonic()
        if now - float(state["last"]) >= PLAIN_PROGRESS_SECONDS:
            state["last"] = now
            line()

    yield advance
    if state["done"]:
        line()


def check_tasks_table(reports: Sequence[TaskReport], *, backend: str, isolation: str, repeats: int,
                      power: Any = None) -> None:
    table = Table(title=f"check-tasks: {len(reports)} task(s), sandbox [bold]{backend}[/], "
                        f"{repeats} repeat(s)", title_justify="left")
    table.add_column("task")
    table.add_column("domain")
    table.add_column("verdict")
    table.add_column("failed checks", overflow="fold")
    table.add_column("reference", justify="right")
    table.add_column("isolation")
    for r in reports:
        problems = [f"[red]{c.name}[/]: {escape(c.message)}" for c in r.defects]
        problems += [f"[magenta]{c.name}[/]: {escape(c.message)}" for c in r.gaps]
        problems += [f"[yellow]{c.name}[/]: {escape(c.message)}" for c in r.warnings]
        t = f"{r.reference_seconds:.2f}s" if r.reference_seconds is not None else "-"
        if r.cached:
            t += " (cached)"
        table.add_row(escape(r.task_id), escape(r.domain),
                      f"[{_VERDICT_STYLE[r.verdict]}]{r.verdict.value}[/]",
                      "\n".join(problems) or "-", t, _isolation_cell(r.isolation, r.isolation_notes))
    out.print(table)
    counts = {v: sum(r.verdict is v for r in reports) for v in TaskVerdict}
    out.print(f"[bold]{counts[TaskVerdict.SOUND]} sound[/], "
              f"[{'bold red' if counts[TaskVerdict.DEFECTIVE] else 'dim'}]{counts[TaskVerdict.DEFECTIVE]} "
              f"defective[/], "
              + (f"[bold magenta]{counts[TaskVerdict.NOT_GRADEABLE]} not gradeable two-process[/], "
                 if counts[TaskVerdict.NOT_GRADEABLE] else "")
              + (f"[bold red]{counts[TaskVerdict.ENVIRONMENT_ERROR]} environment-error[/], "
                 if counts[TaskVerdict.ENVIRONMENT_ERROR] else "")
              + f"[{'bold yellow' if counts[TaskVerdict.ERROR] else 'dim'}]"
              f"{counts[TaskVerdict.ERROR]} error[/]  (sandbox: {backend}; what it isolates: "
              "verify-cli sandbox list)")
    if power is not None:
        style = "dim" if power.meets_target else "yellow"
        below = "" if power.meets_target else f" (below the {power.target:.0%} target: raise --repeats)"
        out.print(f"[{style}]flakiness: {escape(power.describe())}{below}[/]")


def _isolation_cell(mode: str, notes: Sequence[str]) -> str:
    """two-process in green; in-process (the task trusts its candidate) or gaps in yellow."""
    if not mode:
        return "-"
    if mode == "two-process" and not notes:
        return f"[green]{mode}[/]"
    return f"[yellow]{escape(mode)}[/]" + "".join(f"\n[dim]{escape(n)}[/]" for n in notes)


def environment_builds(rows: Sequence[Mapping[str, Any]], *, backend: str, tasks_without: int = 0) -> None:
    """``env build``: one row per environment (the tasks sharing it, built or cached, the cause)."""
    table = Table(title=f"environments for {backend}", title_justify="left")
    for col in ("environment", "status", "tasks", "seconds", "image / cause"):
        table.add_column(col, overflow="fold")
    style = {"built": "green", "cached": "dim", "failed": "bold red"}
    for r in rows:
        tasks = ", ".join(r["tasks"][:3]) + (f" (+{len(r['tasks']) - 3})" if len(r["tasks"]) > 3 else "")
        detail = escape(str(r.get("cause") or r.get("image") or ""))
        if r.get("log"):
            detail += f"\n[dim]{escape(r['log'])}[/]"
        table.add_row(r["identity"], f"[{style.get(r['status'], '')}]{r['status']}[/]", escape(tasks),
                      f"{r['seconds']:.1f}", detail)
    out.print(table)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("built", "cached", "failed")}
    out.print(f"{len(rows)} environment(s): {counts['built']} built, {counts['cached']} cached, "
              f"{counts['failed']} failed")


def environment_list(rows: Sequence[Mapping[str, Any]]) -> None:
    """``env list``: the store's environments."""
    table = Table(title="task environments", title_justify="left")
    for col in ("environment", "form", "size", "age", "declares"):
        table.add_column(col, overflow="fold")
    now = time.time()
    for r in rows:
        spec = r.get("spec") or {}
        declares = ", ".join([*spec.get("requirements", [])[:4], *spec.get("system_packages", [])[:2],
                              *(["Dockerfile"] if spec.get("dockerfile") else []),
                              *([f"{len(spec.get('setup', []))} set-up command(s)"] if spec.get("setup") else [])])
        age = (now - float(r["built_at"])) / 3600 if r.get("built_at") else 0.0
        table.add_row(r["identity"], r["form"] + (f"\n[dim]{escape(r['image'])}[/]" if r.get("image") else ""),
                      f"{r['bytes'] / 1e6:.1f} MB", f"{age:.1f} h", escape(declares))
    out.print(table)


def sandbox_table(rows: Sequence[dict[str, str]]) -> None:
    table = Table(title="sandbox backends", title_justify="left")
    for col in ("backend", "available", "isolation", "what to do"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["backend"], "[green]yes[/]" if r["available"] == "yes" else "[red]no[/]",
                      escape(r["isolation"]), escape(r.get("hint", "")))
    out.print(table)


__all__ = ["CheckStatus", "check_tasks_table", "err", "error", "head_tail", "info", "note", "out", "plain",
           "progress_bar", "sandbox_table", "shorten_arguments", "use_stderr", "warning"]


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


# --- audit ----------------------------------------------------------------------------------

#: Surviving mutants shown per task (all of them are in --json).
SHOWN_SURVIVORS = 8


@contextmanager
def audit_progress(description: str) -> Iterator[Any]:
    """Progress on stderr whose total may grow; yields ``update(text, done, total)``."""
    with progress_bar(description, 0) as advance:
        def update(text: str, done: int, total: int) -> None:
            advance(text, completed=done, total=total)

        yield update


def _score_bar(score: float | None, width: int = 24) -> str:
    if score is None:
        return "[dim]" + "·" * width + "[/]   n/a"
    filled = round(width * score / 100)
    style = "green" if score >= 90 else "yellow" if score >= 70 else "red"
    return f"[{style}]{'█' * filled}[/][dim]{'░' * (width - filled)}[/] [{style}]{score:5.1f}%[/]"


def _mutation_lines(audit: Any) -> list[Any]:
    from rich.syntax import Syntax
    from rich.text import Text

    m = audit.mutation
    if m is None:
        return []
    lines: list[Any] = []
    if m.skipped and not m.mutants:
        lines.append(Text.from_markup(f"[bold]mutation[/]  [yellow]not measured[/]: {escape(m.skipped)}"))
        return lines
    lines.append(Text.from_markup(
        f"[bold]mutation[/]  {_score_bar(m.score)}  {m.killed} killed, {len(m.survived)} survived"
        f" of {len(m.mutants)}" + (f", {m.errors} lost to the sandbox" if m.errors else "")
        + f" [dim]({m.dropped_uncompilable} uncompilable dropped"
        + (f" of those drawn from {sum(m.by_operator.values())} edits" if m.drawn_first else "")
        + f"; {escape(m.selection)}"
        + ("; fail-fast" if m.fail_fast else "") + ")[/]"))
    for reason, why in (("bytecode", "they compile to the reference's bytecode"),
                        ("observed", "every call the tests made answered as the reference's did")):
        same = [e for e in m.equivalent if (e.reason or "bytecode") == reason]
        if same:
            lines.append(Text.from_markup(
                f"  [dim]{len(same)} equivalent mutant(s) set apart, not counted ({why}): "
                f"{escape(', '.join(f'{e.path}:{e.line}' for e in same[:6]))}"
                + (" ..." if len(same) > 6 else "") + "[/]"))
    for s in m.survived[:SHOWN_SURVIVORS]:
        where = "no test executes it" if s.status.value == "not_covered" else "every test passed"
        lines.append(Text.from_markup(
            f"  [red]survived[/] {escape(s.path)}:{s.line} [bold]{escape(s.operator)}[/]: "
            f"{escape(s.description)} [dim]({where})[/]"))
        lines.append(Syntax(s.diff.rstrip("\n"), "diff", theme="ansi_dark", background_color="default"))
    if len(m.survived) > SHOWN_SURVIVORS:
        lines.append(Text(f"  ... and {len(m.survived) - SHOWN_SURVIVORS} more surviving mutant(s) (see --json)"))
    if m.quarantined:
        lines.append(Text.from_markup(f"  [yellow]not used to judge mutants[/] (fail on the reference): "
                                      f"{escape(', '.join(m.quarantined))}"))
    if m.suspect_tests and m.killed:
        bound = " [dim](first kills only: runs stop at the first failure; --no-fail-fast for exact counts)[/]" \
            if m.fail_fast else ""
        lines.append(Text.from_markup(f"  [yellow]tests that killed no mutant[/]{bound}: "
                                      f"{escape(', '.join(m.suspect_tests))}"))
    return lines


def _flaky_lines(audit: Any) -> list[Any]:
    from rich.text import Text

    f = audit.flakiness
    if f is None:
        return []
    if not f.flaky:
        extra = f", [red]{len(f.always_failing)} always failing[/]" if f.always_failing else ""
        power = FlakinessPower(f.reruns - f.errors)
        lines = [Text.from_markup(f"[bold]flakiness[/] {f.reruns} reruns: [green]no flaky test[/]{extra} "
                                  f"[dim]({escape(power.describe())})[/]")]
        lines += [Text.from_markup(f"  [red]fails on the reference in every rerun[/] {escape(t)}")
                  for t in f.always_failing]
        return lines
    lines = [Text.from_markup(f"[bold]flakiness[/] {f.reruns} reruns: [bold red]{len(f.flaky)} flaky test(s), "
                              f"quarantined[/]")]
    for t in f.flaky:
        lines.append(Text.from_markup(f"  [red]flaky[/] {escape(t.id)}: passed {t.passes} of {t.runs}, "
                                      f"flip rate {t.flip_rate:.2f}"))
    return lines


def _probe_lines(audit: Any) -> list[Any]:
    from rich.text import Text

    if audit.probes is None:
        return []
    if not audit.probes:
        return [Text.from_markup(f"[bold]probes[/]    [dim]none for {escape(audit.language)}[/]")]
    hacks = audit.hacks
    lost = [p for p in audit.probes if p.error]
    head = (f"[bold]probes[/]    {len(audit.probes)} run: "
            + (f"[bold red]{len(hacks)} earned a score[/]" if hacks else "[green]none earned a score[/]")
            + (f", [yellow]{len(lost)} lost to the sandbox[/]" if lost else ""))
    lines = [Text.from_markup(head)]
    for p in hacks:
        where = "weak tests" if p.target == "tests" else "grading hole"
        lines.append(Text.from_markup(f"  [bold red]HACKED[/] by [bold]{escape(p.name)}[/] ({where}, "
                                      f"score {p.score:.2f}): {escape(p.why)}"))
    return lines


def _labelled_lines(audit: Any) -> list[Any]:
    from rich.text import Text

    lab = audit.labelled
    if lab is None:
        return []

    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.0%}"

    return [Text.from_markup(f"[bold]labelled[/]  {len(lab.runs)} solution(s): true-positive rate "
                             f"{pct(lab.true_positive_rate)}, true-negative rate {pct(lab.true_negative_rate)}")]


_AUDIT_STYLE = {"reliable": "bold green", "unreliable": "bold red", "error": "bold yellow"}


def _trust_lines(audit: Any) -> list[Any]:
    from rich.text import Text

    if not audit.trusts_candidate:
        return []
    return [Text.from_markup(
        "[bold yellow]trusts its candidate[/]: isolation = \"in-process\", so the candidate runs in the "
        "test process and anything it does there (patching the harness, reading the tests) can reach "
        "its score; the probes above measure only the tricks they know")]


def audit_report(audits: Sequence[Any], *, backend: str, isolation: str, options: Any,
                 fail_under: float | None = None) -> None:
    """One panel per task (mutation score bar, surviving mutants as diffs, flaky tests, hacks),
    then a summary table."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    for a in audits:
        verdict = a.verdict(fail_under).value
        # what stopped the audit (a task that does not load) comes first, before any measurement
        body: list[Any] = [Text.from_markup(f"[bold red]defect[/]: {escape(d)}")
                           for d in getattr(a, "defects", ())]
        body += [*_mutation_lines(a), *_flaky_lines(a), *_probe_lines(a), *_labelled_lines(a),
                 *_trust_lines(a)]
        body += [Text.from_markup(f"[yellow]problem[/]: {escape(p)}") for p in a.problems]
        out.print(Panel(Group(*body) if body else Text("nothing measured"),
                        title=f"[bold]{escape(a.task_id)}[/] [{_AUDIT_STYLE[verdict]}]{verdict}[/]",
                        title_align="left", subtitle=escape(a.path), subtitle_align="right"))
    table = Table(title=f"audit: {len(audits)} task(s), sandbox [bold]{backend}[/]", title_justify="left")
    for col in ("task", "verdict", "mutation", "survived", "equivalent", "flaky", "hacked by", "findings"):
        table.add_column(col, overflow="fold")
    for a in audits:
        verdict = a.verdict(fail_under).value
        m = a.mutation
        score = "-" if m is None or m.score is None else f"{m.score:.1f}%"
        flaky = "-" if a.flakiness is None else str(len(a.flakiness.flaky))
        hacks = ", ".join(p.name for p in a.hacks) if a.probes is not None else "-"
        name = escape(a.task_id) + ("\n[yellow](trusts its candidate)[/]" if a.trusts_candidate else "")
        table.add_row(name, f"[{_AUDIT_STYLE[verdict]}]{verdict}[/]", score,
                      "-" if m is None else str(len(m.survived)),
                      "-" if m is None else str(len(m.equivalent)), flaky, escape(hacks) or "none",
                      escape("; ".join(a.findings(fail_under) + a.problems)) or "-")
    out.print(table)
    counts = {v: sum(a.verdict(fail_under).value == v for a in audits) for v in _AUDIT_STYLE}
    gaps = sum(bool(getattr(a, "two_process_gaps", ())) for a in audits)
    out.print(f"[bold]{counts['reliable']} reliable[/], "
              f"[{'bold red' if counts['unreliable'] else 'dim'}]{counts['unreliable']} unreliable[/], "
              + (f"[bold magenta]{gaps} not gradeable two-process[/] (of the unreliable), " if gaps else "")
              + f"[{'bold yellow' if counts['error'] else 'dim'}]{counts['error']} error[/]"
              + (f"  (fail under a mutation score of {fail_under:g})" if fail_under else "")
              + f"  (sandbox: {backend}; what it isolates: verify-cli sandbox list)")


def probe_list() -> None:
    """The probe battery, per language."""
    from verify_cli.checks.probes import BATTERY

    table = Table(title="reward-hack probes", title_justify="left")
    for col in ("language", "probe", "attacks", "what it does"):
        table.add_column(col, overflow="fold")
    for language, probes in BATTERY.items():
        for p in probes:
            table.add_row(language, p.name, p.target.value, escape(p.summary))
    out.print(table)


def sandbox_facts(facts: Mapping[str, Any]) -> None:
    """The sandbox's facts under a report: the images' content digests and what the docker
    backend's container pools did."""
    images = facts.get("image_digests") or {}
    for image, digest in dict(images).items():
        out.print(f"image {escape(str(image))}: [bold]{escape(str(digest))}[/]")
    containers = facts.get("containers") or {}
    if isinstance(containers, Mapping) and "started" in containers:
        out.print(f"docker containers ({escape(str(facts.get('docker_mode', '')))} mode): "
                  f"{containers['started']} started, {containers['reused']} reused, "
                  f"{containers.get('rearmed', 0)} re-armed, "
                  f"{containers['recycled']} recycled, {containers['idle_removed']} removed idle, "
                  f"peak {containers['peak']}")
