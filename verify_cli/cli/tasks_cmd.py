"""``verify-cli tasks list`` / ``tasks stats``: a task set at a glance."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from verify_cli.checks.cache import default_cache_dir
from verify_cli.checks.solvability import DEFAULT_REPEATS
from verify_cli.cli import console
from verify_cli.cli.console import Table
from verify_cli.cli.options import DockerModeOpt, sandbox_options
from verify_cli.errors import SandboxUnavailableError
from verify_cli.report.files import write_json
from verify_cli.report.prompt_lengths import PromptLength, model_prompt_lengths
from verify_cli.report.task_set import (
    STAT_FIELDS,
    UNCHECKED,
    statuses_from_cache,
    statuses_from_report,
    task_set_stats,
)
from verify_cli.sandbox.registry import create_sandbox, sandbox_spec
from verify_cli.tasks.catalog import TaskEntry, catalog

tasks_app = typer.Typer(name="tasks", no_args_is_help=True, help="Look at a task set: list its tasks, count them.")

PathArg = Annotated[Path, typer.Argument(help="A task folder, or a folder searched recursively for tasks.")]
ChecksOpt = Annotated[Path | None, typer.Option(
    "--check-report", "--checks",
    help="A check-tasks --json report to take check status from (default: the check-tasks cache).")]
JsonOpt = Annotated[str | None, typer.Option("--json", help="Write the result as JSON (- for stdout).")]
SandboxOpt = Annotated[str, typer.Option("--sandbox", "-s", help="Backend whose cached check results count.")]
RepeatsOpt = Annotated[int, typer.Option("--repeats", "-n", min=1, help="Repeats of the cached check-tasks runs.")]
CacheOpt = Annotated[Path | None, typer.Option("--cache-dir", help="The check-tasks cache folder.")]
TokenizerOpt = Annotated[Path | None, typer.Option(
    "--tokenizer", help="A model folder: each task's prompt length in its tokens, against its context.")]
ContextOpt = Annotated[int | None, typer.Option(
    "--context-length", min=1, help="The context the prompts must fit (default: the --tokenizer model's).")]


def _statuses(entries: Sequence[TaskEntry], checks: Path | None, sandbox: str, docker_mode: str | None,
              repeats: int, cache_dir: Path | None) -> dict[str, str]:
    if checks is not None:
        return statuses_from_report(checks)
    spec = sandbox_spec(sandbox, sandbox_options(docker_mode=docker_mode))
    try:
        box = create_sandbox(spec)  # not started: asked only for its cache identity
    except SandboxUnavailableError as e:
        console.warning(f"{e.message}: its cached check results cannot be looked up")
        return {e.id: "defective" for e in entries if e.task is None}
    try:
        return statuses_from_cache(entries, cache_dir or default_cache_dir(), box.cache_identity, repeats)
    finally:
        box.close()


@tasks_app.command("list")
def list_command(path: PathArg, checks: ChecksOpt = None, json_out: JsonOpt = None,
                 sandbox: SandboxOpt = "auto", docker_mode: DockerModeOpt = None,
                 repeats: RepeatsOpt = DEFAULT_REPEATS, cache_dir: CacheOpt = None) -> None:
    """One line per task: id, domain, language, kind, difficulty, check status."""
    if json_out == "-":
        console.use_stderr()
    entries = catalog(path)
    statuses = _statuses(entries, checks, sandbox, docker_mode, repeats, cache_dir)
    table = Table(title=f"{len(entries)} task(s) under {path}", title_justify="left")
    for name in ("task", "domain", "language", "kind", "difficulty", "check", "source"):
        table.add_column(name)
    for e in entries:
        table.add_row(e.id, e.domain, e.language, e.kind, e.difficulty, statuses.get(e.id, UNCHECKED),
                      e.data_source or "-")
    console.out.print(table)
    if json_out:
        write_json(json_out, {"command": "tasks list", "tasks": [
            {**e.to_dict(), "check": statuses.get(e.id, UNCHECKED)} for e in entries]})


@tasks_app.command("stats")
def stats_command(path: PathArg, checks: ChecksOpt = None, json_out: JsonOpt = None,
                  sandbox: SandboxOpt = "auto", docker_mode: DockerModeOpt = None,
                  repeats: RepeatsOpt = DEFAULT_REPEATS, cache_dir: CacheOpt = None,
                  tokenizer: TokenizerOpt = None, context_length: ContextOpt = None) -> None:
    """Counts by domain, language, kind, difficulty bucket and check status; with --tokenizer,
    each task's prompt length in the model's tokens and whether it fits its context."""
    if json_out == "-":
        console.use_stderr()
    entries = catalog(path)
    stats: dict[str, Any] = task_set_stats(entries, _statuses(entries, checks, sandbox, docker_mode, repeats,
                                                                             cache_dir))
    console.info(f"{stats['tasks']} task(s) under {path}"
                 + (f", {stats['failed_to_load']} do not load" if stats["failed_to_load"] else ""))
    for name in STAT_FIELDS:
        table = Table(title=f"by {name}", title_justify="left")
        table.add_column(name)
        table.add_column("tasks", justify="right")
        for value, count in stats[name].items():
            table.add_row(value, str(count))
        console.out.print(table)
    if tokenizer is not None or context_length is not None:
        loaded = [e.task for e in entries if e.task is not None]
        lengths, context = model_prompt_lengths(loaded, tokenizer, context_length=context_length)
        _prompt_table(lengths, context)
        stats["context_length"] = context
        stats["prompts"] = [p.to_dict() for p in lengths]
        stats["prompt_too_long"] = sum(p.fits is False for p in lengths)
    if json_out:
        write_json(json_out, {"command": "tasks stats", **stats})


#: Tasks the prompt-length table shows (the longest first).
PROMPT_ROWS_SHOWN = 40


def _prompt_table(lengths: list[PromptLength], context: int | None) -> None:
    counted = any(p.tokens is not None for p in lengths)
    title = "prompt length" + (f" (context {context} tokens)" if context else "")
    table = Table(title=title, title_justify="left")
    table.add_column("task")
    table.add_column("chars", justify="right")
    if counted:
        table.add_column("tokens", justify="right")
    if context:
        table.add_column("fits")
    longest = sorted(lengths, key=lambda p: (-(p.tokens or p.chars), p.task_id))
    if len(longest) > PROMPT_ROWS_SHOWN:  # every task is in --json; the table shows the longest
        table.title = f"{title}: the {PROMPT_ROWS_SHOWN} longest of {len(longest)}"
        longest = longest[:PROMPT_ROWS_SHOWN]
    for p in longest:
        row = [p.task_id, str(p.chars)]
        if counted:
            row.append("-" if p.tokens is None else str(p.tokens))
        if context:
            row.append("-" if p.fits is None else "yes" if p.fits else "[bold red]prompt_too_long[/]")
        table.add_row(*row)
    console.out.print(table)


@tasks_app.command("evaluate")
def evaluate_command(
    path: PathArg,
    predictions: Annotated[Path, typer.Option(
        "--predictions", help="Predictions as SWE-bench takes them (JSONL, a JSON list, or a JSON object by id): "
                              "instance_id, model_name_or_path, model_patch (a diff against the task's starter).")],
    report_dir: Annotated[Path, typer.Option(
        "--report-dir", help="Where each instance's report.json goes: DIR/MODEL/INSTANCE_ID/report.json, "
                             "and the run's summary DIR/MODEL.json (SWE-bench's shape).")] = Path("evaluation"),
    sandbox: SandboxOpt = "auto",
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Sandboxed runs at once (default: cores).")]
    = None,
    json_out: JsonOpt = None,
) -> None:
    """Grade a file of predictions against repository tasks, writing SWE-bench's report.json per
    instance (resolved, FAIL_TO_PASS / PASS_TO_PASS success and failure)."""
    from verify_cli.checks.predictions import evaluate_predictions, read_predictions
    from verify_cli.cli.executor_setup import open_executor
    from verify_cli.cli.options import default_jobs
    from verify_cli.report.swebench import run_summary, write_instance_report
    from verify_cli.tasks.loader import load_task_set
    from verify_cli.tasks.model import Task

    if json_out == "-":
        console.use_stderr()
    preds = read_predictions(predictions)
    tasks = [t for t in load_task_set(path) if isinstance(t, Task)]
    runner = open_executor("local", sandbox=sandbox, warm=True, ray_address="auto",
                           sandbox_options=sandbox_options())
    with runner:
        evaluated = evaluate_predictions(tasks, preds, runner, jobs=jobs or default_jobs())
    table = Table(title=f"{len(evaluated)} prediction(s) against {len(tasks)} task(s)", title_justify="left")
    for name in ("instance", "model", "resolved", "note"):
        table.add_column(name)
    by_model: dict[str, list[Any]] = {}
    for item in evaluated:
        by_model.setdefault(item.prediction.model, []).append(item)
        resolved = bool(item.report and next(iter(item.report.values()))["resolved"])
        if item.report is not None:
            write_instance_report(report_dir / _safe(item.prediction.model) / _safe(item.prediction.instance_id),
                                  item.report)
        note = "; ".join(n for n in (item.error, f"test file edits dropped: {', '.join(item.dropped_tests)}"
                                     if item.dropped_tests else "") if n)
        table.add_row(item.prediction.instance_id, item.prediction.model, "yes" if resolved else "no", note or "-")
    console.out.print(table)
    summaries = {}
    for model, items in by_model.items():
        summaries[model] = run_summary(
            [i.report for i in items if i.report is not None], total=len(tasks),
            submitted=[i.prediction.instance_id for i in items],
            errors=[i.prediction.instance_id for i in items if i.error and i.report is not None],
            missing=[i.prediction.instance_id for i in items if i.report is None])
        write_json(report_dir / f"{_safe(model)}.json", summaries[model])
        console.info(f"{model}: {summaries[model]['resolved_instances']} of {len(items)} resolved; "
                     f"reports under {report_dir / _safe(model)}")
    if json_out:
        write_json(json_out, {"command": "tasks evaluate", "models": summaries})


def _safe(name: str) -> str:
    """A model or instance name as one folder name (SWE-bench replaces '/' the same way)."""
    return name.replace("/", "__").replace("\\", "__").lstrip(".") or "_"
