"""``verify-cli check-tasks``: parse options, delegate to verify_cli.checks, hand results to console."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from verify_cli._version import __version__
from verify_cli.checks.cache import ResultCache, default_cache_dir
from verify_cli.checks.report import TaskVerdict
from verify_cli.checks.solvability import DEFAULT_REPEATS, CheckOptions, Progress, check_tasks
from verify_cli.cli import console
from verify_cli.cli.executor_setup import open_executor, report_cluster
from verify_cli.cli.options import (
    DockerModeOpt,
    ExecutorOpt,
    JobsOpt,
    PoolOpt,
    RayAddressOpt,
    SandboxOpt,
    default_jobs,
    sandbox_options,
)
from verify_cli.errors import ExitCode
from verify_cli.report.files import write_json, write_junit
from verify_cli.tasks.loader import TaskLoadFailure, deprecation_notes, load_task_set


def check_tasks_command(
    path: Annotated[Path, typer.Argument(help="A task folder, or a folder searched recursively for tasks.")],
    sandbox: SandboxOpt = "auto",
    pool_size: PoolOpt = None,
    docker_mode: DockerModeOpt = None,
    repeats: Annotated[int, typer.Option(
        "--repeats", "-n", min=1,
        help="Reference runs per task (the default catches a 1-in-4 flaky test with 95% probability; "
             "after the first 3, only tasks whose reference passed them all run the rest).")] = DEFAULT_REPEATS,
    jobs: JobsOpt = None,
    json_out: Annotated[
        str | None, typer.Option("--json", help="Write the full report as JSON (- for stdout).")] = None,
    junit_out: Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML, one test case per task.")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Ignore and do not write the result cache.")] = False,
    cold: Annotated[bool, typer.Option(
        "--cold", help="Start every run from scratch: no warm pytest workers.")] = False,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help="Cache folder.")] = None,
    flaky_all_tests: Annotated[bool, typer.Option(
        "--flaky-all-tests", help="Repository tasks: judge every collected test for flakiness, not only "
                                  "the FAIL_TO_PASS and PASS_TO_PASS tests (SWE-bench's curation).")] = False,
    swebench_reports: Annotated[Path | None, typer.Option(
        "--swebench-reports", help="Repository tasks: write SWE-bench's report.json of the reference (the gold "
                                   "patch) per task, DIR/TASK_ID/report.json.")] = None,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = "auto",
) -> None:
    """Prove every task sound: the reference passes in fresh sandboxes, the starter fails, no test is flaky."""
    if json_out == "-":
        console.use_stderr()
    items = list(load_task_set(path))
    for note in deprecation_notes(items):
        console.warning(f"deprecated: {note}")
    runner = open_executor(executor, sandbox=sandbox, warm=not cold, ray_address=ray_address,
                           sandbox_options=sandbox_options(pool_size=pool_size, docker_mode=docker_mode))
    backend = runner.backend
    cache = None if no_cache else ResultCache(cache_dir or default_cache_dir(), "check-tasks")
    options = CheckOptions(repeats=repeats, jobs=jobs or default_jobs(), flaky_all_tests=flaky_all_tests)
    total_runs = sum(repeats + 1 for i in items if not isinstance(i, TaskLoadFailure))
    with runner, console.progress_bar("checking tasks", total_runs) as advance:
        def on_progress(p: Progress) -> None:
            advance(f"{p.task_id} ({p.phase})", completed=p.done, total=p.total)

        reports = check_tasks(items, runner, options, cache=cache,
                              backend_id=runner.cache_identity, on_progress=on_progress)
    report_cluster(runner)
    console.check_tasks_table(reports, backend=backend, isolation=runner.isolation, repeats=repeats,
                              power=options.power)
    facts = runner.facts()  # the images of cached verdicts too: their identities named them
    console.sandbox_facts(facts)
    if json_out:
        write_json(json_out, {
            "tool": "verify-cli", "version": __version__, "command": "check-tasks",
            "sandbox": {"backend": backend, "isolation": runner.isolation, **facts}, "executor": executor,
            "repeats": repeats,
            "flakiness_power": options.power.to_dict(),
            "summary": {v.value: sum(r.verdict is v for r in reports) for v in TaskVerdict},
            "tasks": [r.to_dict() for r in reports]})
    if junit_out:
        write_junit(junit_out, reports)
    if swebench_reports is not None:
        from verify_cli.report.swebench import reference_report, write_instance_report

        by_id = {i.id: i for i in items if not isinstance(i, TaskLoadFailure)}
        for r in reports:
            task = by_id.get(r.task_id)
            report = reference_report(task, r.runs) if task is not None else None
            if report is not None:
                write_instance_report(swebench_reports / r.task_id, report)
    if any(r.verdict in (TaskVerdict.DEFECTIVE, TaskVerdict.ENVIRONMENT_ERROR) for r in reports):
        raise typer.Exit(ExitCode.DEFECTIVE)
    if any(r.verdict is TaskVerdict.NOT_GRADEABLE for r in reports):
        raise typer.Exit(ExitCode.NOT_GRADEABLE)
    if any(r.verdict is TaskVerdict.ERROR for r in reports):
        raise typer.Exit(ExitCode.INFRA)
