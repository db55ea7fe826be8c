"""``verify-cli agent``: one agent episode on a task, printed turn by turn (``run``), or the same
session driven by a person at a prompt (``shell``): a task seen through an agent's eyes."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from verify_cli.agents.environment import TaskEnvironment
from verify_cli.agents.episode import AgentEpisode, AgentTurn, EpisodeLimits, run_episode
from verify_cli.agents.protocol import agent_model
from verify_cli.agents.tools import TOOLS, tool_call
from verify_cli.cli import console
from verify_cli.cli.executor_setup import open_executor
from verify_cli.cli.options import ExecutorOpt, RayAddressOpt, SandboxOpt
from verify_cli.errors import ExitCode
from verify_cli.grading.grader import Grader
from verify_cli.models.base import SamplingParams
from verify_cli.models.registry import create_model_backend, model_backend_config
from verify_cli.report.files import write_json
from verify_cli.sandbox.registry import create_sandbox, resolve_backend_name
from verify_cli.tasks.loader import load_task

agent_app = typer.Typer(no_args_is_help=True, help="Agent episodes: a model (or you) acting in a task's "
                                                   "sandbox session with tools, graded at submit.")

TaskArg = Annotated[Path, typer.Argument(help="A task folder.")]


def _open_sandbox(name: str) -> Any:
    backend, warning = resolve_backend_name(name)
    if warning:
        console.warning(warning)
    return create_sandbox(backend)


#: ``--display-chars``' default: a turn of a few screens at most, however long the model's reply
DISPLAY_CHARS = 1000


def _turn_printer(limit: int) -> Any:
    """Prints each turn for a person: the model's text, each call's arguments and each observation
    shortened to a head and tail of about ``limit`` characters (``--json`` keeps them whole)."""

    def show(episode: AgentEpisode, turn: AgentTurn) -> None:
        console.plain(f"── turn {turn.index + 1} ({turn.generation_seconds:.2f}s model, "
                      f"{turn.execution_seconds:.2f}s tools) " + "─" * 20)
        if turn.text.strip():
            console.plain(f"model: {console.head_tail(turn.text.strip(), limit)}")
        for call, obs in zip(turn.tool_calls, [o for o in turn.observations if o["tool_call_id"]], strict=False):
            console.plain(f"→ {call['name']}({console.shorten_arguments(call['arguments'], limit // 2)})")
            console.plain("  " + console.head_tail(obs["text"], limit).replace("\n", "\n  "))
        for obs in turn.observations:
            if not obs["tool_call_id"]:
                console.plain("  " + console.head_tail(obs["text"], limit).replace("\n", "\n  "))

    return show


def _show_outcome(status: str, score: float | None, reason: str, tests: Any) -> None:
    shown = "-" if score is None else f"{score:.2f}"
    console.plain(f"grade: {status} (score {shown}){': ' + reason if reason else ''}")
    for t in tests or ():
        console.plain(f"  {t.outcome.value:8} {t.id}")


def _exit_for(status: str) -> int:
    return {"passed": ExitCode.OK, "failed": ExitCode.DEFECTIVE}.get(status, ExitCode.INFRA)


@agent_app.command("run")
def agent_run_command(
    task_path: TaskArg,
    backend: Annotated[str, typer.Option("--backend", "-b", help="Model backend: openai, hf, vllm, replay.")],
    model: Annotated[str, typer.Option("--model", "-m", help="openai: served model name; hf/vllm: model "
                                                               "folder; replay: JSONL/Parquet file.")],
    base_url: Annotated[str | None, typer.Option(
        "--base-url", help="openai: the server's API root (default http://127.0.0.1:8000/v1).")] = None,
    chat: Annotated[bool | None, typer.Option(
        "--chat/--no-chat", show_default=False,
        help="openai: the chat API with tools (the default), or the text protocol over completions.")] = None,
    device: Annotated[str | None, typer.Option("--device", help="hf: cpu, cuda or auto (the default).")] = None,
    sandbox: SandboxOpt = "auto",
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Model replies at most.")] = 20,
    token_budget: Annotated[int, typer.Option("--token-budget", min=1, help="Tokens generated in all.")] = 32768,
    max_tokens: Annotated[int, typer.Option("--max-tokens", min=1, help="Tokens per reply.")] = 1024,
    wall_seconds: Annotated[float, typer.Option("--wall-seconds", help="The episode's wall limit.")] = 900.0,
    observation_chars: Annotated[int, typer.Option(
        "--observation-chars", min=200, help="Each observation is cut to this many characters (head and tail).")]
    = 4000,
    max_tool_calls: Annotated[int, typer.Option(
        "--max-tool-calls", min=1, help="Tool calls run per model reply (the rest answered 'not run').")]
    = 16,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0)] = 0.0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    json_out: Annotated[str | None, typer.Option(
        "--json", help="Write the episode as JSON, every turn whole (- for stdout).")] = None,
    display_chars: Annotated[int, typer.Option(
        "--display-chars", min=0,
        help="Console only: the model's text, each call's arguments and each observation shown as "
             "head and tail of about this many characters (0: whole; --json is always whole).")]
    = DISPLAY_CHARS,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = "auto",
) -> None:
    """Run one agent episode on TASK, printed turn by turn, then its trusted grade. With
    ``--executor ray`` the session lives on one node of the cluster and is graded there.

    Exit 0 when the grade passed, 1 when it failed, 3 when the machinery failed (no grade)."""
    if json_out == "-":
        console.use_stderr()
    task = load_task(task_path)
    # Each backend takes only its own options: those given are checked before anything starts.
    given = {"model": model, "base_url": base_url, "chat": chat, "device": device}
    model_config = model_backend_config(backend, {k: v for k, v in given.items() if v is not None})
    limits = EpisodeLimits(max_turns=max_turns, token_budget=token_budget, wall_seconds=wall_seconds,
                           observation_chars=observation_chars, max_tool_calls=max_tool_calls)
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, seed=seed)
    with open_executor(executor, sandbox=sandbox, warm=True, ray_address=ray_address) as ex:
        model_backend = create_model_backend(backend, model_config)
        am = agent_model(model_backend)
        try:  # the executor opens the session and grades
            episode = run_episode(task, am, ex, limits=limits, params=params,
                                  on_turn=None if json_out == "-" else _turn_printer(display_chars))
        finally:
            am.close()
    if json_out != "-" and episode.node:
        console.plain(f"session on node {episode.node}")
    outcome = episode.outcome
    if json_out != "-":
        console.plain(f"episode ended: {episode.end_reason} after {len(episode.turns)} turn(s), "
                      f"{episode.tokens} tokens, {episode.seconds:.1f}s")
        _show_outcome(episode.status, episode.score, outcome.reason if outcome else "",
                      outcome.grade.tests if outcome and outcome.grade else ())
    if json_out:
        write_json(json_out, episode.to_dict())
    raise typer.Exit(_exit_for(episode.status))


SHELL_HELP = """commands (each is the tool an agent calls, with what it would see):
  $ CMD | bash CMD       run a shell command in the session
  read PATH              read a file
  write PATH             write a file: type its lines, end with a line holding only EOF
  tests                  run the visible tests (the trusted grader)
  submit                 grade the editable files and leave
  tools                  the tools' JSON schemas, as a model gets them
  help | quit"""


def _shell_call(line: str, read_more: Any) -> tuple[str, dict[str, Any]] | None:
    word, _, rest = line.strip().partition(" ")
    if line.startswith("$"):
        return "bash", {"command": line[1:].strip()}
    if word == "bash":
        return "bash", {"command": rest}
    if word == "read":
        return "read_file", {"path": rest.strip()}
    if word == "write":
        return "write_file", {"path": rest.strip(), "content": read_more()}
    if word in ("tests", "run_tests"):
        return "run_tests", {}
    if word == "submit":
        return "submit", {}
    return None


@agent_app.command("shell")
def agent_shell_command(task_path: TaskArg, sandbox: SandboxOpt = "auto") -> None:
    """Drive TASK's agent session yourself at a prompt: the tools as commands, the observations
    exactly as a model sees them, the trusted grade at submit (or end of input)."""
    task = load_task(task_path)
    interactive = sys.stdin.isatty()

    def read_more() -> str:
        lines = []
        for raw in sys.stdin:
            if raw.rstrip("\n") == "EOF":
                break
            lines.append(raw)
        return "".join(lines)

    with _open_sandbox(sandbox) as sb, Grader(sb, warm=True) as grader:
        env = TaskEnvironment.open(task, sb, grader)
        try:
            console.plain(f"session on {sb.name} for {task.id}; editable: {', '.join(task.editable)}. "
                          "Type help for the commands.")
            while not env.ended:
                if interactive:
                    sys.stdout.write("agent> ")
                    sys.stdout.flush()
                line = sys.stdin.readline()
                if not line:
                    break
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                if line.strip() in ("quit", "exit"):
                    break
                if line.strip() == "help":
                    console.plain(SHELL_HELP)
                    continue
                if line.strip() == "tools":
                    console.plain(json.dumps([t.openai() for t in TOOLS], indent=2))
                    continue
                parsed = _shell_call(line, read_more)
                if parsed is None:
                    console.plain(f"unknown command {line.split()[0]!r}; type help")
                    continue
                obs = env.call(tool_call(parsed[0], parsed[1]))
                console.plain(obs.text)
            outcome = env.outcome()
        finally:
            env.close()
    _show_outcome(outcome.status, outcome.score, outcome.reason, outcome.grade.tests if outcome.grade else ())
    raise typer.Exit(_exit_for(outcome.status))

