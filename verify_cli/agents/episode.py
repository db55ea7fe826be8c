"""The agent loop: a model acts in a task's session, turn by turn, until it submits or a limit ends
the episode; then the editable files are graded by the trusted grader.

An episode ends at ``submit``, at the turn limit, at the token budget or at its wall limit (and
when the agent kills its own session: a graded failure). A malformed tool call, or a reply with
no call at all, is an observation telling the model what was wrong; it costs a turn, never an
exception. Many episodes run at once (:func:`run_episodes`): while one waits for the model,
others execute tools, so generation and tool execution overlap.

Episodes run over a sandbox and a grader, or over an executor (:class:`~verify_cli.executors.
base.Executor`: it opens the sessions and grades; on Ray each session lives on one node, new ones
on the least-loaded node). An episode whose session the machinery lost (its node or actor gone)
ends as ``infra_error``, never scored, and :func:`run_episodes` runs it again from the start.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from verify_cli.agents.environment import EpisodeOutcome, GradesOne, SessionOpener, TaskEnvironment, grade_files
from verify_cli.agents.protocol import AgentModel, Message, ModelTurn
from verify_cli.agents.tools import TOOLS, ToolCall, ToolSpec, clean_text
from verify_cli.errors import UsageError
from verify_cli.models.base import ModelBackendError, SamplingParams
from verify_cli.models.prompts import show_file
from verify_cli.sandbox.sessions.base import SessionError
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import matches_any

AGENT_SYSTEM = (
    "You are a software engineer working in a sandboxed copy of a project. Use the tools to look "
    "around, edit the files, and run the visible tests. When your files are ready, call submit: only "
    "the files the task lets you edit are graded, by the task's full tests.")

NO_CALL_HINT = ("Your reply made no tool call. Call one of the tools ({tools}), or submit when your "
                "files are ready.")


#: Tool calls of one reply that are run by default; the rest are answered "not run".
MAX_TOOL_CALLS_PER_REPLY = 16


@dataclass(frozen=True)
class EpisodeLimits:
    """When an episode ends: ``max_turns`` model replies (end reason ``max_turns``),
    ``token_budget`` tokens generated in all (``token_budget``: every token the model produced,
    text and tool-call arguments, as its token ids or the server's ``usage`` count them, else
    estimated at 4 characters a token; a reply past the budget has none of its calls run) and
    ``wall_seconds`` of its whole life (``wall``: it bounds every model request and every tool
    call, a command being stopped where the limit falls). Each reply runs at most
    ``max_tool_calls`` calls (the others are answered "not run"); each observation is cut to
    ``observation_chars``; ``command_seconds`` is each command's own limit (None: the task's)."""

    max_turns: int = 20
    token_budget: int = 32768
    wall_seconds: float = 900.0
    observation_chars: int = 4000
    command_seconds: float | None = None
    max_tool_calls: int = MAX_TOOL_CALLS_PER_REPLY

    def __post_init__(self) -> None:
        for name in ("max_turns", "token_budget", "max_tool_calls", "observation_chars"):
            if getattr(self, name) < 1:
                raise UsageError(f"episode limit {name} is {getattr(self, name)}; it must be at least 1",
                                 hint=f"give {name} >= 1")
        if not self.wall_seconds > 0:
            raise UsageError(f"episode limit wall_seconds is {self.wall_seconds}; it must be above 0",
                             hint="give wall_seconds > 0")


@dataclass
class AgentTurn:
    """One model reply and what its tool calls returned."""

    index: int
    text: str
    tool_calls: list[dict[str, Any]]
    observations: list[dict[str, Any]]
    generation_seconds: float
    execution_seconds: float
    finish_reason: str = "stop"
    token_ids: tuple[int, ...] = ()
    prompt_token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "text": self.text, "tool_calls": self.tool_calls,
                "observations": self.observations, "finish_reason": self.finish_reason,
                "generation_seconds": round(self.generation_seconds, 4),
                "execution_seconds": round(self.execution_seconds, 4), "tokens": len(self.token_ids)}


@dataclass
class AgentEpisode:
    """One episode: every turn, how it ended, and the trusted outcome."""

    task_id: str
    sample_index: int = 0
    turns: list[AgentTurn] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    #: submit, max_turns, token_budget, wall (which limit ended it), session_dead, infra_error
    end_reason: str = ""
    outcome: EpisodeOutcome | None = None
    tokens: int = 0
    seconds: float = 0.0
    #: The node its session lived on (empty: this machine).
    node: str = ""
    #: For an ``infra_error``: which machinery failed, ``sandbox`` (the session or its node, the
    #: grader) or ``model``; empty otherwise.
    machinery: str = ""
    #: Earlier runs of this episode lost to the sandbox machinery and re-queued (their reasons).
    lost: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.outcome.status if self.outcome is not None else "infra_error"

    @property
    def score(self) -> float | None:
        return self.outcome.score if self.outcome is not None else None

    @property
    def generation_seconds(self) -> float:
        return sum(t.generation_seconds for t in self.turns)

    @property
    def execution_seconds(self) -> float:
        return sum(t.execution_seconds for t in self.turns)

    def to_dict(self, *, trainable: bool = False) -> dict[str, Any]:
        """The episode as plain data; ``trainable``: its outcome as :meth:`EpisodeOutcome.to_dict`
        gives it for a record that could be trained on (no hidden test's text)."""
        return {"task_id": self.task_id, "sample_index": self.sample_index, "status": self.status,
                "score": self.score, "end_reason": self.end_reason, "turns": [t.to_dict() for t in self.turns],
                "tokens": self.tokens, "seconds": round(self.seconds, 4),
                "generation_seconds": round(self.generation_seconds, 4),
                "execution_seconds": round(self.execution_seconds, 4),
                "outcome": self.outcome.to_dict(trainable=trainable) if self.outcome is not None else None,
                **({"node": self.node} if self.node else {}), **({"lost": list(self.lost)} if self.lost else {})}


#: A work folder this small is shown whole in the first message; a larger one (a repository) is
#: listed, and the agent reads what it needs.
SHOWN_FILES = 12
SHOWN_BYTES = 48_000


def task_message(task: Task) -> str:
    """The task as an agent's first user message: prompt.md, the work folder (shown whole when
    small, else listed: the agent looks around with its tools), what it may edit, how to answer."""
    files = {**task.starter_files(), **task.visible_test_files()}
    parts = [task.prompt.strip() or f"Solve the task {task.id}."]
    editable = ", ".join(f"`{g}`" for g in task.editable)
    small = len(files) <= SHOWN_FILES and sum(p.stat().st_size for p in files.values()) <= SHOWN_BYTES
    if small:
        parts.append(f"## The work folder\n\nYou may change only files matching: {editable}.")
        parts += [show_file(rel, p.read_bytes(), "" if matches_any(task.editable, rel) else "read-only")
                  for rel, p in sorted(files.items())]
    else:
        listing = "\n".join(f"- {rel}{'' if matches_any(task.editable, rel) else ' (read-only)'}"
                            for rel in sorted(files))
        parts.append(f"## The work folder ({len(files)} files)\n\nYou may change only files matching: "
                     f"{editable}.\n\n{listing}")
    parts.append("## How to answer\n\nUse the tools: read and edit files, run the visible tests with "
                 "run_tests, and call submit when your files are ready.")
    return "\n\n".join(parts) + "\n"


def first_messages(task: Task, *, system: str = AGENT_SYSTEM) -> list[Message]:
    """The conversation an episode starts from: the system message and :func:`task_message`."""
    return [{"role": "system", "content": system}, {"role": "user", "content": task_message(task)}]


def _tokens(turn: ModelTurn) -> int:
    """The tokens a reply cost: its token ids (hf, vllm), else the server's ``usage``, else an
    estimate of 4 characters a token over all it wrote (text, tool names and arguments)."""
    if turn.token_ids:
        return len(turn.token_ids)
    if turn.usage_tokens is not None:
        return max(1, turn.usage_tokens)
    written = len(turn.text) + sum(len(c.name) + len(c.raw_arguments or json.dumps(dict(c.arguments or {})))
                                   for c in turn.tool_calls)
    return max(1, math.ceil(written / 4))


class _ModelPastWall(Exception):
    """The model did not answer before the episode's wall-clock limit."""


def _act_within(model: AgentModel, messages: list[Message], tools: Sequence[ToolSpec], params: SamplingParams,
                seconds: float) -> ModelTurn:
    """``model.act`` within ``seconds``: a request still in flight then is abandoned (its thread
    finishes on its own) and _ModelPastWall raised; the model's own errors are raised as they are."""
    done = threading.Event()
    box: dict[str, Any] = {}
    sent = [dict(m) for m in messages]  # a request abandoned mid-flight never sees later turns

    def run() -> None:
        try:
            box["turn"] = model.act(sent, tools, params)
        except BaseException as e:  # handed to the caller
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=run, daemon=True, name="agent-model").start()
    if not done.wait(max(0.0, seconds)):
        raise _ModelPastWall
    if "error" in box:
        raise box["error"]
    turn: ModelTurn = box["turn"]
    return replace(turn, text=clean_text(turn.text), malformed=tuple(clean_text(m) for m in turn.malformed))


_NOT_RUN = {"token_budget": "not run: the episode's token budget was spent",
            "wall": "not run: the episode's wall-clock limit was reached"}


def _not_run(call: ToolCall, why: str) -> tuple[dict[str, Any], Message]:
    """The observation and tool message of a call that was not run (every call gets an answer)."""
    return ({"tool_call_id": call.id, "name": call.name, "text": why, "error": True, "truncated_chars": 0,
             "seconds": 0.0},
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": why})


def _grader_of(sandbox: SessionOpener, grader: GradesOne | None) -> GradesOne:
    if grader is not None:
        return grader
    if not hasattr(sandbox, "grade"):
        raise UsageError("an episode over a sandbox needs a grader", hint="pass a Grader, or an Executor alone")
    return sandbox  # type: ignore[return-value]  # an Executor: it opens the sessions and grades


def run_episode(task: Task, model: AgentModel, sandbox: SessionOpener, grader: GradesOne | None = None, *,
                limits: EpisodeLimits = EpisodeLimits(), params: SamplingParams | None = None,
                tools: Sequence[ToolSpec] = TOOLS, sample_index: int = 0,
                on_turn: Callable[[AgentEpisode, AgentTurn], None] | None = None,
                avoid_nodes: Collection[str] = ()) -> AgentEpisode:
    """One episode of ``model`` on ``task``, its session opened by ``sandbox`` (a Sandbox, or an
    Executor) and graded by ``grader`` (None: ``sandbox`` is an Executor, which grades too).
    Never raises for the model's or the agent's faults: a model that cannot be reached, or a
    sandbox that cannot be built or is lost, ends it as ``infra_error`` (:attr:`AgentEpisode.
    machinery` says which). ``avoid_nodes``: nodes an executor should not open the session on."""
    grades = _grader_of(sandbox, grader)
    started = time.monotonic()
    episode, files = _play(task, model, sandbox, grades, limits=limits, params=params, tools=tools,
                           sample_index=sample_index, on_turn=on_turn, avoid_nodes=avoid_nodes, started=started)
    return _judge(episode, task, grades, files, started)


def _play(task: Task, model: AgentModel, sandbox: SessionOpener, grades: GradesOne, *, limits: EpisodeLimits,
          params: SamplingParams | None, tools: Sequence[ToolSpec], sample_index: int,
          on_turn: Callable[[AgentEpisode, AgentTurn], None] | None, avoid_nodes: Collection[str],
          started: float) -> tuple[AgentEpisode, dict[str, bytes] | None]:
    """An episode's turns in its session, then its editable files (None: there is nothing to
    grade, the episode's outcome says why). The session is closed on return: grading needs none."""
    params = params or SamplingParams(max_tokens=1024)
    episode = AgentEpisode(task_id=task.id, sample_index=sample_index, messages=first_messages(task))
    try:
        env = TaskEnvironment.open(task, sandbox, grades, observation_chars=limits.observation_chars,
                                   command_seconds=limits.command_seconds, avoid=avoid_nodes)
    except SessionError as e:
        episode.end_reason = "infra_error"
        episode.machinery = "sandbox"
        episode.outcome = EpisodeOutcome("infra_error", None, f"no session could be opened: {e}")
        episode.seconds = time.monotonic() - started
        return episode, None
    episode.node = env.session.node
    try:
        episode.end_reason = _loop(episode, env, model, tools, params, limits, started, on_turn)
        if episode.end_reason == "infra_error" and episode.outcome is not None:
            episode.machinery = "model"
            return episode, None
        taken = env.take()
        if env.dead is not None:
            episode.end_reason = "session_dead"
        if isinstance(taken, EpisodeOutcome):
            episode.outcome = taken
            if taken.status == "infra_error":
                episode.machinery = "sandbox"
            return episode, None
        return episode, taken
    finally:
        env.close()
        episode.seconds = time.monotonic() - started


def _judge(episode: AgentEpisode, task: Task, grades: GradesOne, files: dict[str, bytes] | None,
           started: float) -> AgentEpisode:
    """The trusted grade of a played episode's files (nothing to do when there are none)."""
    if files is None:
        return episode
    episode.outcome = grade_files(task, grades, files)
    if episode.outcome.status == "infra_error":
        episode.machinery = "sandbox"
    episode.seconds = time.monotonic() - started
    return episode


def _loop(episode: AgentEpisode, env: TaskEnvironment, model: AgentModel, tools: Sequence[ToolSpec],
          params: SamplingParams, limits: EpisodeLimits, started: float,
          on_turn: Callable[[AgentEpisode, AgentTurn], None] | None) -> str:
    messages = episode.messages

    def left() -> float:
        return limits.wall_seconds - (time.monotonic() - started)

    for index in range(limits.max_turns):
        if left() <= 0:
            return "wall"
        budget_left = limits.token_budget - episode.tokens
        if budget_left <= 0:
            return "token_budget"
        turn_params = SamplingParams(n=1, temperature=params.temperature, top_p=params.top_p,
                                     max_tokens=max(1, min(params.max_tokens, budget_left)),
                                     seed=None if params.seed is None else params.seed + index,
                                     logprobs=params.logprobs, stop=params.stop)
        try:
            reply = _act_within(model, messages, tools, turn_params, left())
        except _ModelPastWall:
            return "wall"
        except ModelBackendError as e:
            episode.outcome = EpisodeOutcome("infra_error", None, f"the model could not be asked: {e}")
            return "infra_error"
        episode.tokens += _tokens(reply)
        over_budget = episode.tokens > limits.token_budget
        assistant: Message = {"role": "assistant", "content": reply.text}
        if reply.tool_calls:
            assistant["tool_calls"] = [c.to_openai() for c in reply.tool_calls]
        messages.append(assistant)
        exec_started = time.monotonic()
        observations: list[dict[str, Any]] = []
        ended: str | None = "token_budget" if over_budget else None
        for i, call in enumerate(reply.tool_calls):
            if ended is None and left() <= 0:
                ended = "wall"
            why = _NOT_RUN.get(ended or "") or ("not run: the episode had ended" if env.ended else "")
            if not why and i >= limits.max_tool_calls:
                why = f"not run: a reply may make at most {limits.max_tool_calls} tool calls"
            if why:
                obs_row, tool_message = _not_run(call, why)
                observations.append(obs_row)
                messages.append(tool_message)
                continue
            obs = env.call(call, seconds_left=left())
            observations.append({"tool_call_id": call.id, "name": call.name, "text": obs.text,
                                 "error": obs.error, "truncated_chars": obs.truncated_chars,
                                 "seconds": round(obs.seconds, 4)})
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": obs.text})
            if env.past_wall:
                ended = "wall"
        if not reply.tool_calls:
            hint = "\n".join(reply.malformed) if reply.malformed else NO_CALL_HINT.format(
                tools=", ".join(t.name for t in tools))
            observations.append({"tool_call_id": "", "name": "", "text": hint, "error": True,
                                 "truncated_chars": 0, "seconds": 0.0})
            messages.append({"role": "user", "content": hint})
        turn = AgentTurn(index=index, text=reply.text, tool_calls=[c.to_dict() for c in reply.tool_calls],
                         observations=observations, generation_seconds=reply.seconds,
                         execution_seconds=time.monotonic() - exec_started, finish_reason=reply.finish_reason,
                         token_ids=reply.token_ids, prompt_token_ids=reply.prompt_token_ids,
                         logprobs=reply.logprobs)
        episode.turns.append(turn)
        if on_turn is not None:
            on_turn(episode, turn)
        if env.broken is not None:
            return "infra_error"
        if env.dead is not None:
            return "session_dead"
        if env.submitted:
            return "submit"
        if ended is not None:
            return ended
        if left() <= 0:
            return "wall"
    return "max_turns"


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to run: a task and its sample index."""

    task: Task
    sample_index: int = 0


def run_episodes(jobs: Iterable[EpisodeJob], model_for: Callable[[EpisodeJob], AgentModel],
                 sandbox: SessionOpener, grader: GradesOne | None = None, *, concurrency: int = 4,
                 limits: EpisodeLimits = EpisodeLimits(), params: SamplingParams | None = None,
                 on_turn: Callable[[AgentEpisode, AgentTurn], None] | None = None,
                 requeue: int = 1) -> Iterator[AgentEpisode]:
    """Run episodes ``concurrency`` at a time (``-j``: sessions open at once), yielding each as it
    ends (unordered). ``model_for`` gives each episode its model (one shared, thread-safe model,
    or one per episode). While one episode waits for the model, the others execute tools; an
    episode's session is closed before its grade, and the grade runs while the next one plays.
    ``sandbox`` and ``grader`` as for :func:`run_episode` (an Executor alone: it does both).

    An episode that ends ``infra_error`` because the sandbox machinery failed (its session's node
    or actor lost, no session could be opened, the grader failed) is run again from the start,
    at most ``requeue`` times (default once), its session kept off the node it was lost on where
    another node can take it; only the last run is yielded, the earlier ones' reasons in
    :attr:`AgentEpisode.lost` (never scored: ``on_turn`` has seen their turns). An episode
    the model failed is not re-run."""
    it = iter(jobs)
    width = max(1, concurrency)
    grades = _grader_of(sandbox, grader)
    # Two pools: ``width`` episodes play in their sessions at once; an episode's session is
    # closed before its grade, which runs on the second pool while the next episode plays (the
    # grade is the longest step an episode takes without the model).
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="episode") as pool, \
            ThreadPoolExecutor(max_workers=width, thread_name_prefix="episode-grade") as judges:
        playing: dict[Future[tuple[AgentEpisode, dict[str, bytes] | None]], tuple[EpisodeJob, list[AgentEpisode],
                                                                                  float]] = {}
        judging: dict[Future[AgentEpisode], tuple[EpisodeJob, list[AgentEpisode]]] = {}
        retry: list[tuple[EpisodeJob, list[AgentEpisode]]] = []
        exhausted = False

        def start(job: EpisodeJob, earlier: list[AgentEpisode]) -> None:
            avoid = {e.node for e in earlier if e.node}
            started = time.monotonic()
            fut = pool.submit(_play, job.task, model_for(job), sandbox, grades, limits=limits, params=params,
                              tools=TOOLS, sample_index=job.sample_index, on_turn=on_turn, avoid_nodes=avoid,
                              started=started)
            playing[fut] = (job, earlier, started)

        while True:
            while retry and len(playing) < width:
                start(*retry.pop(0))
            while not exhausted and len(playing) < width:
                try:
                    job = next(it)
                except StopIteration:
                    exhausted = True
                    break
                start(job, [])
            if not playing and not judging:
                return
            futures: list[Future[Any]] = [*playing, *judging]
            done, _ = wait(futures, return_when=FIRST_COMPLETED)
            ended: list[tuple[EpisodeJob, list[AgentEpisode], AgentEpisode]] = []
            for fut in done:
                if fut in playing:
                    job, earlier, started = playing.pop(fut)
                    episode, files = fut.result()
                    if files is None:
                        ended.append((job, earlier, episode))
                    else:
                        judging[judges.submit(_judge, episode, job.task, grades, files, started)] = (job, earlier)
                else:
                    job, earlier = judging.pop(fut)
                    ended.append((job, earlier, fut.result()))
            for job, earlier, episode in ended:
                if episode.status == "infra_error" and episode.machinery == "sandbox" and len(earlier) < requeue:
                    retry.append((job, [*earlier, episode]))
                    continue
                reasons = [e.outcome.reason if e.outcome is not None else e.end_reason for e in earlier]
                episode.lost = [*reasons, *episode.lost]
                yield episode


__all__ = ["AGENT_SYSTEM", "MAX_TOOL_CALLS_PER_REPLY", "AgentEpisode", "AgentTurn", "EpisodeJob", "EpisodeLimits",
           "first_messages", "run_episode", "run_episodes"]
