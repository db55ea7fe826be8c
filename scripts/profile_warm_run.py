#!/usr/bin/env python3
"""Where a warm run's time goes: one HumanEval task graded warm, over and over, to profile.

    python scripts/profile_warm_run.py [--runs 200] [--task 0] [--sandbox bwrap] [--cprofile N]

Imports one HumanEval problem (``verify-cli import --preset humaneval``), opens a warm Grader
on the sandbox, grades the reference solution as a candidate once untimed (the warm worker
starts), then ``--runs`` times one after another, and prints the wall milliseconds per run.
With ``--cprofile N`` the timed runs are profiled in this (the host) process and the N
functions of most own time are printed, then the time grouped by module.

Meant to be run under the system's profilers too, e.g. (``--runs`` twice, and the difference
taken, gives per-run figures without the start-up):

    perf stat -e task-clock,page-faults,context-switches,cpu-migrations -- python scripts/profile_warm_run.py
    perf record -e cpu-clock -g -o warm.data -- python scripts/profile_warm_run.py
    strace -f -c -o syscalls.txt python scripts/profile_warm_run.py

The machine is shared: figures are noisy.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import Grader, create_sandbox, load_task_set  # noqa: E402
from verify_cli.grading import GradeRequest, Phase, solution_as_candidate  # noqa: E402
from verify_cli.importers import import_rows  # noqa: E402
from verify_cli.tasks import Task  # noqa: E402


def by_module(stats: pstats.Stats) -> list[tuple[str, float]]:
    totals: dict[str, float] = defaultdict(float)
    for (path, _line, _name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        p = path.replace(str(REPO) + "/", "")
        key = p if p.startswith("verify_cli") else ("(built-in)" if p.startswith("~") else Path(p).name)
        totals[key] += tt
    return sorted(totals.items(), key=lambda kv: -kv[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--task", type=int, default=0, help="HumanEval problem number")
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--cprofile", type=int, default=0, metavar="N", help="profile the host side; show N functions")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="verify-profile-warm-"))
    try:
        report = import_rows(None, work / "tasks", preset="humaneval", limit=args.task + 1)
        assert not report.failures, report.failures
        task = next(t for t in load_task_set(work / "tasks")
                    if isinstance(t, Task) and t.id == f"humaneval/{args.task}")
        req = GradeRequest(task, Phase.CANDIDATE, candidate=solution_as_candidate(task))
        with create_sandbox(args.sandbox) as box, Grader(box, warm=True) as grader:
            first = grader.grade(req)
            assert first.passed, first.problems
            profiler = cProfile.Profile() if args.cprofile else None
            started = time.monotonic()
            if profiler:
                profiler.enable()
            for _ in range(args.runs):
                result = grader.grade(req)
                assert result.passed, result.problems
            if profiler:
                profiler.disable()
            seconds = time.monotonic() - started
            stats = grader.warm_stats
        print(f"{args.runs} warm runs of humaneval/{args.task} on {args.sandbox}: {1000 * seconds / args.runs:.1f} ms "
              f"per run ({stats.warm_runs if stats else 0} warm, {stats.cold_runs if stats else 0} cold; "
              "shared machine: noisy)")
        if profiler:
            st = pstats.Stats(profiler)
            total = sum(v[2] for v in st.stats.values())  # type: ignore[attr-defined]
            print(f"host process: {1000 * total / args.runs:.2f} ms of profiled own time per run "
                  "(waits included: a thread blocked reading the worker's answer counts here)")
            for module, tt in by_module(st)[:15]:
                print(f"  {1000 * tt / args.runs:7.3f} ms/run  {module}")
            st.sort_stats("tottime").print_stats(args.cprofile)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
