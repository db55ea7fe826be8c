"""``verify-cli audit``: parse options, delegate to verify_cli.checks.audit, hand results to console."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from verify_cli._version import __version__
from verify_cli.checks.audit import AuditOptions, AuditProgress, AuditVerdict, audit_tasks
from verify_cli.checks.audit.model import DEFAULT_FAIL_UNDER
from verify_cli.checks.flaky_power import DEFAULT_REPEATS, FlakinessPower
from verify_cli.checks.probes import probe_names
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
from verify_cli.errors import ExitCode, UsageError
from verify_cli.report.files import write_json
from verify_cli.tasks.loader import deprecation_notes, load_task_set


def audit_command(
    path: Annotated[Path | None, typer.Argument(
        help="A task folder, or a folder searched recursively for tasks.")] = None,
    sandbox: SandboxOpt = "auto",
    pool_size: PoolOpt = None,
    docker_mode: DockerModeOpt = None,
    jobs: JobsOpt = None,
    reruns: Annotated[int, typer.Option(
        "--repeats", "--reruns", min=0,
        help="Reference runs for flakiness, as check-tasks' --repeats (the default catches a 1-in-4 "
             "flaky test with 95% probability).")
    ] = DEFAULT_REPEATS,
    max_mutants: Annotated[int, typer.Option("--max-mutants", min=0,
                                             help="Mutants per task, shared evenly between operators.")] = 50,
    max_per_operator: Annotated[int | None, typer.Option("--max-per-operator", min=0,
                                                         help="Mutants per operator and task.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the mutant sampling.")] = 0,
    no_mutants: Annotated[bool, typer.Option("--no-mutants", help="Skip the mutation check.")] = False,
    no_flaky: Annotated[bool, typer.Option("--no-flaky", help="Skip the flakiness reruns.")] = False,
    no_probes: Annotated[bool, typer.Option("--no-probes", help="Skip the reward-hack probes.")] = False,
    no_labelled: Annotated[bool, typer.Option("--no-labelled", help="Skip labelled solutions.")] = False,
    probe: Annotated[list[str] | None, typer.Option(
        "--probe", help="Run only this probe (repeatable); see --list-probes.")] = None,
    list_probes: Annotated[bool, typer.Option("--list-probes", help="List the probes and exit.")] = False,
    no_fail_fast: Annotated[bool, typer.Option(
        "--no-fail-fast", help="Run every selected test of a mutant (exact per-test kill "
                                "counts) and of a probe (full tallies).")] = False,
    no_coverage: Annotated[bool, typer.Option(
        "--no-coverage", help="Run every test for every mutant (no coverage-based selection).")] = False,
    observed_equivalence: Annotated[bool, typer.Option(
        "--observed-equivalence",
        help="Set apart (as equivalent, not counted) survivors whose every call from the tests "
             "answers as the reference's did (traced reruns; docs/commands/audit.md: Equivalent mutants).")] = False,
    fail_under: Annotated[float, typer.Option(
        "--fail-under", min=0, max=100,
        help="A task whose mutation score (0-100) is below this is unreliable (exit 1); 0 turns it off.")
    ] = DEFAULT_FAIL_UNDER,
    json_out: Annotated[str | None, typer.Option(
        "--json", help="Write the full report as JSON (- for stdout).")] = None,
    cold: Annotated[bool, typer.Option("--cold", help="Start every run from scratch: no warm pytest workers.")] = False,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = "auto",
) -> None:
    """Measure how far each task's tests can be trusted: mutants, flaky tests, reward hacks.

    Exit 1 when a probe earns a score on a task, a test is flaky or fails on the reference in
    every rerun, a labelled solution is judged wrongly, or a mutation score is below --fail-under.
    """
    if list_probes:
        console.probe_list()
        return
    if path is None:
        raise UsageError("missing the task folder to audit", hint="verify-cli audit PATH (see --help)")
    if json_out == "-":
        console.use_stderr()
    if probe and (unknown := set(probe) - set(probe_names())):
        raise UsageError(f"unknown probe(s): {', '.join(sorted(unknown))}",
                         hint=f"known probes: {', '.join(probe_names())}")
    items = list(load_task_set(path))
    for note in deprecation_notes(items):
        console.warning(f"deprecated: {note}")
    options = AuditOptions(mutants=not no_mutants, flaky=not no_flaky, probes=not no_probes,
                           labelled=not no_labelled, reruns=reruns, max_mutants=max_mutants,
                           max_per_operator=max_per_operator, seed=seed, jobs=jobs or default_jobs(),
                           fail_fast=not no_fail_fast, select_by_coverage=not no_coverage,
                           observed_equivalence=observed_equivalence,
                           probe_names=frozenset(probe) if probe else None)
    runner = open_executor(executor, sandbox=sandbox, warm=not cold, ray_address=ray_address,
                           sandbox_options=sandbox_options(pool_size=pool_size, docker_mode=docker_mode))
    backend = runner.backend
    with runner, console.audit_progress("auditing tasks") as update:
        def on_progress(p: AuditProgress) -> None:
            update(f"{p.task_id} ({p.what})", p.done, p.total)

        audits = audit_tasks(items, runner, options, on_progress=on_progress)
    report_cluster(runner)
    console.audit_report(audits, backend=backend, isolation=runner.isolation, options=options,
                         fail_under=fail_under)
    console.sandbox_facts(runner.facts())
    if json_out:
        write_json(json_out, {
            "tool": "verify-cli", "version": __version__, "command": "audit",
            "sandbox": {"backend": backend, "isolation": runner.isolation, **runner.facts()},
            "executor": executor,
            "flakiness_power": FlakinessPower(reruns).to_dict() if reruns and not no_flaky else None,
            "options": {"reruns": reruns, "max_mutants": max_mutants, "max_per_operator": max_per_operator,
                        "seed": seed, "mutants": not no_mutants, "flaky": not no_flaky,
                        "probes": not no_probes, "labelled": not no_labelled,
                        "fail_fast": not no_fail_fast, "coverage_selection": not no_coverage,
                        "fail_under": fail_under},
            "summary": {**{v.value: sum(a.verdict(fail_under) is v for a in audits) for v in AuditVerdict},
                        "not_gradeable_two_process": sum(a.not_gradeable_two_process for a in audits)},
            "tasks": [a.to_dict(fail_under) for a in audits]})
    verdicts = [a.verdict(fail_under) for a in audits]
    if AuditVerdict.UNRELIABLE in verdicts:
        raise typer.Exit(ExitCode.DEFECTIVE)
    if AuditVerdict.ERROR in verdicts:
        raise typer.Exit(ExitCode.INFRA)
