"""Sample groups of episodes and grade each completion as soon as it is generated.

Sampling is the pipeline's (:mod:`verify_cli.sampling`): generation runs in the caller's thread,
every completion goes straight to a pool of grading threads (bounded: at most ``2 * grade_jobs``
in flight, so a slow sandbox slows generation down rather than piling up work, and the policy
that generates stays the one being trained), and the per-sample step (:class:`~verify_cli.
sampling.step.SampleStep`) takes the answer, grades it and names its status. What is left of
grading after the last completion is the step's grading tail.

Multi-turn (``max_turns > 1``): an episode whose answer did not pass gets the visible tests'
feedback (failing test names and truncated messages, never a hidden test) as a user message and
revises; its tokens keep every turn, with a mask separating model tokens from feedback tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verify_cli.grading.batch import BatchGrader
from verify_cli.grading.grader import GradeResult
from verify_cli.models.base import Completion, ModelBackend, Prompt, SamplingParams
from verify_cli.models.prompts import build_prompt, has_chat_template
from verify_cli.rollout.rewards import Reward, RewardConfig, reward_of
from verify_cli.sampling.seeds import derive_seed
from verify_cli.sampling.status import SampleStatus
from verify_cli.sampling.step import AnswerStep, RetryPolicy, SampleStep
from verify_cli.sampling.stream import generate_and_grade
from verify_cli.tasks.model import HIDDEN_TESTS_DIR, TESTS_DIR, Task

#: Characters of each failing test's message shown in feedback.
FEEDBACK_MESSAGE_CHARS = 300
#: Failing tests named in one feedback message.
FEEDBACK_MAX_TESTS = 8


@dataclass(frozen=True)
class SamplingOptions:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = ()


@dataclass
class Episode:
    """One sample of a group: every turn, its last grading and its reward."""

    task: Task
    group_index: int
    sample_index: int
    group_seed: int
    prompt: Prompt
    messages: list[dict[str, str]]
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    last_text: str = ""
    #: Files a backend already extracted (replayed rows); None: extract from ``last_text``.
    last_files: dict[str, str] | None = None
    finish_reason: str = "stop"
    turns: int = 0
    model_tokens: int = 0
    grade: GradeResult | None = None
    parse_error: str | None = None
    grade_attempts: int = 0
    generation_seconds: float = 0.0
    grading_seconds: float = 0.0
    reward: Reward | None = None


@dataclass
class RoundTiming:
    """Where one round of generation and grading spent its time."""

    generation_s: float = 0.0  # inside the backend
    grading_tail_s: float = 0.0  # waiting for grading after the last completion
    grading_busy_s: float = 0.0  # grading time summed over samples (overlaps generation)
    completions: int = 0

    def add(self, other: RoundTiming) -> None:
        self.generation_s += other.generation_s
        self.grading_tail_s += other.grading_tail_s
        self.grading_busy_s += other.grading_busy_s
        self.completions += other.completions


def is_visible_test(test_id: str) -> bool:
    """Whether a test id belongs to the visible tests (only those may be shown to the model)."""
    head = test_id.replace("/", ".").split("::", 1)[0]
    return head.startswith(TESTS_DIR + ".") and HIDDEN_TESTS_DIR not in test_id


def feedback_message(grade: GradeResult | None, parse_error: str | None) -> str:
    """What the model is told after a failed attempt: never a hidden test's name or message."""
    if parse_error is not None:
        return (f"Your answer could not be read: {parse_error}. Reply with the complete content of "
                f"each file you change, each in a fenced code block whose opening line names the file.")
    lines = ["Your answer did not pass the tests yet."]
    if grade is not None:
        failing = [t for t in grade.failed_tests if is_visible_test(t.id)]
        if failing:
            lines.append("Failing visible tests:")
            for t in failing[:FEEDBACK_MAX_TESTS]:
                msg = " ".join(t.message.split())
                if len(msg) > FEEDBACK_MESSAGE_CHARS:
                    msg = msg[:FEEDBACK_MESSAGE_CHARS] + " ..."
                lines.append(f"- {t.id} ({t.outcome.value}){': ' + msg if msg else ''}")
            if len(failing) > FEEDBACK_MAX_TESTS:
                lines.append(f"- and {len(failing) - FEEDBACK_MAX_TESTS} more")
        else:
            lines.append("Every visible test passes, but the answer is not right yet.")
    lines.append("Revise your answer.")
    return "\n".join(lines)


def _render(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str:
    if tokenizer is not None and has_chat_template(tokenizer):
        text: str = tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                  add_generation_prompt=True)
        return text
    return "\n\n".join(m["content"] for m in messages) + "\n\n"


def feedback_tokens(tokenizer: Any, messages: Sequence[Mapping[str, str]], response_text: str,
                    feedback: str) -> list[int]:
    """The tokens that follow the model's last tokens in the next turn's prompt: the end of the
    assistant turn, the feedback message and the start of the next assistant turn."""
    before = _render(tokenizer, messages) + response_text
    after = _render(tokenizer, [*messages, {"role": "assistant", "content": response_text},
                                {"role": "user", "content": feedback}])
    suffix = after[len(before):] if after.startswith(before) else "\n\n" + feedback + "\n\n"
    return [int(t) for t in tokenizer(suffix, add_special_tokens=False)["input_ids"]]


class EpisodeRunner:
    """Generates and grades groups of episodes with one backend and one grader."""

    def __init__(self, backend: ModelBackend, grader: BatchGrader, *, sampling: SamplingOptions,
                 reward: RewardConfig, max_turns: int = 1, grade_jobs: int = 2,
                 include_tests: bool = True, system: str | None = None,
                 on_completion: Callable[[Episode], None] | None = None,
                 retry: RetryPolicy | None = None, step: SampleStep | None = None) -> None:
        self.backend = backend
        self.grader = grader
        #: The per-sample step (the one-shot answer step unless another is given).
        self.step = step or AnswerStep(grader, retry)
        self.sampling = sampling
        self.reward_config = reward
        self.max_turns = max(1, max_turns)
        self.grade_jobs = max(1, grade_jobs)
        self.include_tests = include_tests
        self.system = system
        self.on_completion = on_completion

    @property
    def tokenizer(self) -> Any:
        return getattr(self.backend, "tokenizer", None)

    def first_prompt(self, task: Task) -> Prompt:
        return build_prompt(task, self.tokenizer, system=self.system, include_tests=self.include_tests)

    # -- grading ---------------------------------------------------------------------------------

    def _grade(self, ep: Episode) -> Episode:
        started = time.monotonic()
        sample = self.step.run(ep.task, Completion(ep.last_text, files=ep.last_files, finish_reason=ep.finish_reason),
                               label=f"{ep.group_index}/{ep.sample_index}")
        ep.grade, ep.parse_error, ep.grade_attempts = sample.grade, sample.parse_error, sample.attempts
        ep.grading_seconds += time.monotonic() - started
        ep.reward = reward_of(sample, response_tokens=ep.model_tokens, max_tokens=self.sampling.max_tokens * ep.turns,
                              truncated=ep.finish_reason == "length", config=self.reward_config)
        return ep

    # -- one round: stream generation into grading ------------------------------------------------

    def _round(self, prompts: Sequence[Prompt], params: SamplingParams,
               on_completion: Callable[[int, Completion], Episode]) -> RoundTiming:
        gen_time: dict[int, float] = {}
        by_prompt: dict[int, list[Episode]] = {}

        def arrive(index: int, completion: Completion, seconds: float) -> Episode:
            gen_time[index] = gen_time.get(index, 0.0) + seconds
            ep = on_completion(index, completion)
            by_prompt.setdefault(index, []).append(ep)
            return ep

        streamed = generate_and_grade(self.backend.generate_stream(prompts, params), arrive=arrive,
                                      grade=self._grade, jobs=self.grade_jobs, backlog=2 * self.grade_jobs,
                                      name="rollout-grade")
        timing = RoundTiming(generation_s=streamed.generation_s, grading_tail_s=streamed.grading_tail_s,
                             completions=streamed.completions)
        for index, eps in by_prompt.items():
            share = gen_time.get(index, 0.0) / len(eps)
            for ep in eps:
                ep.generation_seconds += share
                timing.grading_busy_s += ep.grading_seconds
                if self.on_completion is not None:
                    self.on_completion(ep)
        return timing

    @staticmethod
    def _take_turn(ep: Episode, completion: Completion, feedback_ids: Sequence[int]) -> None:
        if feedback_ids:
            ep.response_ids.extend(feedback_ids)
            ep.response_mask.extend([0] * len(feedback_ids))
            if ep.logprobs is not None:
                ep.logprobs.extend([0.0] * len(feedback_ids))
        ids = list(completion.token_ids)
        ep.response_ids.extend(ids)
        ep.response_mask.extend([1] * len(ids))
        if ep.logprobs is not None and completion.logprobs is not None and len(completion.logprobs) == len(ids):
            ep.logprobs.extend(float(x) for x in completion.logprobs)
        else:
            ep.logprobs = None
        ep.messages.append({"role": "assistant", "content": completion.text})
        ep.last_text = completion.text
        ep.last_files = dict(completion.files) if completion.files is not None else None
        ep.finish_reason = completion.finish_reason
        ep.turns += 1
        ep.model_tokens += len(ids)

    def run_groups(self, tasks: Sequence[Task], group_size: int,
                   seed: int) -> tuple[list[list[Episode]], RoundTiming]:
        """One group of ``group_size`` episodes per task, sampled under ``seed`` (deterministic
        for a deterministic backend), all graded, with rewards."""
        timing = RoundTiming()
        prompts = [self.first_prompt(t) for t in tasks]
        groups: list[list[Episode]] = [[] for _ in tasks]
        params = SamplingParams(n=group_size, temperature=self.sampling.temperature, top_p=self.sampling.top_p,
                                max_tokens=self.sampling.max_tokens, seed=seed, logprobs=True,
                                stop=self.sampling.stop)

        def first(index: int, completion: Completion) -> Episode:
            prompt = prompts[index]
            prompt_ids = list(completion.prompt_token_ids or prompt.prompt_token_ids or ())
            ep = Episode(task=tasks[index], group_index=index,
                         sample_index=len(groups[index]), group_seed=seed, prompt=prompt,
                         messages=[dict(m) for m in prompt.messages] or [{"role": "user", "content": prompt.text}],
                         prompt_ids=prompt_ids)
            self._take_turn(ep, completion, ())
            groups[index].append(ep)
            return ep

        timing.add(self._round(prompts, params, first))
        for turn in range(2, self.max_turns + 1):
            final = (SampleStatus.PASSED, SampleStatus.INFRA_ERROR, SampleStatus.PROMPT_TOO_LONG)
            todo = [ep for g in groups for ep in g if ep.reward is not None and ep.reward.status not in final]
            if not todo:
                break
            timing.add(self._revise(todo, seed, turn))
        return groups, timing

    def _revise(self, todo: Sequence[Episode], seed: int, turn: int) -> RoundTiming:
        tok = self.tokenizer
        prompts: list[Prompt] = []
        feedback_ids: list[list[int]] = []
        for ep in todo:
            message = feedback_message(ep.grade, ep.parse_error)
            fb_ids = (feedback_tokens(tok, ep.messages[:-1], ep.last_text, message)
                      if tok is not None and ep.prompt_ids else [])
            ep.messages.append({"role": "user", "content": message})
            feedback_ids.append(fb_ids)
            ids = tuple(ep.prompt_ids + ep.response_ids + fb_ids) if fb_ids else None
            prompts.append(Prompt(task_id=ep.task.id, text=_render(tok, ep.messages), messages=tuple(ep.messages),
                                  prompt_token_ids=ids))
        params = SamplingParams(n=1, temperature=self.sampling.temperature, top_p=self.sampling.top_p,
                                max_tokens=self.sampling.max_tokens, seed=derive_seed(seed, "turn", turn),
                                logprobs=True, stop=self.sampling.stop)

        def revised(index: int, completion: Completion) -> Episode:
            ep = todo[index]
            self._take_turn(ep, completion, feedback_ids[index])
            return ep

        return self._round(prompts, params, revised)
