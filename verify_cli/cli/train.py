"""``verify-cli train`` and ``verify-cli trajectories``: parse options, delegate to verify_cli.rollout."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from verify_cli.cli import console
from verify_cli.cli.console import Table
from verify_cli.cli.executor_setup import open_executor, report_cluster
from verify_cli.cli.options import ExecutorOpt, RayAddressOpt, SandboxOpt
from verify_cli.errors import UsageError
from verify_cli.report.files import write_json
from verify_cli.tasks.loader import TaskLoadFailure, load_task_set

trajectories_app = typer.Typer(no_args_is_help=True, help="Read training runs: summaries and exports.")


def _backend_options(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--backend-option {pair!r} is not KEY=VALUE")
        try:
            out[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[key.replace("-", "_")] = value
    return out


def train_command(
    path: Annotated[Path, typer.Argument(help="A task folder, or a folder searched recursively for tasks.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder: shards/, _manifest.jsonl, run.json.")],
    backend: Annotated[str, typer.Option("--backend", "-b", help="Model backend: hf, vllm, openai, replay.")] = "hf",
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model folder or served model name.")] = None,
    base_url: Annotated[str | None, typer.Option(
        "--base-url", help="openai: the server's API root (default http://127.0.0.1:8000/v1).")] = None,
    chat: Annotated[bool | None, typer.Option(
        "--chat/--no-chat", show_default=False,
        help="openai: chat (the default) or completions endpoint.")] = None,
    device: Annotated[str | None, typer.Option("--device", help="hf: cpu, cuda or auto (the default).")] = None,
    backend_option: Annotated[list[str] | None, typer.Option(
        "--backend-option", help="KEY=VALUE passed to the model backend (repeatable).")] = None,
    group_size: Annotated[int, typer.Option("--group-size", "-G", min=1, help="Completions per task.")] = 8,
    batch_size: Annotated[int, typer.Option("--batch-size", "-B", min=1, help="Tasks per step.")] = 8,
    steps: Annotated[int, typer.Option("--steps", min=1, help="Steps to run (in total, across resumes).")] = 10,
    seed: Annotated[int, typer.Option("--seed", help="Run seed: batches and sampling derive from it.")] = 0,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0)] = 1.0,
    top_p: Annotated[float, typer.Option("--top-p", min=0.0, max=1.0)] = 1.0,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="New tokens per turn.")] = 1024,
    max_turns: Annotated[int | None, typer.Option(
        "--max-turns", min=1, help="Turns per episode (feedback between; default 1); --agent: model replies per "
                                   "episode (default 20).")] = None,
    update: Annotated[str, typer.Option(
        "--update", help="none: write rollouts only; grpo: update the policy.")] = "none",
    lr: Annotated[float, typer.Option("--lr", min=0.0, help="GRPO learning rate.")] = 1e-5,
    clip_eps: Annotated[float, typer.Option("--clip-eps", min=0.0, help="GRPO ratio clip.")] = 0.2,
    kl_coef: Annotated[float, typer.Option("--kl-coef", min=0.0, help="KL penalty to the initial policy.")] = 0.0,
    update_epochs: Annotated[int, typer.Option("--update-epochs", min=1, help="Optimiser passes per batch.")] = 1,
    no_std: Annotated[bool, typer.Option(
        "--no-std-normalise", help="Advantages r - mean, not divided by std.")] = False,
    dynamic_sampling: Annotated[bool, typer.Option(
        "--dynamic-sampling", help="Replace groups whose rewards are all equal with new tasks.")] = False,
    dynamic_budget: Annotated[int | None, typer.Option(
        "--dynamic-budget", min=0, help="Replacement groups per step (default: the batch size).")] = None,
    format_penalty: Annotated[float, typer.Option("--format-penalty", min=0.0)] = 0.0,
    length_penalty: Annotated[float, typer.Option("--length-penalty", min=0.0)] = 0.0,
    soft_length: Annotated[int | None, typer.Option("--soft-length", min=1)] = None,
    include_bucket: Annotated[list[str] | None, typer.Option(
        "--include-bucket", help="Train on tasks of this difficulty bucket too (solved, unsolved, defective).")] = None,
    no_visible_tests: Annotated[bool, typer.Option(
        "--no-tests-in-prompt", "--no-visible-tests", help="Leave the visible tests out of prompts.")] = False,
    no_system_prompt: Annotated[bool, typer.Option(
        "--no-system-prompt", help="No system message in prompts.")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its manifest.")] = False,
    sandbox: SandboxOpt = "auto",
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = "auto",
    grade_jobs: Annotated[int, typer.Option(
        "--jobs", "--grade-jobs", "-j", min=1, help="Sandboxed gradings at once.")] = 4,
    json_out: Annotated[str | None, typer.Option(
        "--json", help="Write the run summary as JSON (- for stdout).")] = None,
    agent: Annotated[bool, typer.Option(
        "--agent", help="Each sample is an agent episode in a sandbox session (tools, then the trusted grade); "
                        "-j bounds the sessions open at once.")] = False,
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
    """Sample groups per task, grade each completion in the sandbox, write trajectory shards; optionally GRPO."""
    from verify_cli.agents.episode import EpisodeLimits
    from verify_cli.models.registry import create_model_backend, model_backend_config
    from verify_cli.rollout.batches import select_tasks
    from verify_cli.rollout.episodes import SamplingOptions
    from verify_cli.rollout.inspect import summarize_run
    from verify_cli.rollout.loop import StepReport, TrainConfig, Trainer
    from verify_cli.rollout.rewards import RewardConfig
    from verify_cli.sampling.infra import WARN_RATE

    if json_out == "-":
        console.use_stderr()
    if update not in ("none", "grpo"):
        raise UsageError(f"--update {update!r}: choose none or grpo")
    turns = max_turns if max_turns is not None else (20 if agent else 1)
    items = list(load_task_set(path))
    failures = [i for i in items if isinstance(i, TaskLoadFailure)]
    for f in failures:
        console.warning(f"skipping {f.root}: {f.error}")
    selection = select_tasks([i for i in items if not isinstance(i, TaskLoadFailure)],
                             include_buckets=include_bucket or ())
    if selection.skipped:
        console.note(f"skipping {len(selection.skipped)} task(s) by difficulty bucket: "
                     + ", ".join(f"{k} ({v})" for k, v in sorted(selection.skipped.items())))
    options = _backend_options(backend_option or [])
    # The options difficulty and agent run take by name, as --backend-option KEY=VALUE does.
    given = {"model": model, "base_url": base_url, "chat": chat, "device": device}
    options.update({k: v for k, v in given.items() if v is not None})
    config = TrainConfig(
        group_size=group_size, batch_size=batch_size, steps=steps, seed=seed,
        sampling=SamplingOptions(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
        reward=RewardConfig(format_penalty=format_penalty, length_penalty=length_penalty, soft_length=soft_length),
        max_turns=turns, normalize_std=not no_std, dynamic_sampling=dynamic_sampling,
        dynamic_budget=dynamic_budget, update=update, grade_jobs=grade_jobs,
        include_tests=not no_visible_tests)
    if no_system_prompt:
        config = dataclasses.replace(config, system=None)
    model_config = model_backend_config(backend, options)  # checked before anything starts
    grader = open_executor(executor, sandbox=sandbox, warm=False, ray_address=ray_address)
    gen = create_model_backend(backend, model_config)
    with gen, grader:
        policy = None
        if update == "grpo":
            from verify_cli.rollout.grpo import GRPOConfig
            from verify_cli.rollout.policy import PolicyUpdater

            policy = PolicyUpdater(gen, out, GRPOConfig(lr=lr, clip_eps=clip_eps, kl_coef=kl_coef,
                                                        epochs=update_epochs),
                                   model_path=Path(model) if model else None)

        def on_step(r: StepReport) -> None:
            console.note(step_line(r))
            if r.rows and r.masked / r.rows > WARN_RATE:
                console.warning(f"WARNING: step {r.step}: {r.masked} of {r.rows} trajectories "
                                f"({100 * r.masked / r.rows:.1f}%) were infra_error (masked, never scored), over "
                                f"{100 * WARN_RATE:g}%: a masked share that moves with the policy is a signal")

        runner = None
        if agent:
            runner = _agent_runner(grader, gen, config, EpisodeLimits(
                max_turns=turns, token_budget=token_budget, wall_seconds=wall_seconds,
                observation_chars=observation_chars, max_tool_calls=max_tool_calls))
        trainer = Trainer(config, gen, grader, selection.tasks, out, sandbox_backend=grader.backend, policy=policy,
                          on_step=on_step, other_task_ids=selection.skipped, on_warning=console.warning,
                          runner=runner)
        result = trainer.run(resume=resume)
    report_cluster(grader)
    if result.resumed_from is not None:
        console.note(f"resumed after committed step {result.resumed_from}")
    summary = summarize_run(out)
    show_summary(summary)
    infra = summary["infra"]
    if infra["rate"] > WARN_RATE:
        console.warning(f"WARNING: {infra['infra_errors']} of {infra['samples']} trajectories "
                        f"({100 * infra['rate']:.1f}%) were infra_error (masked, never scored), over "
                        f"{100 * WARN_RATE:g}%; by cause: "
                        + "; ".join(f"{c} {100 * v['rate']:.1f}% ({v['count']})" for c, v in infra["causes"].items()))
    for task_id in infra["tasks_never_scored"]:
        console.warning(f"WARNING: {task_id}: could not be run here: every trajectory of it was infra_error")
    if json_out:
        write_json(json_out, summary)


def _agent_runner(grader: Any, gen: Any, config: Any, limits: Any) -> Any:
    """The agent group runner over the executor, which opens the sessions and grades (local: in
    this process's sandbox; Ray: each session on one node, an episode of a lost node re-run)."""
    from verify_cli.agents.protocol import agent_model
    from verify_cli.agents.training import AgentGroupRunner

    return AgentGroupRunner(agent_model(gen), grader, grader, sampling=config.sampling,
                            reward=config.reward, limits=limits, concurrency=config.grade_jobs)


def step_line(r: Any) -> str:
    reward = "-" if r.reward_mean is None else f"{r.reward_mean:.3f}"
    counts = " ".join(f"{k}={v}" for k, v in r.status_counts.items() if v)
    s = r.seconds
    extra = f", {len(r.all_equal_groups)} all-equal group(s)" if r.all_equal_groups else ""
    if r.replaced_groups:
        extra += f", {r.replaced_groups} replaced"
    return (f"step {r.step}: {r.rows} rows, reward {reward} [{counts}]{extra}; "
            f"gen {s['generation']:.2f}s, grading tail {s['grading_tail']:.2f}s, update {s['update']:.2f}s, "
            f"write {s.get('writing', 0.0):.2f}s")


def show_summary(summary: dict[str, Any]) -> None:
    out = console.out
    table = Table(title=f"run {escape(summary['run_dir'])}: {summary['steps']} step(s), {summary['rows']} "
                        f"trajectories", title_justify="left")
    for col in ("step", "rows", "reward mean", "ok rate", "masked"):
        table.add_column(col, justify="right")
    for p in summary["reward_curve"]:
        reward = "-" if p["reward_mean"] is None else f"{p['reward_mean']:.3f}"
        table.add_row(str(p["step"]), str(p["rows"]), reward, f"{p['ok_rate']:.2f}", str(p["masked"]))
    out.print(table)
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary["status_counts"].items()))
    out.print(f"statuses: {counts or '-'}; masked (never scored): {summary['masked']}; "
              f"all-equal groups: {summary['all_equal_groups']} of {summary['groups']}")
    infra = summary.get("infra") or {}
    if infra.get("infra_errors"):
        out.print(f"infra_error: {100 * infra['rate']:.1f}% of {infra['samples']} trajectories; by cause: "
                  + escape("; ".join(f"{c} {100 * v['rate']:.1f}% ({v['count']})" for c, v in infra["causes"].items())))
    tp = summary["throughput"]
    if tp["trajectories_per_s"]:
        sec = summary["seconds"]
        out.print(f"throughput: {tp['trajectories_per_s']:.2f} trajectories/s, {tp['model_tokens_per_s']:.1f} "
                  f"model tokens/s; time: " + ", ".join(f"{k} {v:.1f}s" for k, v in sorted(sec.items())))
    for p in summary["integrity_problems"]:
        console.error(p)


@trajectories_app.command("inspect")
def inspect_command(
    run: Annotated[Path, typer.Argument(help="A run folder written by verify-cli train.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Summarise a run: reward curve, status counts, throughput, shard integrity."""
    from verify_cli.rollout.inspect import summarize_run

    summary = summarize_run(run)
    if json_out:
        console.plain(json.dumps(summary, indent=2))
    else:
        show_summary(summary)
    if summary["integrity_problems"]:
        raise typer.Exit(1)


@trajectories_app.command("export")
def export_command(
    run: Annotated[Path, typer.Argument(help="A run folder written by verify-cli train.")],
    dest: Annotated[Path, typer.Option("--out", "-o", help="Destination file: *.jsonl or *.parquet.")],
    include_masked: Annotated[bool, typer.Option("--include-masked", help="Keep sandbox-error rows.")] = False,
    fmt: Annotated[str, typer.Option(
        "--format", help="trl: prompt/completion (conversational); verl: messages and tools (multi-turn). "
                         "Agent runs carry their tool calls and tool results in both.")] = "trl",
) -> None:
    """Export trajectories in TRL's prompt-completion format or verl's multi-turn messages format,
    with reward and advantage."""
    from verify_cli.agents.export import FORMATS, export_agent, is_agent_run
    from verify_cli.rollout.export import export_trl

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if is_agent_run(run) or fmt == "verl":
        n = export_agent(run, dest, fmt, include_masked=include_masked)
    else:
        n = export_trl(run, dest, include_masked=include_masked)
    console.info(f"wrote {n} trajectories to {dest}")
