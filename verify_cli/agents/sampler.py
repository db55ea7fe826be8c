"""Agent episodes as samples of the one sample pipeline (``difficulty --agent``).

Each sample of a task is one agent episode. :class:`EpisodeBackend` stands where a model backend
stands in :func:`verify_cli.difficulty.run_difficulty`: its :meth:`~EpisodeBackend.generate_stream`
runs the episodes (``concurrency`` sessions at once, :func:`~verify_cli.agents.episode.run_episodes`)
and yields each as an :class:`EpisodeCompletion` as it ends; :class:`EpisodeStep` (the pipeline's
:class:`~verify_cli.sampling.step.SampleStep`) turns its trusted outcome into a
:class:`~verify_cli.sampling.step.GradedSample` with the one status vocabulary: ``passed`` is
``passed``, a graded failure is ``failed`` (``timeout`` where the tests ran past the wall limit),
a session the agent killed is ``failed``, and ``infra_error`` is never counted.

The backend's :attr:`~EpisodeBackend.model_id` names the agent protocol and the episode limits
beside the model, so a cached sample is reused only under the same limits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace

from verify_cli.agents.environment import GradesOne, SessionOpener
from verify_cli.agents.episode import AgentEpisode, EpisodeJob, EpisodeLimits, run_episodes
from verify_cli.agents.protocol import AgentModel, Message, ModelTurn
from verify_cli.agents.tools import ToolSpec
from verify_cli.errors import UsageError
from verify_cli.models.base import Completion, ModelBackend, Prompt, SamplingParams, prompt_seed
from verify_cli.sampling.status import SampleStatus, status_of
from verify_cli.sampling.step import GradedSample, SampleStep
from verify_cli.tasks.model import Task

#: Bumped when what an episode sample means changes (the tools, the loop, the first messages).
#: 2: budgets bind inside a reply, and the stored episode keeps no hidden test's text.
EPISODE_FORMAT = "2"


@dataclass(frozen=True)
class EpisodeCompletion(Completion):
    """A completion that is a whole episode: ``text`` is the episode as JSON (every turn, how it
    ended, its outcome), ``token_ids`` the model's tokens of every turn, ``finish_reason`` how
    the episode ended."""

    episode: AgentEpisode | None = field(default=None, compare=False)


def limits_fingerprint(limits: EpisodeLimits) -> str:
    """A stable hash of the limits that change what an episode is."""
    return hashlib.sha256(json.dumps(asdict(limits), sort_keys=True).encode()).hexdigest()[:16]


def episode_status(episode: AgentEpisode) -> SampleStatus:
    """The one vocabulary's status of an episode: its grade's where it was graded; a session the
    agent killed is FAILED; the machinery's failure is INFRA_ERROR."""
    outcome = episode.outcome
    if outcome is None or outcome.status == "infra_error":
        return SampleStatus.INFRA_ERROR
    if outcome.grade is not None:
        return status_of(outcome.grade)
    return SampleStatus.PASSED if outcome.status == "passed" else SampleStatus.FAILED


def episode_completion(episode: AgentEpisode) -> EpisodeCompletion:
    tokens: tuple[int, ...] = tuple(t for turn in episode.turns for t in turn.token_ids)
    return EpisodeCompletion(text=json.dumps(episode.to_dict(trainable=True), ensure_ascii=False), token_ids=tokens,
                             finish_reason=episode.end_reason or "infra_error", episode=episode)


class _SeededModel(AgentModel):
    """The shared model, with each episode's own seed: turn ``t`` samples under ``seed + t``."""

    def __init__(self, inner: AgentModel, seed: int | None) -> None:
        self.inner, self.seed = inner, seed
        self.name = inner.name

    def act(self, messages: Sequence[Message], tools: Sequence[ToolSpec], params: SamplingParams) -> ModelTurn:
        turn = params.seed or 0
        return self.inner.act(messages, tools, replace(params, seed=None if self.seed is None else self.seed + turn))


class EpisodeBackend(ModelBackend):
    """A model backend whose completions are agent episodes of ``model`` in ``sandbox``'s
    sessions (a Sandbox, or an Executor: on Ray each session on one node), graded by ``grader``
    (trusted, outside the session; an Executor grades too)."""

    name = "agent"

    def __init__(self, model: AgentModel, inner: ModelBackend, sandbox: SessionOpener, grader: GradesOne,
                 tasks: Sequence[Task], *, limits: EpisodeLimits | None = None, concurrency: int = 4) -> None:
        self.model, self.inner, self.sandbox, self.grader = model, inner, sandbox, grader
        self.tasks: dict[str, Task] = {t.id: t for t in tasks}
        self.limits = limits or EpisodeLimits()
        self.concurrency = max(1, concurrency)

    @property
    def model_id(self) -> str:
        return (f"agent/{EPISODE_FORMAT}/{type(self.model).__name__}/{limits_fingerprint(self.limits)}/"
                f"{self.inner.model_id}")

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        out: list[list[Completion]] = [[] for _ in prompts]
        for i, completion in self.generate_stream(prompts, params):
            out[i].append(completion)
        return out

    def generate_stream(self, prompts: Sequence[Prompt], params: SamplingParams, *,
                        chunk_size: int = 8) -> Iterator[tuple[int, Completion]]:
        """``params.n`` episodes of each prompt's task, as each ends (not in order); sample ``j``
        of prompt ``i`` runs under seed ``prompt_seed + j`` and sample index ``first_sample + j``."""
        jobs: list[tuple[int, EpisodeJob, int | None]] = []
        for i, prompt in enumerate(prompts):
            task = self.tasks.get(prompt.task_id)
            if task is None:
                raise UsageError(f"agent episodes: no task {prompt.task_id!r} was given to the episode backend")
            base = prompt_seed(prompt, params, i)
            for j in range(params.n):
                jobs.append((i, EpisodeJob(task, prompt.first_sample + j), None if base is None else base + j))
        by_key = {(job.task.id, job.sample_index): (i, seed) for i, job, seed in jobs}
        seeds = {key: seed for key, (_, seed) in by_key.items()}

        # Each turn's seed from run_episode is 0 + its index: the seeded model adds the episode's.
        episodes = run_episodes((job for _, job, _ in jobs),
                                lambda job: _SeededModel(self.model, seeds[(job.task.id, job.sample_index)]),
                                self.sandbox, self.grader, concurrency=self.concurrency, limits=self.limits,
                                params=replace(params, n=1, seed=0))
        for episode in episodes:
            yield by_key[(episode.task_id, episode.sample_index)][0], episode_completion(episode)

    def close(self) -> None:
        self.model.close()  # the agent model closes the backend it drives


class EpisodeStep(SampleStep):
    """The pipeline step of an episode: its trusted outcome (graded inside the episode, from the
    session's editable files) as a :class:`GradedSample`. An episode that ended with nothing
    graded (the agent killed its session) is a failed sample whose problem says why."""

    def run(self, task: Task, completion: Completion, *, label: str = "") -> GradedSample:
        episode = getattr(completion, "episode", None)
        if not isinstance(episode, AgentEpisode):
            raise TypeError("EpisodeStep takes EpisodeCompletion items (from EpisodeBackend)")
        status = episode_status(episode)
        outcome = episode.outcome
        grade = outcome.grade if outcome is not None else None
        if grade is not None:
            return GradedSample(task=task, status=status, grade=grade, attempts=1, seconds=episode.seconds)
        reason = (outcome.reason if outcome is not None else "") or episode.end_reason
        if status is SampleStatus.INFRA_ERROR:  # its cause kept: summaries count infra errors by cause
            return GradedSample(task=task, status=status, parse_error=reason or "infra_error", seconds=episode.seconds)
        return GradedSample(task=task, status=SampleStatus.FAILED, parse_error=reason, seconds=episode.seconds)


__all__ = ["EPISODE_FORMAT", "EpisodeBackend", "EpisodeCompletion", "EpisodeStep", "episode_completion",
           "episode_status", "limits_fingerprint"]
