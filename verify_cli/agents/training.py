"""``train --agent``: groups of agent episodes per task for the rollout loop's GRPO.

:class:`AgentGroupRunner` stands where the one-shot :class:`~verify_cli.rollout.episodes.
EpisodeRunner` stands in :class:`~verify_cli.rollout.loop.Trainer`: ``run_groups`` runs
``group_size`` episodes of each task (``concurrency`` sessions at once) and hands back rollout
episodes with rewards, so advantages, shards, updates and ``--resume`` are the loop's own. Each
row carries the agent columns of :data:`~verify_cli.rollout.schema.AGENT_TRAJECTORY_SCHEMA`.

Tokens: the first turn's prompt is the row's prompt; the response is every model turn's tokens
(mask 1, carrying the episode's advantage) and, between them, the tokens that the next turn's
prompt adds after the model's last tokens (the observations and the template around them, mask
0). That needs a backend that gives token ids and a rendering where each turn's prompt extends
the last one token for token; the per-episode model below guarantees it for token-id backends
(the next prompt is the last prompt, the model's tokens, and the new text tokenised on its own).
Where either fails, the token columns are left empty and the row is not trained on.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import pyarrow as pa

from verify_cli.agents.environment import GradesOne, SessionOpener
from verify_cli.agents.episode import AgentEpisode, EpisodeJob, EpisodeLimits, first_messages, run_episodes
from verify_cli.agents.protocol import AgentModel, Message, ModelTurn, TextProtocolModel
from verify_cli.agents.sampler import episode_status
from verify_cli.agents.tools import ToolSpec
from verify_cli.models.base import Prompt, SamplingParams
from verify_cli.rollout.episodes import Episode, RoundTiming, SamplingOptions
from verify_cli.rollout.rewards import Reward, RewardConfig, reward_of
from verify_cli.rollout.schema import AGENT_TRAJECTORY_SCHEMA
from verify_cli.sampling.seeds import derive_seed
from verify_cli.sampling.status import SampleStatus
from verify_cli.sampling.step import GradedSample
from verify_cli.tasks.model import Task


@dataclass
class AgentRolloutEpisode(Episode):
    """A rollout episode that is an agent episode (its turns for the agent columns)."""

    agent: AgentEpisode | None = None


class _EpisodeModel(AgentModel):
    """One episode's view of the shared model: its own seed (turn ``t`` under ``seed + t``) and,
    for a text-protocol model over a tokenizer, prompts that extend the last one token for token."""

    def __init__(self, inner: AgentModel, seed: int) -> None:
        self.seed = seed
        self.name = inner.name
        self.inner = inner
        #: (the last prompt's text, the reply's text, the ids of both as the model saw and wrote them)
        self._prev: tuple[str, str, list[int]] | None = None
        self._prompt_text = ""
        self._continues = False
        tokenizer = getattr(getattr(inner, "backend", None), "tokenizer", None)
        if isinstance(inner, TextProtocolModel) and tokenizer is not None:
            view = copy.copy(inner)  # shares the backend and its lock
            render = inner.render

            def continued(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Prompt:
                prompt = render(messages, tools)
                prev, self._prompt_text = self._prev, prompt.text
                if prev is None:
                    return prompt
                suffix = _after_reply(prompt.text, prev[0], prev[1])
                if suffix is None:
                    return prompt
                ids = prev[2] + [int(t) for t in tokenizer(suffix, add_special_tokens=False)["input_ids"]]
                return replace(prompt, prompt_token_ids=tuple(ids))

            view.render = continued  # type: ignore[method-assign]
            self.inner = view
            self._continues = True

    def act(self, messages: Sequence[Message], tools: Sequence[ToolSpec], params: SamplingParams) -> ModelTurn:
        turn = params.seed or 0
        reply = self.inner.act(messages, tools, replace(params, seed=self.seed + turn))
        if self._continues and reply.prompt_token_ids is not None and self._prompt_text:
            self._prev = (self._prompt_text, reply.text, list(reply.prompt_token_ids) + list(reply.token_ids))
        return reply

    def close(self) -> None:
        pass  # the shared model is the runner's


def _after_reply(text: str, last_prompt: str, reply: str) -> str | None:
    """What ``text`` (the next turn's prompt) adds after the last prompt and the model's reply as
    the rendering shows it (as written, or stripped as the text protocol shows it); None when
    ``text`` does not extend them."""
    if not text.startswith(last_prompt):
        return None
    rest = text[len(last_prompt):]
    for shown in (reply, reply.strip()):
        if rest.startswith(shown):
            return rest[len(shown):]
    return None


def _turn_tokens(episode: AgentEpisode) -> tuple[list[int], list[int], list[int]]:
    """(prompt ids, response ids, response mask) of an episode; all empty when the backend gave
    no token ids or a turn's prompt does not extend the last one."""
    turns = episode.turns
    if not turns or any(t.prompt_token_ids is None for t in turns) or not any(t.token_ids for t in turns):
        return [], [], []
    prompt = list(turns[0].prompt_token_ids or ())
    response: list[int] = []
    mask: list[int] = []
    for t in turns:
        if t.index > 0:
            context = prompt + response
            ids = list(t.prompt_token_ids or ())
            if ids[:len(context)] != context:
                return [], [], []
            between = ids[len(context):]
            response += between
            mask += [0] * len(between)
        response += list(t.token_ids)
        mask += [1] * len(t.token_ids)
    return prompt, response, mask


def _logprobs(episode: AgentEpisode, mask: Sequence[int]) -> list[float] | None:
    if not mask or any(t.logprobs is None or len(t.logprobs) != len(t.token_ids) for t in episode.turns):
        return None
    out: list[float] = []
    it = iter(lp for t in episode.turns for lp in (t.logprobs or ()))
    for m in mask:
        out.append(float(next(it)) if m else 0.0)
    return out


def _reward(episode: AgentEpisode, task: Task, tokens: int, max_tokens: int, config: RewardConfig) -> Reward:
    status = episode_status(episode)
    outcome = episode.outcome
    reason = (outcome.reason if outcome is not None else "") or episode.end_reason
    if status in (SampleStatus.INFRA_ERROR, SampleStatus.PROMPT_TOO_LONG):  # never scored: masked
        return Reward(status, None, None, 0.0, 0.0, 0, 0, (reason,))
    if outcome is None or outcome.grade is None:  # the agent killed its session: a graded failure
        return Reward(SampleStatus.FAILED, 0.0, 0.0, 0.0, 0.0, 0, 0, (reason,))
    sample = GradedSample(task=task, status=status, grade=outcome.grade, attempts=1)
    return reward_of(sample, response_tokens=tokens, max_tokens=max_tokens,
                     truncated=episode.end_reason == "token_budget", config=config)


class AgentGroupRunner:
    """Runs groups of agent episodes of ``model`` in ``sandbox``'s sessions for the Trainer:
    a sandbox and its grader, or an executor as both (on Ray each session lives on one node,
    and an episode whose node is lost is re-run elsewhere, never scored)."""

    schema: pa.Schema = AGENT_TRAJECTORY_SCHEMA

    def __init__(self, model: AgentModel, sandbox: SessionOpener, grader: GradesOne, *, sampling: SamplingOptions,
                 reward: RewardConfig, limits: EpisodeLimits | None = None, concurrency: int = 4) -> None:
        self.model, self.sandbox, self.grader = model, sandbox, grader
        self.sampling, self.reward_config = sampling, reward
        self.limits = limits or EpisodeLimits()
        self.concurrency = max(1, concurrency)

    def agent_pinned(self) -> dict[str, Any]:
        """What ``--resume`` must find unchanged: the episode limits and the agent protocol."""
        return {"limits": asdict(self.limits), "protocol": type(self.model).__name__}

    def run_groups(self, tasks: Sequence[Task], group_size: int,
                   seed: int) -> tuple[list[list[Episode]], RoundTiming]:
        """``group_size`` episodes of each task under ``seed``, each with its reward."""
        jobs = [EpisodeJob(task, gi * group_size + j) for gi, task in enumerate(tasks) for j in range(group_size)]
        params = SamplingParams(n=1, temperature=self.sampling.temperature, top_p=self.sampling.top_p,
                                max_tokens=self.sampling.max_tokens, seed=0, logprobs=True,
                                stop=self.sampling.stop)
        groups: list[list[Episode]] = [[] for _ in tasks]
        timing = RoundTiming()
        episodes = run_episodes(jobs, lambda job: _EpisodeModel(self.model, derive_seed(seed, "episode",
                                                                                        job.sample_index)),
                                self.sandbox, self.grader, concurrency=self.concurrency, limits=self.limits,
                                params=params)
        for agent in episodes:
            gi, j = divmod(agent.sample_index, group_size)
            groups[gi].append(self._episode(tasks[gi], gi, j, seed, agent))
            timing.completions += 1
            timing.generation_s += agent.generation_seconds
            timing.grading_busy_s += agent.execution_seconds
        for g in groups:
            g.sort(key=lambda e: e.sample_index)
        return groups, timing

    def _episode(self, task: Task, gi: int, j: int, seed: int, agent: AgentEpisode) -> AgentRolloutEpisode:
        prompt_ids, response_ids, mask = _turn_tokens(agent)
        first = first_messages(task)
        messages = [{"role": str(m["role"]), "content": str(m.get("content") or "")} for m in agent.messages]
        model_tokens = sum(1 for m in mask if m) if mask else agent.tokens
        last = agent.turns[-1] if agent.turns else None
        ep = AgentRolloutEpisode(
            task=task, group_index=gi, sample_index=j, group_seed=seed,
            prompt=Prompt(task_id=task.id, text="\n\n".join(str(m["content"]) for m in first),
                          messages=tuple({"role": str(m["role"]), "content": str(m["content"])} for m in first)),
            messages=messages, prompt_ids=prompt_ids, response_ids=response_ids, response_mask=mask,
            logprobs=_logprobs(agent, mask), last_text=last.text if last else "",
            finish_reason=last.finish_reason if last else "stop", turns=len(agent.turns),
            model_tokens=model_tokens, grade=agent.outcome.grade if agent.outcome else None,
            grade_attempts=1 if agent.outcome and agent.outcome.grade else 0,
            generation_seconds=agent.generation_seconds, grading_seconds=agent.execution_seconds,
            agent=agent)
        ep.reward = _reward(agent, task, model_tokens, self.limits.token_budget, self.reward_config)
        return ep

    def extra_columns(self, ep: Episode) -> dict[str, Any]:
        """The agent columns of ``ep``'s row."""
        agent = ep.agent if isinstance(ep, AgentRolloutEpisode) else None
        if agent is None:
            return {"turns": [], "end_reason": ""}
        turns = []
        for t in agent.turns:
            turns.append({
                "index": t.index, "text": t.text,
                "tool_calls": [{"id": str(c.get("id", "")), "name": str(c.get("name", "")),
                                "arguments": c["arguments"] if isinstance(c.get("arguments"), str)
                                else json.dumps(c.get("arguments"), sort_keys=True)} for c in t.tool_calls],
                "observations": [{"tool_call_id": str(o["tool_call_id"]), "name": str(o["name"]),
                                  "text": str(o["text"]), "error": bool(o["error"]),
                                  "truncated_chars": int(o["truncated_chars"])} for o in t.observations],
                "finish_reason": t.finish_reason, "generation_seconds": t.generation_seconds,
                "execution_seconds": t.execution_seconds,
                "prompt_tokens": len(t.prompt_token_ids or ()), "response_tokens": len(t.token_ids)})
        return {"turns": turns, "end_reason": agent.end_reason}


__all__ = ["AgentGroupRunner", "AgentRolloutEpisode"]
