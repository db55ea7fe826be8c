#!/usr/bin/env python3
"""Sandbox overhead over bare runs, measured side by side in one run over the sample tasks.

For each sample task, the reference test command runs bare (a plain subprocess, no limits, no
sandbox) and in each available backend, interleaved round by round so machine noise hits all
alike; the median wall time of each and its ratio to bare are printed. Then ``check-tasks -j 2``
over the whole set (no cache) is timed against (sum of bare reference runs x repeats / 2).

    python scripts/bench_sandbox.py [--rounds 5] [--backends process,bwrap,docker] [--json out.json]

Targets (issue 2): bwrap at most 1.15x bare; check-tasks -j 2 at most 1.3x of the ideal.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify_cli.checks.solvability import CheckOptions, check_tasks  # noqa: E402
from verify_cli.grading.grader import Grader, run_environment, task_limits  # noqa: E402
from verify_cli.grading.workspace import Phase, lay_out  # noqa: E402
from verify_cli.sandbox.base import RunSpec  # noqa: E402
from verify_cli.sandbox.environment import HARNESS_DIR, pinned_environment  # noqa: E402
from verify_cli.sandbox.process import runtime_path  # noqa: E402
from verify_cli.sandbox.registry import create_sandbox, sandbox_class  # noqa: E402
from verify_cli.tasks.loader import load_task_set  # noqa: E402
from verify_cli.tasks.model import Task  # noqa: E402


def bare_run(task: Task, workdir: Path) -> float:
    """The test command as a developer would run it: a subprocess in the work folder."""
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results"
        results.mkdir()
        env = pinned_environment(workdir=str(workdir), results_dir=str(results), harness_dir=str(HARNESS_DIR),
                                 tmp_dir=scratch, path=runtime_path(), extra=run_environment(task, 1))
        t = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", task.test.command], cwd=workdir, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=str(ROOT / "sample_tasks"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backends", default="process,bwrap,docker")
    ap.add_argument("--repeats", type=int, default=3, help="check-tasks repeats")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()

    tasks = [t for t in load_task_set(Path(args.tasks)) if isinstance(t, Task)]
    backends = []
    for name in args.backends.split(","):
        avail = sandbox_class(name).availability()
        if avail.available:
            backends.append(name)
        else:
            print(f"skipping {name}: {avail.reason}", file=sys.stderr)
    boxes = {name: create_sandbox(name) for name in backends}
    for box in boxes.values():
        box.start()

    rows = []
    bare_total = 0.0
    for task in tasks:
        times: dict[str, list[float]] = {"bare": [], **{b: [] for b in backends}}
        work = Path(tempfile.mkdtemp(prefix="bench-"))
        try:
            lay_out(task, Phase.REFERENCE, work)
            bare_run(task, work)  # warm the page cache once
            for r in range(args.rounds):
                order = ["bare", *backends]
                order = order[r % len(order):] + order[: r % len(order)]
                for mode in order:
                    if mode == "bare":
                        times["bare"].append(bare_run(task, work))
                        continue
                    spec = RunSpec(command=["/bin/sh", "-c", task.test.command], workdir=work,
                                   limits=task_limits(task), env=run_environment(task, 1),
                                   image=task.environment.image, runtime=task.environment.runtime)
                    t = time.perf_counter()
                    res = boxes[mode].run(spec)
                    times[mode].append(time.perf_counter() - t)
                    if res.verdict.value != "ok":
                        print(f"warning: {task.id} on {mode}: {res.verdict.value} {res.message}", file=sys.stderr)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        bare_total += med["bare"]
        rows.append({"task": task.id, **{f"{k}_s": round(v, 4) for k, v in med.items()},
                     **{f"{b}_ratio": round(med[b] / med["bare"], 3) for b in backends}})

    header = ["task", "bare_s", *[f"{b}_s" for b in backends], *[f"{b}_ratio" for b in backends]]
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in header]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[h]).ljust(w) for h, w in zip(header, widths, strict=True)))
    summary: dict[str, object] = {}
    for b in backends:
        total_b = sum(r[f"{b}_s"] for r in rows)  # type: ignore[misc]
        summary[f"{b}_over_bare"] = round(total_b / bare_total, 3)
        print(f"{b}: sum of medians {total_b:.3f}s vs bare {bare_total:.3f}s -> {total_b / bare_total:.3f}x")

    default = "bwrap" if "bwrap" in boxes else backends[0]
    jobs = 2
    t = time.perf_counter()
    reports = check_tasks(tasks, Grader(boxes[default]), CheckOptions(repeats=args.repeats, jobs=jobs))
    elapsed = time.perf_counter() - t
    ideal = bare_total * (args.repeats + 1) / jobs
    ideal_ref_only = bare_total * args.repeats / jobs
    sound = sum(r.verdict.value == "sound" for r in reports)
    print(f"check-tasks -j {jobs} --repeats {args.repeats} on {default}: {elapsed:.2f}s for {len(tasks)} tasks "
          f"({sound} sound); bare reference runs x repeats / {jobs} = {ideal_ref_only:.2f}s -> "
          f"{elapsed / ideal_ref_only:.3f}x; counting the starter run too: {ideal:.2f}s -> {elapsed / ideal:.3f}x")
    summary.update({"check_tasks_seconds": round(elapsed, 3), "ideal_reference_seconds": round(ideal_ref_only, 3),
                    "check_tasks_over_ideal": round(elapsed / ideal_ref_only, 3),
                    "check_tasks_over_ideal_with_starter": round(elapsed / ideal, 3),
                    "cpu_count": os.cpu_count()})
    for box in boxes.values():
        box.close()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"rows": rows, "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
