#!/usr/bin/env python3
"""How often check-tasks catches a test that fails one run in four, against the promise.

Runs check-tasks (no cache, warm workers) ``--trials`` times on the fixture
``tests/fixtures/flaky/one-in-four`` (a test that fails when ``os.urandom`` says so, probability
1/4) at each repeat count asked for (default: the old default of 3 and the new default), and
prints, per repeat count: the share of trials that flagged the task, the predicted detection
power ``1 - 0.75**n`` with a 95% Wilson interval for the measured share, the mean reference runs
made and the wall time per trial.

    python scripts/bench_flakiness.py [--trials 40] [--repeats 3 11] [--sandbox auto] [--jobs 2]

The measured share is random by design; the interval says how far it may fall from the
prediction by chance alone. Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import (  # noqa: E402
    CheckOptions,
    check_tasks,
    create_sandbox,
)
from verify_cli.checks import (  # noqa: E402
    DEFAULT_REPEATS,
    TaskVerdict,
    detection_power,
)
from verify_cli.grading import Grader  # noqa: E402
from verify_cli.sandbox import resolve_backend_name  # noqa: E402
from verify_cli.tasks import load_task  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "flaky" / "one-in-four"


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--repeats", type=int, nargs="+", default=[3, DEFAULT_REPEATS])
    parser.add_argument("--sandbox", default="auto")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    backend, warning = resolve_backend_name(args.sandbox)
    if warning:
        print(warning, file=sys.stderr)
    task = load_task(FIXTURE)
    print(f"flakiness power on {FIXTURE.relative_to(REPO)} ({args.trials} trials each, sandbox {backend}, "
          f"warm, jobs {args.jobs})")
    print(f"{'repeats':>7}  {'flagged':>8}  {'95% interval':>15}  {'predicted':>9}  {'runs/trial':>10}  "
          f"{'s/trial':>7}")
    with create_sandbox(backend) as box, Grader(box, warm=True) as grader:
        for repeats in args.repeats:
            options = CheckOptions(repeats=repeats, jobs=args.jobs)
            flagged = runs = 0
            start = time.perf_counter()
            for _ in range(args.trials):
                (report,) = check_tasks([task], grader, options)
                flagged += report.verdict is TaskVerdict.DEFECTIVE
                runs += sum(r["phase"] == "reference" for r in report.runs)
            seconds = (time.perf_counter() - start) / args.trials
            low, high = wilson(flagged, args.trials)
            print(f"{repeats:>7}  {flagged / args.trials:>8.1%}  {f'{low:.1%}-{high:.1%}':>15}  "
                  f"{detection_power(repeats):>9.1%}  {runs / args.trials:>10.1f}  {seconds:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
