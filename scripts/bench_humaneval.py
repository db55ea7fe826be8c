#!/usr/bin/env python3
"""HumanEval through check-tasks, three ways, in one run, side by side:

1. the 164 problems imported with ``verify-cli import --preset humaneval`` (function-call tasks,
   graded by the built-in calls runner), check-tasks warm as the CLI runs it;
2. the same problems as pytest tasks (``tests/test_check.py`` calls ``check(entry_point)``),
   check-tasks warm as the CLI runs it;
3. the floor with no sandbox and no isolation at all: ``python -c`` of reference + check, one
   problem after another, as many runs as check-tasks makes (repeats + the starter).

    python scripts/bench_humaneval.py [--limit 164] [--repeats 3] [--jobs N] [--sandbox bwrap]

Per-run seconds are wall time divided by runs (check-tasks runs ``--jobs`` at once; the bare
floor runs one at a time). The machine is shared: say so when quoting the numbers.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import (  # noqa: E402
    CheckOptions,
    Grader,
    check_tasks,
    create_sandbox,
    load_task_set,
)
from verify_cli.checks import TaskVerdict  # noqa: E402
from verify_cli.importers import (  # noqa: E402
    humaneval_data_file,
    import_rows,
    read_rows,
)

PYTEST_TOML = """schema_version = 1
id = {id}
domain = "coding"
language = "python"
kind = "pytest"
editable = ["solution.py"]

[environment]
image = "verify-cli/python:3.11"
runtime = "python"

[test]
command = 'python -m pytest -q -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests'
results = "junit.xml"

[scoring]
policy = "all-or-nothing"

[limits]
wall_seconds = 30
"""


def as_pytest_tasks(calls_root: Path, out: Path) -> None:
    """The imported problems as pytest tasks: same solution, starter and check()."""
    for toml in sorted(calls_root.rglob("task.toml")):
        src = toml.parent
        entry = next(line.split('"')[1] for line in toml.read_text().splitlines() if line.startswith("entry_point"))
        dest = out / src.relative_to(calls_root)
        (dest / "tests").mkdir(parents=True)
        shutil.copytree(src / "solution", dest / "solution")
        shutil.copytree(src / "starter", dest / "starter")
        check = (src / "hidden_tests" / "check.py").read_text()
        (dest / "tests" / "test_check.py").write_text(
            f"from solution import {entry}\n\n{check}\n\n\ndef test_check():\n    check({entry})\n")
        (dest / "prompt.md").write_text((src / "prompt.md").read_text())
        task_id = json.dumps("pytest-" + src.relative_to(calls_root).as_posix())
        (dest / "task.toml").write_text(PYTEST_TOML.format(id=task_id))


def run_check_tasks(root: Path, sandbox: str, repeats: int, jobs: int) -> tuple[float, int, dict[str, int], str]:
    items = list(load_task_set(root))
    with create_sandbox(sandbox) as box, Grader(box, warm=True) as grader:
        started = time.monotonic()
        reports = check_tasks(items, grader, CheckOptions(repeats=repeats, jobs=jobs))
        seconds = time.monotonic() - started
        stats = grader.warm_stats
    verdicts = {v.value: sum(r.verdict is v for r in reports) for v in TaskVerdict}
    warm = (f"{stats.warm_runs} warm, {stats.cold_runs} cold, {stats.fallbacks} fallbacks, "
            f"{stats.workers_started} workers" if stats is not None else "no warm host")
    return seconds, len(items) * (repeats + 1), verdicts, warm


def run_bare(limit: int, runs_per_problem: int) -> tuple[float, int, int]:
    """``python -c`` of reference + check, sequentially; returns (seconds, runs, passed)."""
    rows = [r.data for r in read_rows(humaneval_data_file())][:limit]
    programs = [r["prompt"] + r["canonical_solution"] + "\n\n" + r["test"] + f"\n\ncheck({r['entry_point']})\n"
                for r in rows]
    passed = 0
    started = time.monotonic()
    for _ in range(runs_per_problem):
        for program in programs:
            done = subprocess.run([sys.executable, "-c", program], capture_output=True, timeout=60)
            passed += done.returncode == 0
    return time.monotonic() - started, len(programs) * runs_per_problem, passed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=164, help="first N problems")
    ap.add_argument("--repeats", type=int, default=3, help="check-tasks reference runs per task")
    ap.add_argument("--jobs", type=int, default=None, help="check-tasks runs at once (default: cores)")
    ap.add_argument("--sandbox", default="bwrap")
    args = ap.parse_args()
    import os

    jobs = args.jobs or os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="verify-bench-humaneval-"))
    try:
        report = import_rows(None, work / "calls", preset="humaneval", limit=args.limit)
        assert not report.failures, report.failures
        as_pytest_tasks(work / "calls", work / "pytest")
        rows = []
        for name, root in (("calls tasks (built-in runner)", work / "calls"), ("pytest tasks", work / "pytest")):
            seconds, runs, verdicts, warm = run_check_tasks(root, args.sandbox, args.repeats, jobs)
            rows.append((f"check-tasks warm, {name}", seconds, runs, f"{verdicts['sound']} sound ({warm})"))
        seconds, runs, passed = run_bare(args.limit, args.repeats + 1)
        rows.append(("bare python -c reference + check (no sandbox)", seconds, runs, f"{passed} of {runs} passed"))
        base = rows[0][1] / rows[0][2]
        print(f"HumanEval, {args.limit} problems, check-tasks --repeats {args.repeats} --jobs {jobs} "
              f"on {args.sandbox} (shared machine: noisy; load average at the end "
              f"{os.getloadavg()[0]:.1f})")
        print(f"{'':<52} {'seconds':>8} {'runs':>6} {'s/run':>7} {'vs calls':>9}  result")
        for label, secs, n, result in rows:
            per = secs / n
            print(f"{label:<52} {secs:>8.1f} {n:>6} {per:>7.3f} {per / base:>8.2f}x  {result}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
