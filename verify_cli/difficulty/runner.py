"""Sample every task, grade the samples as they arrive, and gather the statistics.

Sampling is the pipeline's (:func:`verify_cli.sampling.stream.generate_and_grade`): each
completion is handed to ``jobs`` grading threads as soon as the backend yields it, so the
sandboxes work while the model keeps generating (generation waits for grading only when
:data:`GRADING_BACKLOG` completions are waiting: a difficulty run has no policy to keep in
step). Each graded sample is appended to the sample cache at once, so an interrupted run
resumes where it stopped. With ``adaptive``, tasks are sampled in rounds and leave as soon as
their bucket is decided (:meth:`BucketScheme.decided`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from verify_cli.difficulty.buckets import DEFECTIVE, PROMPT_TOO_LONG, BucketScheme
from verify_cli.difficulty.cache import SampleCache, sample_cache_key
from verify_cli.difficulty.samples import SampleRecord, has_hidden_tests, sample_record
from verify_cli.difficulty.spill import Kept, RecordSpill, SpilledRecords
from verify_cli.difficulty.stats import TaskStats, task_stats
from verify_cli.grading.batch import BatchGrader
from verify_cli.models.base import Completion, ModelBackend, SamplingParams
from verify_cli.models.prompts import build_prompt
from verify_cli.sampling.seeds import sample_seed
from verify_cli.sampling.status import SampleStatus
from verify_cli.sampling.step import AnswerStep, GradedSample, RetryPolicy, SampleStep
from verify_cli.sampling.stream import generate_and_grade
from verify_cli.sampling.supply import check_supply
from verify_cli.tasks.model import Task

#: Completions waiting for a grading thread, at most. Generation runs this far ahead of grading
#: (a served model is kept busy while the sandboxes catch up) and then waits: without a bound, a
#: backend faster than grading (replayed completions, a large GPU) queued every completion of the
#: round in memory with its future (about 2 KiB each: 40 MiB at 20,000 samples).
GRADING_BACKLOG = 2048


@dataclass(frozen=True)
class DifficultyOptions:
    samples: int = 8
    params: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=1.0, max_tokens=1024))
    seed: int = 0
    jobs: int = 2
    adaptive: bool = False
    round_size: int = 4
    confidence: float = 0.95
    scheme: BucketScheme = field(default_factory=BucketScheme)
    ks: tuple[int, ...] = (1,)
    #: Gradings of one sample before a sandbox failure is final (an ``infra_error``, never counted).
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    include_tests: bool = True


@dataclass(frozen=True)
class DifficultyProgress:
    generated: int
    graded: int
    planned: int
    elapsed: float
    task_id: str = ""


@dataclass
class TaskDifficulty:
    task_id: str
    path: str
    bucket: str
    stats: TaskStats
    #: The task's samples by index. A run's report reads them from its spill file as they are
    #: iterated (:class:`~verify_cli.difficulty.spill.SpilledRecords`): a run holds no record in memory.
    records: Sequence[SampleRecord] = field(default_factory=list)
    #: Why the task is ``defective`` (from check-tasks or loading), else "".
    defect: str = ""
    cached: int = 0
    generated: int = 0
    stopped_early: bool = False
    domain: str = ""
    language: str = ""
    prompt: str = ""
    #: The prompt's length in the model's tokens (None where the backend cannot count them).
    prompt_tokens: int | None = None


@dataclass
class DifficultyReport:
    tasks: list[TaskDifficulty]
    model_id: str
    params: SamplingParams
    options: DifficultyOptions
    seconds: float = 0.0
    generation_seconds: float = 0.0
    generated: int = 0
    cached: int = 0
    #: What the run found worth saying before it sampled (replayed rows naming no task, tasks with none).
    warnings: list[str] = field(default_factory=list)

    @property
    def sampled(self) -> int:
        """Samples behind the statistics (cached and new, infra errors excluded)."""
        return sum(t.stats.n for t in self.tasks)

    @property
    def fixed_budget(self) -> int:
        """Samples a fixed budget of ``options.samples`` per sampled task would take."""
        return sum(self.options.samples for t in self.tasks if t.bucket != DEFECTIVE)


ProgressCallback = Callable[[DifficultyProgress], None]


@dataclass
class _TaskState:
    task: Task
    key: str
    task_hash: str
    target: int
    kept: list[Kept]
    cached: int
    generated: int = 0
    stopped_early: bool = False
    prompt_tokens: int | None = None
    #: The prompt leaves the model no room: never sampled (decided before generating, or the
    #: backend said so for its first samples).
    too_long: bool = False

    @property
    def counted(self) -> list[Kept]:
        return [k for k in self.kept if k.outcome.status.counts]

    def next_index(self) -> int:
        return max((k.sample_index for k in self.kept), default=-1) + 1


@dataclass(frozen=True)
class _Arrival:
    state: _TaskState
    index: int
    completion: Completion
    gen_seconds: float


class _Run:
    def __init__(self, tasks: Sequence[Task], backend: ModelBackend, grader: BatchGrader, options: DifficultyOptions,
                 cache: SampleCache | None, on_progress: ProgressCallback | None, step: SampleStep | None) -> None:
        self.backend, self.grader, self.options, self.cache = backend, grader, options, cache
        self.step = step or AnswerStep(grader, options.retry)
        self.on_progress = on_progress
        self.params = replace(options.params, seed=options.seed)
        self.fingerprint = self.params.fingerprint()
        # Every record (cached or graded now) goes to the spill at once; the run keeps its Kept.
        self.spill = RecordSpill()
        self.states: list[_TaskState] = []
        for task in tasks:
            task_hash = task.content_hash()
            key = sample_cache_key(task_hash, backend.model_id, self.fingerprint, options.seed)
            available = backend.samples_available(task.id)
            target = options.samples if available is None else min(options.samples, available)
            # More cached samples than asked for: use the first ``target`` of them.
            kept = [self.spill.add(r) for r in (cache.load(key) if cache else [])[:target]]
            self.states.append(_TaskState(task, key, task_hash, target, kept, cached=len(kept)))
        self.generated = self.graded = 0
        self.planned = sum(s.target for s in self.states)
        self._measure_prompts()
        self.started = time.monotonic()
        self.generation_seconds = 0.0

    def _measure_prompts(self) -> None:
        """Each task's prompt length in the model's tokens, where the backend can count them; a
        task whose prompt does not fit the model's context is never sampled."""
        if self.backend.context_length is None:
            return
        for state in self.states:
            prompt = build_prompt(state.task, self.backend.tokenizer, include_tests=self.options.include_tests)
            state.prompt_tokens = self.backend.prompt_tokens(prompt)
            if not self.backend.prompt_fits(prompt):
                state.too_long = True
                self.planned -= state.target - len(state.kept)

    def _progress(self, task_id: str) -> None:
        if self.on_progress is not None:
            self.on_progress(DifficultyProgress(self.generated, self.graded, self.planned,
                                                time.monotonic() - self.started, task_id))

    def _needs(self, state: _TaskState, looks: int) -> int:
        if state.too_long or any(k.outcome.status is SampleStatus.PROMPT_TOO_LONG for k in state.kept):
            state.too_long = True  # the backend found it too long: asking again gives the same
            return 0
        counted = state.counted
        left = state.target - len(counted)
        if left <= 0:
            return 0
        if not self.options.adaptive:
            return left
        correct = sum(r.passed for r in counted)
        if self.options.scheme.decided(correct, len(counted), confidence=self.options.confidence, looks=looks):
            state.stopped_early = True
            return 0
        return min(self.options.round_size, left)

    def main(self) -> None:
        # This run grades one sample at a time per grading thread, ``jobs`` at once.
        self.grader.reserve(self.options.jobs)
        looks = max(1, math.ceil(self.options.samples / max(1, self.options.round_size)))
        # Everything cached counts as done and graded for the progress bar.
        self.graded = self.generated = sum(len(s.kept) for s in self.states)
        self._progress("")
        while True:
            todo = [(s, need) for s in self.states if (need := self._needs(s, looks)) > 0]
            if not todo:
                return
            if self.options.adaptive:  # an undecided task's remaining budget is still planned
                self.planned = sum(len(s.counted) + (0 if s.stopped_early or s.too_long
                                                 else max(0, s.target - len(s.counted)))
                                   for s in self.states)
            self._round(todo)
            if not self.options.adaptive:
                return

    def _completions(self, todo: list[tuple[_TaskState, int]]) -> Iterator[tuple[tuple[_TaskState, int], Completion]]:
        """``need`` completions of each task, keyed by (task, sample index); one backend call per
        distinct ``need``."""
        groups: dict[int, list[_TaskState]] = {}
        for state, need in todo:
            groups.setdefault(need, []).append(state)
        for need, states in groups.items():
            firsts = [s.next_index() for s in states]
            prompts = [replace(build_prompt(s.task, self.backend.tokenizer, include_tests=self.options.include_tests),
                               seed=sample_seed(self.options.seed, s.task_hash, first), first_sample=first)
                       for s, first in zip(states, firsts, strict=True)]
            counters = [0] * len(states)
            for i, completion in self.backend.generate_stream(prompts, replace(self.params, n=need)):
                index = firsts[i] + counters[i]
                counters[i] += 1
                yield (states[i], index), completion

    def _round(self, todo: list[tuple[_TaskState, int]]) -> None:
        def arrive(key: tuple[_TaskState, int], completion: Completion, seconds: float) -> _Arrival:
            state, index = key
            self.generated += 1
            state.generated += 1
            self._progress(state.task.id)
            return _Arrival(state, index, completion, seconds)

        def grade(item: _Arrival) -> GradedSample:
            return self.step.run(item.state.task, item.completion, label=f"sample {item.index}")

        def graded(item: _Arrival, sample: GradedSample) -> None:
            state = item.state
            record = sample_record(sample, item.index, item.completion, gen_seconds=item.gen_seconds,
                                   has_hidden=has_hidden_tests(state.task))
            line = record.to_line()  # encoded once, for the spill and the cache
            state.kept.append(self.spill.add(record, line=line))
            if self.cache is not None:
                self.cache.append(state.key, record, line=line)
            self.graded += 1
            self._progress(state.task.id)

        timing = generate_and_grade(self._completions(todo), arrive=arrive, grade=grade, on_graded=graded,
                                    jobs=self.options.jobs, backlog=GRADING_BACKLOG, name="difficulty-grade")
        self.generation_seconds += timing.generation_s

    def report(self, defective: Mapping[str, tuple[str, str]]) -> DifficultyReport:
        tasks: list[TaskDifficulty] = []
        opts = self.options
        for s in self.states:
            kept = sorted(s.kept, key=lambda k: k.sample_index)
            stats = task_stats((k.outcome for k in kept), ks=opts.ks, confidence=opts.confidence)
            prompt = build_prompt(s.task, include_tests=opts.include_tests).messages[-1]["content"]
            too_long = s.too_long or any(k.outcome.status is SampleStatus.PROMPT_TOO_LONG for k in kept)
            bucket = PROMPT_TOO_LONG if too_long and stats.n == 0 else opts.scheme.bucket(stats.correct, stats.n)
            tasks.append(TaskDifficulty(
                task_id=s.task.id, path=str(s.task.root), bucket=bucket, prompt_tokens=s.prompt_tokens,
                stats=stats, records=SpilledRecords(self.spill, [k.offset for k in kept]), cached=s.cached,
                generated=s.generated, stopped_early=s.stopped_early, domain=s.task.domain,
                language=s.task.language, prompt=prompt))
        empty = task_stats((), ks=opts.ks, confidence=opts.confidence)
        for task_id, (path, why) in defective.items():
            tasks.append(TaskDifficulty(task_id=task_id, path=path, bucket=DEFECTIVE, stats=empty, defect=why))
        tasks.sort(key=lambda t: t.task_id)
        return DifficultyReport(tasks=tasks, model_id=self.backend.model_id, params=self.params, options=opts,
                                seconds=time.monotonic() - self.started,
                                generation_seconds=self.generation_seconds, generated=self.generated
                                - sum(s.cached for s in self.states), cached=sum(s.cached for s in self.states))


def run_difficulty(tasks: Sequence[Task], backend: ModelBackend, grader: BatchGrader, options: DifficultyOptions,
                   *, defective: Mapping[str, tuple[str, str]] | None = None, cache: SampleCache | None = None,
                   on_progress: ProgressCallback | None = None,
                   on_warning: Callable[[str], None] | None = None,
                   step: SampleStep | None = None) -> DifficultyReport:
    """Measure each task's pass rate under ``backend``. ``defective`` maps task ids (that are
    not sampled) to (path, reason): they are bucketed ``defective``. A backend with a fixed
    supply (replay) that cannot give ``options.samples`` of a task it has rows for is a
    :class:`~verify_cli.errors.UsageError`; ``on_warning`` hears what else is worth saying
    (also in :attr:`DifficultyReport.warnings`). ``step`` turns each completion into a graded
    sample (default: the one-shot :class:`~verify_cli.sampling.step.AnswerStep`)."""
    defective = dict(defective or {})
    sampled = [t for t in tasks if t.id not in defective]
    warnings = check_supply(backend, sampled, options.samples, option="--samples", other_task_ids=defective)
    for warning in warnings:
        if on_warning is not None:
            on_warning(warning)
    run = _Run(sampled, backend, grader, options, cache, on_progress, step)
    try:
        run.main()
    finally:  # what was graded is on the disk, however the run ended
        if cache is not None:
            cache.sync()
    report = run.report(defective)
    report.warnings = warnings
    return report


def default_sample_cache(cache_root: Path) -> SampleCache:
    return SampleCache(Path(cache_root) / "difficulty-samples")
