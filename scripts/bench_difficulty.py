#!/usr/bin/env python3
"""How much wall time verification adds on top of generation, with the hf backend on CPU.

    python scripts/bench_difficulty.py [--tasks sample_tasks] [--samples 4] [--max-tokens 128]
                                       [--jobs 2] [--torch-threads 1] [--model DIR] [--json]

In one run, on the same tasks, prompts and seeds:

1. generation alone: the backend generates every sample (no grading);
2. grading alone: those completions are graded, ``--jobs`` at a time (after an untimed warm-up
   run per task, so warm workers are up, as they are in 3.);
3. the difficulty run: generation with grading overlapped, as ``verify-cli difficulty`` runs.

An untimed pass over every prompt comes first (each prompt shape's first call is slower); with
``--repeat`` (1) and 3. alternate in order and their medians are reported.

The ratio to watch is (3) / (1): the target is at most 1.2 whenever (2) is faster than (1).
Without ``--model`` a tiny random model is built offline (its completions are random text that
fails every test, which is all grading needs: it is graded through a step that fences it, so that
a bare answer that is not valid Python is graded as the file rather than found a parse error and
never graded). Timings on a shared machine are noisy.

Then adaptive sampling against a fixed budget, on the same tasks and the same samples: a replay
file gives each task ``--adaptive-samples`` candidates, each the reference solution with a
chosen probability (0, 0.1, 0.25, 0.5, 0.75, 0.9, 1, ...) and the starter otherwise, all graded
for real; the fixed run grades every one, the adaptive run stops each task once its bucket is
decided. Reported: samples graded by each and whether the buckets agree (``--skip-adaptive``
leaves this part out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import (  # noqa: E402  # noqa: E402
    Completion,
    Grader,
    GradeRequest,
    Phase,
    SamplingParams,
    Task,
    create_sandbox,
    load_task_set,
)
from verify_cli.difficulty import (  # noqa: E402
    DifficultyOptions,
    run_difficulty,
    sample_seed,
)
from verify_cli.models import (  # noqa: E402
    build_prompt,
    create_model_backend,
)
from verify_cli.sampling import AnswerStep, GradedSample, SampleStep  # noqa: E402
from verify_cli.sandbox import resolve_backend_name  # noqa: E402

SEED = 0


class FencedStep(SampleStep):
    """The one-shot step on the completion's text in a fenced block: random text is graded as the
    task's file (and fails), as a real model's wrong answers are, never skipped as unreadable."""

    def __init__(self, grader: Grader) -> None:
        self.answer = AnswerStep(grader)

    def run(self, task: Task, completion: Completion, *, label: str = "") -> GradedSample:
        if completion.files is not None:
            return self.answer.run(task, completion, label=label)
        fence = "````" if "```" in completion.text else "```"
        return self.answer.run(task, replace(completion, text=f"{fence}\n{completion.text}\n{fence}\n"), label=label)


def generate_alone(backend: Any, tasks: list[Task], params: SamplingParams) -> tuple[float, list[tuple[Task, int,
                                                                                                        Completion]]]:
    prompts = [replace(build_prompt(t, backend.tokenizer), seed=sample_seed(SEED, t.content_hash(), 0), first_sample=0)
               for t in tasks]
    out: list[tuple[Task, int, Completion]] = []
    counters = [0] * len(tasks)
    started = time.monotonic()
    for i, completion in backend.generate_stream(prompts, params):
        out.append((tasks[i], counters[i], completion))
        counters[i] += 1
    return time.monotonic() - started, out


def grade_alone(grader: Grader, samples: list[tuple[Task, int, Completion]], jobs: int) -> tuple[float, int]:
    async def main() -> int:
        queue: asyncio.Queue[tuple[Task, int, Completion]] = asyncio.Queue()
        for s in samples:
            queue.put_nowait(s)
        graded = 0

        step = FencedStep(grader)

        async def worker() -> None:
            nonlocal graded
            while not queue.empty():
                task, index, completion = queue.get_nowait()
                await asyncio.to_thread(step.run, task, completion, label=f"sample {index}")
                graded += 1

        await asyncio.gather(*(worker() for _ in range(jobs)))
        return graded

    started = time.monotonic()
    graded = asyncio.run(main())
    return time.monotonic() - started, graded


#: True pass probabilities given to the tasks in turn in the adaptive comparison.
RATES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def adaptive_vs_fixed(tasks: list[Task], grader: Grader, samples: int, round_size: int, jobs: int,
                      folder: Path) -> dict[str, Any]:
    replay = folder / "replay.jsonl"
    with replay.open("w", encoding="utf-8") as fh:
        for i, task in enumerate(tasks):
            rng = random.Random(i)
            right = {rel: p.read_text("utf-8") for rel, p in task.solution_files().items()}
            wrong = {rel: p.read_text("utf-8") for rel, p in task.starter_files().items() if rel in right}
            for _ in range(samples):
                files = right if rng.random() < RATES[i % len(RATES)] else wrong
                fh.write(json.dumps({"task_id": task.id, "files": files}) + "\n")
    backend = create_model_backend("replay", model=str(replay))
    started = time.monotonic()
    fixed = run_difficulty(tasks, backend, grader, DifficultyOptions(samples=samples, jobs=jobs))
    fixed_s = time.monotonic() - started
    started = time.monotonic()
    adaptive = run_difficulty(tasks, backend, grader, DifficultyOptions(samples=samples, jobs=jobs, adaptive=True,
                                                                        round_size=round_size))
    adaptive_s = time.monotonic() - started
    pairs = {t.task_id: [t.bucket, t.stats.n] for t in fixed.tasks}
    for t in adaptive.tasks:
        pairs[t.task_id] += [t.bucket, t.stats.n]
    return {
        "samples_per_task": samples, "round_size": round_size, "fixed_samples": fixed.sampled,
        "adaptive_samples": adaptive.sampled, "saved": round(1 - adaptive.sampled / fixed.sampled, 3),
        "fixed_s": round(fixed_s, 2), "adaptive_s": round(adaptive_s, 2),
        "buckets_agree": sum(v[0] == v[2] for v in pairs.values()), "tasks": len(pairs),
        "per_task": {k: {"fixed": v[0], "fixed_n": v[1], "adaptive": v[2], "adaptive_n": v[3]}
                     for k, v in pairs.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=Path, default=REPO / "sample_tasks")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch CPU threads for generation (cores left over run the sandboxes)")
    ap.add_argument("--model", type=Path, default=None, help="a local model folder (default: a tiny random one)")
    ap.add_argument("--sandbox", default="auto")
    ap.add_argument("--repeat", type=int, default=1, help="alternate generation alone and the run this many times")
    ap.add_argument("--adaptive-samples", type=int, default=24, help="fixed budget per task in the comparison")
    ap.add_argument("--round-size", type=int, default=6)
    ap.add_argument("--skip-adaptive", action="store_true")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.torch_threads)
    load_before = os.getloadavg()[0]
    tasks = [t for t in load_task_set(args.tasks) if isinstance(t, Task)]
    with tempfile.TemporaryDirectory(prefix="bench-difficulty-") as tmp:
        model = args.model
        if model is None:
            from verify_cli.models import build_tiny_model

            model = build_tiny_model(Path(tmp) / "tiny")
        backend = create_model_backend("hf", model=str(model), device="cpu")
        params = SamplingParams(n=args.samples, temperature=1.0, max_tokens=args.max_tokens, seed=SEED)
        name, _ = resolve_backend_name(args.sandbox)
        with create_sandbox(name) as box, Grader(box, warm=True) as grader:
            # Untimed warm-up: one run per task starts the warm workers both timed phases use.
            list(grader.grade_many((GradeRequest(t, Phase.STARTER) for t in tasks), jobs=args.jobs))
            # Untimed warm-up of the model (first-call allocations), then the phases; with
            # --repeat, generation alone and the overlapped run alternate and medians are kept.
            # Every prompt once, two tokens each: the first call of each prompt shape is slower.
            generate_alone(backend, tasks, replace(params, max_tokens=2))
            opts = DifficultyOptions(samples=args.samples, params=replace(params, n=1), seed=SEED, jobs=args.jobs)
            gens, totals, gen_in_run = [], [], []
            _, samples = generate_alone(backend, tasks, params)  # what grading alone grades
            grade_s, graded = grade_alone(grader, samples, args.jobs)
            for rep in range(args.repeat):
                # Alternate the order, so that drift in the machine's load favours neither.
                for phase in (("gen", "run") if rep % 2 == 0 else ("run", "gen")):
                    if phase == "gen":
                        gens.append(generate_alone(backend, tasks, params)[0])
                    else:
                        started = time.monotonic()
                        report = run_difficulty(tasks, backend, grader, opts, step=FencedStep(grader))
                        totals.append(time.monotonic() - started)
                        gen_in_run.append(report.generation_seconds)
            gen_s, total_s = statistics.median(gens), statistics.median(totals)
            backend.close()
            comparison = None if args.skip_adaptive else adaptive_vs_fixed(
                tasks, grader, args.adaptive_samples, args.round_size, args.jobs, Path(tmp))
    figures = {
        "tasks": len(tasks), "samples": len(samples), "graded": graded, "sandbox": name, "jobs": args.jobs,
        "max_tokens": args.max_tokens, "torch_threads": args.torch_threads,
        "generation_alone_s": round(gen_s, 2), "grading_alone_s": round(grade_s, 2),
        "overlapped_total_s": round(total_s, 2), "overlapped_generation_s": round(statistics.median(gen_in_run), 2),
        "generation_alone_all_s": [round(g, 2) for g in gens], "overlapped_total_all_s": [round(t, 2) for t in totals],
        "total_over_generation": round(total_s / gen_s, 3), "grading_over_generation": round(grade_s / gen_s, 3),
        "sequential_would_be_over_generation": round((gen_s + grade_s) / gen_s, 3),
        "target_applies": grade_s < gen_s, "target_met": (total_s / gen_s) <= 1.2,
        "cores": os.cpu_count(), "load_average_before": round(load_before, 1),
        "load_average_after": round(os.getloadavg()[0], 1), "adaptive": comparison,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"{figures['samples']} samples of {len(tasks)} tasks, hf on CPU ({args.torch_threads} torch thread(s)), "
              f"sandbox {name}, -j {args.jobs}, max_tokens {args.max_tokens}; {os.cpu_count()} cores, "
              f"load average {figures['load_average_before']} -> {figures['load_average_after']}")
        if args.repeat > 1:
            print(f"  (medians of {args.repeat}: generation alone {figures['generation_alone_all_s']}, "
                  f"overlapped {figures['overlapped_total_all_s']})")
        print(f"  generation alone      {gen_s:7.2f}s   1.00x")
        print(f"  grading alone         {grade_s:7.2f}s   {grade_s / gen_s:.2f}x")
        print(f"  one after the other   {gen_s + grade_s:7.2f}s   {(gen_s + grade_s) / gen_s:.2f}x (not run: the sum)")
        print(f"  overlapped (the run)  {total_s:7.2f}s   {total_s / gen_s:.2f}x   target <= 1.20x "
              + ("(applies: grading alone is faster)" if grade_s < gen_s else "(does not apply: grading is slower)"))
        if comparison:
            c = comparison
            print(f"adaptive vs fixed budget ({c['samples_per_task']} per task, rounds of {c['round_size']}): "
                  f"{c['adaptive_samples']} samples instead of {c['fixed_samples']} ({100 * c['saved']:.0f}% saved), "
                  f"{c['adaptive_s']:.1f}s instead of {c['fixed_s']:.1f}s; buckets agree on {c['buckets_agree']} "
                  f"of {c['tasks']} tasks")
            for task_id, v in c["per_task"].items():
                print(f"  {task_id:34} fixed {v['fixed']:9} n={v['fixed_n']:3}   adaptive {v['adaptive']:9} "
                      f"n={v['adaptive_n']:3}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
