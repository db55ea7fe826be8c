#!/usr/bin/env python3
"""Where a training step spends its time, against generation alone, measured in the same run.

    python scripts/bench_train.py [--tasks sample_tasks] [--model DIR] [--group-size 4]
                                  [--batch-size 4] [--steps 3] [--max-tokens 48] [--grade-jobs 2]
                                  [--update] [--json]

For each step of a ``verify-cli train`` run (update none) it reports generation, grading tail
(grading left after the last completion), writing and, with ``--update``, a GRPO update; then,
for the same batches, prompts and seeds, generation alone (no grading) and grading alone (the
same completions, no generation). Grading overlaps generation, so a step should cost generation
plus a small tail: the target is that grading and writing add at most 20% to a step when grading
alone is faster than generation alone. Without ``--model`` a tiny random model is built (CPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import (  # noqa: E402
    SamplingParams,
    Task,
    create_model_backend,
    create_sandbox,
    load_task_set,
)
from verify_cli.grading import Grader, GradeRequest, Phase  # noqa: E402
from verify_cli.models import extract_for_task, files_to_candidate  # noqa: E402
from verify_cli.rollout import (  # noqa: E402
    GRPOConfig,
    PolicyUpdater,
    SamplingOptions,
    StepReport,
    TrainConfig,
    Trainer,
    derive_seed,
)
from verify_cli.sandbox import resolve_backend_name  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=Path, default=REPO / "sample_tasks")
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--backend", default="hf")
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--grade-jobs", type=int, default=2)
    ap.add_argument("--sandbox", default="auto")
    ap.add_argument("--update", action="store_true", help="also time a GRPO update per step")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-train-"))
    model = args.model
    if model is None:
        from verify_cli.models import build_tiny_model

        model = build_tiny_model(tmp / "model")
    tasks = [t for t in load_task_set(args.tasks) if isinstance(t, Task)]
    backend = create_model_backend(args.backend, model=str(model))
    sampling = SamplingOptions(max_tokens=args.max_tokens)
    config = TrainConfig(group_size=args.group_size, batch_size=args.batch_size, steps=args.steps, seed=0,
                         sampling=sampling, update="grpo" if args.update else "none", grade_jobs=args.grade_jobs)
    name, _ = resolve_backend_name(args.sandbox)
    reports: list[StepReport] = []
    alone: list[dict[str, float]] = []
    with create_sandbox(name) as box, Grader(box, warm=True) as grader:
        policy = PolicyUpdater(backend, tmp / "run", GRPOConfig()) if args.update else None
        trainer = Trainer(config, backend, grader, tasks, tmp / "run", sandbox_backend=name, policy=policy,
                          on_step=reports.append)
        # Untimed warm-up: model kernels, warm grading workers, Parquet writer.
        warm = Trainer(TrainConfig(group_size=1, batch_size=len(tasks), steps=1, sampling=sampling),
                       backend, grader, tasks, tmp / "warmup", sandbox_backend=name)
        warm.run()
        run_id, _, _ = trainer.start(resume=False)
        # Alone and in the step alternate, step by step, so load drifts hit both alike.
        for step in range(args.steps):
            batch = trainer.schedule.batch(step)
            prompts = [trainer.runner.first_prompt(t) for t in batch]
            params = SamplingParams(n=args.group_size, temperature=sampling.temperature, top_p=sampling.top_p,
                                    max_tokens=sampling.max_tokens, seed=derive_seed(0, "step", step), logprobs=True)
            t0 = time.monotonic()
            completions = list(backend.generate_stream(prompts, params))
            gen = time.monotonic() - t0
            requests = []
            for index, c in completions:
                ex = extract_for_task(batch[index], c.text)
                if ex.ok:
                    requests.append(GradeRequest(batch[index], Phase.CANDIDATE, candidate=files_to_candidate(ex.files)))
            t0 = time.monotonic()
            list(grader.grade_many(requests, jobs=args.grade_jobs))
            grading = time.monotonic() - t0
            alone.append({"generation_alone": gen, "grading_alone": grading, "graded": len(requests),
                          "completions": len(completions)})
            trainer.run_step(run_id, step)

    def med(xs: list[float]) -> float:
        return statistics.median(xs) if xs else 0.0

    trajectories = args.group_size * args.batch_size
    step_s = med([r.seconds["step"] for r in reports])
    update_s = med([r.seconds["update"] for r in reports])
    rollout_s = step_s - update_s  # the step without the policy update
    gen_alone = med([a["generation_alone"] for a in alone])
    grade_alone = med([a["grading_alone"] for a in alone])
    result: dict[str, Any] = {
        "backend": args.backend, "sandbox": name, "model": str(model), "tasks": len(tasks),
        "group_size": args.group_size, "batch_size": args.batch_size, "steps": args.steps,
        "max_tokens": args.max_tokens, "grade_jobs": args.grade_jobs,
        "per_step_median_s": {
            "step": step_s,
            "generation": med([r.seconds["generation"] for r in reports]),
            "grading_tail": med([r.seconds["grading_tail"] for r in reports]),
            "grading_busy": med([r.seconds["grading_busy"] for r in reports]),
            "writing": med([r.seconds["writing"] for r in reports]),
            "update": update_s,
            "generation_alone": gen_alone,
            "grading_alone": grade_alone,
        },
        "graded_per_step": med([a["graded"] for a in alone]),
        "trajectories_per_s": {"rollout_step": trajectories / rollout_s if rollout_s else None,
                               "generation_alone": trajectories / gen_alone if gen_alone else None},
        "rollout_step_over_generation_alone": rollout_s / gen_alone if gen_alone else None,
        "grading_alone_faster_than_generation": grade_alone < gen_alone,
    }
    ratio = result["rollout_step_over_generation_alone"]
    result["target_met"] = (ratio is not None and ratio <= 1.2) if grade_alone < gen_alone else None
    if args.json:
        print(json.dumps(result, indent=2))
        return
    s = result["per_step_median_s"]
    print(f"{trajectories} trajectories/step, {args.steps} steps, backend {args.backend}, sandbox {name}, "
          f"max_tokens {args.max_tokens}, grade jobs {args.grade_jobs} (medians per step)")
    for key in ("generation", "grading_tail", "writing", "update", "step", "generation_alone", "grading_alone",
                "grading_busy"):
        print(f"  {key:<17} {s[key]:8.3f} s")
    tp = result["trajectories_per_s"]
    print(f"  trajectories/s: rollout step {tp['rollout_step']:.2f}, generation alone {tp['generation_alone']:.2f}")
    print(f"  rollout step / generation alone: {ratio:.3f} "
          f"(grading alone {'faster' if grade_alone < gen_alone else 'slower'} than generation alone; "
          f"target <= 1.20 when faster: {result['target_met']})")


if __name__ == "__main__":
    main()
