"""``verify-cli difficulty``: parse options, delegate to verify_cli.difficulty, show the results.

This module prints (rich) the progress bar, the histogram and the table of hardest and easiest
tasks; everything else is library code.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from verify_cli._version import __version__
from verify_cli.checks.cache import ResultCache, default_cache_dir
from verify_cli.cli import console
from verify_cli.cli.console import Table
from verify_cli.cli.executor_setup import open_executor, report_cluster
from verify_cli.cli.options import ExecutorOpt, JobsOpt, PoolOpt, RayAddressOpt, SandboxOpt, sandbox_options
from verify_cli.difficulty.buckets import BUCKETS, DEFECTIVE, BucketScheme
from verify_cli.difficulty.defects import defects_from_check_tasks, defects_from_report, defects_of_load_failures
from verify_cli.difficulty.inputs import is_data_set, task_dirs_from_data_set
from verify_cli.difficulty.outputs import (
    HISTOGRAM_FILE,
    histogram_counts,
    select_buckets,
    write_back,
    write_dataset,
    write_histogram_png,
    write_tables,
)
from verify_cli.difficulty.runner import DifficultyOptions, DifficultyProgress, DifficultyReport, run_difficulty
from verify_cli.difficulty.runner import default_sample_cache as sample_cache_in
from verify_cli.errors import ExitCode, UsageError
from verify_cli.executors.base import Executor
from verify_cli.models.base import ModelBackend, SamplingParams
from verify_cli.models.registry import create_model_backend, model_backend_config
from verify_cli.report.files import write_json
from verify_cli.sampling.infra import InfraReport, infra_report
from verify_cli.sampling.status import SampleStatus
from verify_cli.sampling.step import SampleStep
from verify_cli.tasks.loader import TaskLoadFailure, load_task_set
from verify_cli.tasks.model import Task

if TYPE_CHECKING:  # the agent modules are imported by --agent runs only
    from verify_cli.agents.episode import EpisodeLimits


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{what} {text!r}: give whole numbers separated by commas, e.g. 1,5,10") from None
    if not values or min(values) < 1:
        raise UsageError(f"{what} {text!r}: give whole numbers of at least 1")
    return values


@contextmanager
def _progress(enabled: bool) -> Iterator[Any]:
    """A live line: samples generated, graded (of those planned) and graded per second."""
    progress = Progress(TextColumn("[bold]difficulty"), BarColumn(), TextColumn("{task.fields[line]}"),
                        TimeElapsedColumn(), console=console.err, transient=True,
                        disable=not (enabled and console.err.is_terminal))
    with progress:
        tid = progress.add_task("difficulty", total=1, line="")

        def update(p: DifficultyProgress) -> None:
            rate = p.graded / p.elapsed if p.elapsed > 0 else 0.0
            progress.update(tid, total=max(1, p.planned), completed=p.graded,
                            line=escape(f"generated {p.generated}, graded {p.graded}/{p.planned}, "
                                        f"{rate:.2f}/s {p.task_id}"))

        yield update


class _NoPandas:
    """A meta-path finder that makes ``import pandas`` fail (see :func:`_pyarrow_without_pandas`)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r} (while difficulty writes its outputs)", name=name)


@contextmanager
def _pyarrow_without_pandas() -> Iterator[None]:
    """Write the outputs without pyarrow importing pandas (over a second of CPU).

    The first time pyarrow converts Python objects it imports pandas, only to ask whether they are
    pandas objects; in a process that has not imported pandas none are. While the outputs are
    written pandas cannot be imported, so pyarrow answers "no" without it. Nothing is lost after:
    pyarrow retries the import the first time anything needs pandas itself (``to_pandas``)."""
    if "pandas" in sys.modules:
        yield
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def _histogram(report: DifficultyReport) -> None:
    counts = histogram_counts(report)
    top = max(counts) if counts else 0
    console.out.print("[bold]pass rates[/] (tasks per bin)")
    for i, c in enumerate(counts):
        bar = "█" * (round(30 * c / top) if top else 0)
        console.out.print(f"  {i / 10:.1f}-{(i + 1) / 10:.1f} | {bar} {c}", highlight=False)


def _table(report: DifficultyReport, show: int, infra: dict[str, InfraReport] | None = None) -> None:
    sampled = [t for t in report.tasks if t.stats.n > 0]
    ordered = sorted(sampled, key=lambda t: (t.stats.pass_rate or 0.0, t.task_id))
    picked = ordered if len(ordered) <= 2 * show else ordered[:show] + ordered[-show:]
    table = Table(title=f"difficulty: {len(report.tasks)} task(s), model {escape(report.model_id)}"
                        + ("" if len(picked) == len(ordered) else f" (the {show} hardest and {show} easiest)"),
                  title_justify="left")
    for col in ("task", "bucket", "n", "pass rate", "95% interval", "score", "visible", "statuses"):
        table.add_column(col, justify="right" if col in ("n", "pass rate", "score", "visible") else "left")
    # A task no sample could be graded in is listed with why, never left out of the table.
    unrun = [t for t in report.tasks if t.stats.n == 0 and t.bucket != DEFECTIVE]
    causes = {t.task_id: "; ".join(r.causes) for t in unrun if (r := (infra or {}).get(t.task_id))}
    for t in picked + unrun + [t for t in report.tasks if t.bucket == DEFECTIVE]:
        s = t.stats
        statuses = ", ".join(f"{k} {v}" for k, v in s.status_counts.items() if v)
        if causes.get(t.task_id):
            statuses += f" ({causes[t.task_id][:80]})"
        table.add_row(escape(t.task_id), t.bucket, str(s.n),
                      "-" if s.pass_rate is None else f"{s.pass_rate:.2f}",
                      "-" if not s.n else f"[{s.wilson_low:.2f}, {s.wilson_high:.2f}]",
                      "-" if s.mean_score is None else f"{s.mean_score:.2f}",
                      "-" if s.visible_pass_rate is None else f"{s.visible_pass_rate:.2f}",
                      escape(statuses or t.defect[:60]))
    console.out.print(table)


def _infra_by_task(report: DifficultyReport) -> dict[str, InfraReport]:
    """Each task's infra_error count and causes, from its sample records."""
    return {t.task_id: infra_report((r.status == SampleStatus.INFRA_ERROR.value, r.problems) for r in t.records)
            for t in report.tasks}


def _summary(report: DifficultyReport, out: Path, dataset_counts: dict[str, int],
             infra: dict[str, InfraReport] | None = None) -> dict[str, Any]:
    buckets = {b: sum(t.bucket == b for t in report.tasks) for b in BUCKETS}
    infra = infra if infra is not None else _infra_by_task(report)
    overall = InfraReport()
    for r in infra.values():
        overall.samples += r.samples
        overall.infra_errors += r.infra_errors
        overall.causes.update(r.causes)
    return {
        "tool": "verify-cli", "version": __version__, "command": "difficulty", "model": report.model_id,
        "params": report.params.to_dict(), "samples": report.options.samples, "adaptive": report.options.adaptive,
        "buckets": {b: n for b, n in buckets.items() if n}, "sampled": report.sampled,
        "fixed_budget": report.fixed_budget, "generated": report.generated, "cached": report.cached,
        "seconds": round(report.seconds, 3), "generation_seconds": round(report.generation_seconds, 3),
        "infra_errors": sum(t.stats.status_counts.get("infra_error", 0) for t in report.tasks),
        "infra": overall.to_dict(),
        "dataset": dataset_counts, "out": str(out), "warnings": list(report.warnings),
        "tasks": [{"task_id": t.task_id, "bucket": t.bucket, "n": t.stats.n, "correct": t.stats.correct,
                   "pass_rate": t.stats.pass_rate, "cached": t.cached, "generated": t.generated,
                   "visible_pass_hidden_fail": t.stats.visible_pass_hidden_fail,
                   "infra_error": infra[t.task_id].infra_errors,
                   "infra_causes": dict(infra[t.task_id].causes)} for t in report.tasks],
    }


def difficulty_command(
    path: Annotated[Path, typer.Argument(help="A task folder, a folder searched recursively for tasks, or a data "
                                              "set (Parquet, JSONL, datasets folder) with a 'path' column.")],
    backend: Annotated[str, typer.Option("--backend", "-b", help="Model backend: vllm, openai, hf, replay.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the results (created).")],
    model: Annotated[str, typer.Option(
        "--model", "-m", help="hf/vllm: model folder; openai: served model name; replay: JSONL/Parquet file.")],
    samples: Annotated[int, typer.Option(
        "--samples", "-n", min=1, help="Samples per task (the most, with --adaptive).")] = 8,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0)] = 1.0,
    top_p: Annotated[float, typer.Option("--top-p")] = 1.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1)] = 1024,
    seed: Annotated[int, typer.Option("--seed", help="Sampling seed (part of the cache key).")] = 0,
    adaptive: Annotated[bool, typer.Option(
        "--adaptive", help="Sample in rounds; stop a task once its bucket is decided.")] = False,
    round_size: Annotated[int, typer.Option("--round-size", min=1, help="Samples per round with --adaptive.")] = 4,
    confidence: Annotated[float, typer.Option("--confidence", help="Confidence of the intervals.")] = 0.95,
    thresholds: Annotated[str, typer.Option(
        "--thresholds", help="Pass-rate edges hard|medium and medium|easy.")] = "0.3,0.7",
    k: Annotated[str, typer.Option("--k", help="pass@k for these k (comma-separated).")] = "1",
    keep: Annotated[str | None, typer.Option(
        "--keep", help="Buckets the data set keeps, e.g. medium,hard (default: all but defective).")] = None,
    drop_extremes: Annotated[bool, typer.Option(
        "--drop-extremes", help="Leave unsolved and solved tasks out of the data set.")] = False,
    write_back_: Annotated[bool, typer.Option(
        "--write-back", help="Record the measured difficulty in each task.toml (a difficulty table).")] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Run check-tasks first (cached); defective tasks are bucketed 'defective'.")] = False,
    check_report: Annotated[Path | None, typer.Option(
        "--check-report", help="A check-tasks --json report naming defective tasks.")] = None,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", help="openai: the server's API root (default http://127.0.0.1:8000/v1).")] = None,
    chat: Annotated[bool | None, typer.Option(
        "--chat/--no-chat", show_default=False, help="openai: chat (the default) or completions endpoint.")] = None,
    concurrency: Annotated[int | None, typer.Option(
        "--concurrency", min=1, help="openai: requests in flight (default 8).")] = None,
    max_retries: Annotated[int | None, typer.Option(
        "--max-retries", min=0, help="openai: retries per request (default 5).")] = None,
    request_timeout: Annotated[float | None, typer.Option(
        "--request-timeout", help="openai: seconds per request (default 600).")] = None,
    tensor_parallel_size: Annotated[int | None, typer.Option(
        "--tensor-parallel-size", min=1, help="vllm: GPUs (default 1).")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(
        "--gpu-memory-utilization", help="vllm: fraction of GPU memory (default 0.9).")] = None,
    device: Annotated[str | None, typer.Option("--device", help="hf: cpu, cuda or auto (the default).")] = None,
    sandbox: SandboxOpt = "auto",
    pool_size: PoolOpt = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = "auto",
    jobs: JobsOpt = None,
    cold: Annotated[bool, typer.Option("--cold", help="No warm pytest workers.")] = False,
    no_tests_in_prompt: Annotated[bool, typer.Option(
        "--no-tests-in-prompt", help="Show the model the task and starter files, not the visible tests.")] = False,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help="Cache folder (samples, check-tasks).")]
    = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Neither read nor write cached samples.")] = False,
    json_out: Annotated[str | None, typer.Option("--json", help="Write a JSON summary (- for stdout).")] = None,
    show: Annotated[int, typer.Option("--show", min=1, help="Hardest and easiest tasks shown.")] = 10,
    plot: Annotated[bool, typer.Option(
        "--plot/--no-plot", help="Draw pass_rates.png (matplotlib: over a second of CPU to import).")] = True,
    agent: Annotated[bool, typer.Option(
        "--agent", help="Each sample is an agent episode in a sandbox session (tools, then the trusted grade); "
                        "-j bounds the sessions open at once.")] = False,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="--agent: model replies per episode.")] = 20,
    token_budget: Annotated[int, typer.Option(
        "--token-budget", min=1, help="--agent: tokens generated per episode.")] = 32768,
    wall_seconds: Annotated[float, typer.Option(
        "--wall-seconds", min=1.0, help="--agent: each episode's wall limit.")] = 900.0,
    observation_chars: Annotated[int, typer.Option(
        "--observation-chars", min=200, help="--agent: each observation is cut to this many characters.")] = 4000,
    max_tool_calls: Annotated[int, typer.Option(
        "--max-tool-calls", min=1, help="--agent: tool calls run per model reply (the rest answered 'not run').")]
    = 16,
) -> None:
    """Measure each task's pass rate under a model and re-bucket the data set by difficulty."""
    if json_out == "-":
        console.use_stderr()
    if not 0 < confidence < 1:
        raise UsageError(f"--confidence {confidence}: give a value between 0 and 1, e.g. 0.95")
    scheme = BucketScheme.parse(thresholds)
    ks = _ints(k, "--k")
    buckets = select_buckets(_words(keep), drop_extremes)
    params = SamplingParams(n=1, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed)
    if is_data_set(path):
        items: list[Task | TaskLoadFailure] = []
        for folder in task_dirs_from_data_set(path):
            items += list(load_task_set(folder))
    else:
        items = list(load_task_set(path))
    tasks = [i for i in items if isinstance(i, Task)]
    defects = defects_of_load_failures([i for i in items if isinstance(i, TaskLoadFailure)])
    if check_report is not None:
        defects.update(defects_from_report(check_report))
    root = cache_dir or default_cache_dir()
    options = DifficultyOptions(samples=samples, params=params, seed=seed, jobs=jobs or 2, adaptive=adaptive,
                                round_size=round_size, confidence=confidence, scheme=scheme, ks=ks,
                                include_tests=not no_tests_in_prompt)
    # Each backend takes only its own options: those given are checked here, before anything starts.
    given = {"model": model, "base_url": base_url, "chat": chat, "concurrency": concurrency,
             "max_retries": max_retries, "timeout_seconds": request_timeout,
             "tensor_parallel_size": tensor_parallel_size, "gpu_memory_utilization": gpu_memory_utilization,
             "device": device}
    model_config = model_backend_config(backend, {k: v for k, v in given.items() if v is not None})
    grader = open_executor(executor, sandbox=sandbox, sandbox_options=sandbox_options(pool_size=pool_size),
                           warm=not cold, ray_address=ray_address)
    with grader:
        if check:
            check_cache = None if no_cache else ResultCache(root, "check-tasks")
            with console.progress_bar("check-tasks", 4 * len(tasks)) as advance:
                defects.update(defects_from_check_tasks(
                    [t for t in tasks if t.id not in defects], grader, jobs=options.jobs, cache=check_cache,
                    backend_id=grader.cache_identity, on_progress=lambda p: advance(p.task_id, completed=p.done)))
        model_backend = create_model_backend(backend, model_config)
        step = None
        if agent:
            from verify_cli.agents.episode import EpisodeLimits

            limits = EpisodeLimits(max_turns=max_turns, token_budget=token_budget, wall_seconds=wall_seconds,
                                   observation_chars=observation_chars, max_tool_calls=max_tool_calls)
            model_backend, step = _episodes(grader, model_backend, tasks, limits, options.jobs)
        with model_backend, _progress(json_out != "-") as on_progress:
            started = time.monotonic()
            report = run_difficulty(tasks, model_backend, grader, options, defective=defects,
                                    cache=None if no_cache else sample_cache_in(root), on_progress=on_progress,
                                    on_warning=console.warning, step=step)
            report.seconds = time.monotonic() - started
    report_cluster(grader)
    with _pyarrow_without_pandas():
        write_tables(report, out)
        dataset_counts = write_dataset(report, out, buckets)
    if plot:
        write_histogram_png(report, out / HISTOGRAM_FILE)
    if write_back_:
        written = write_back(report)
        console.info(f"wrote the measured difficulty into {len(written)} task.toml file(s)")
    infra = _infra_by_task(report)
    _table(report, show, infra)
    _histogram(report)
    _findings(report)
    summary = _summary(report, out, dataset_counts, infra)
    for t in report.tasks:  # a task no sample could run in is named, never left to read as unsampled
        if t.stats.n == 0 and infra[t.task_id].infra_errors:
            causes = "; ".join(infra[t.task_id].causes)
            console.warning(f"{t.task_id}: could not be run here: all {infra[t.task_id].infra_errors} of its "
                            f"samples were infra_error ({causes})")
    console.info(f"{report.sampled} samples ({report.cached} from the cache, {report.generated} generated) in "
                 f"{report.seconds:.1f}s; results in {out}")
    if adaptive and report.fixed_budget:
        saved = report.fixed_budget - report.sampled
        console.info(f"adaptive: {report.sampled} samples instead of {report.fixed_budget} for a fixed budget "
                     f"({saved} saved, {100 * saved / report.fixed_budget:.0f}%)")
    if json_out:
        write_json(json_out, summary)
    if summary["infra_errors"]:
        console.warning(f"{summary['infra_errors']} sample(s) could not be graded (sandbox failures persisted "
                        "after retries); they are not counted. Rerun to retry them.")
        overall = summary["infra"]
        console.warning(f"infra_error rate {100 * overall['rate']:.1f}% of {overall['samples']} samples; by cause: "
                        + "; ".join(f"{c} {100 * v['rate']:.1f}% ({v['count']})" for c, v in overall["causes"].items()))
        raise typer.Exit(ExitCode.INFRA)


def _episodes(grader: Executor, inner: ModelBackend, tasks: list[Task], limits: EpisodeLimits,
              jobs: int) -> tuple[ModelBackend, SampleStep]:
    """The episode backend (``jobs`` sessions at once, opened and graded by the executor: on Ray
    each session lives on one node) and its step."""
    from verify_cli.agents.protocol import agent_model
    from verify_cli.agents.sampler import EpisodeBackend, EpisodeStep

    return (EpisodeBackend(agent_model(inner), inner, grader, grader, tasks, limits=limits, concurrency=jobs),
            EpisodeStep())


def _words(text: str | None) -> list[str] | None:
    return [w.strip() for w in text.split(",") if w.strip()] if text else None


def _findings(report: DifficultyReport) -> None:
    """Curation findings: visible tests that wrong answers pass."""
    weak = [t for t in report.tasks if t.stats.visible_pass_hidden_fail]
    for t in weak:
        console.warning(f"curation finding: {t.task_id}: {t.stats.visible_pass_hidden_fail} of {t.stats.n} samples "
                        "passed every visible test and failed a hidden one: the visible tests are weak")
