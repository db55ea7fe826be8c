#!/usr/bin/env python3
"""Wall time of check-tasks and audit on a task set: this checkout against a baseline revision.

Exports the baseline revision (``git archive``) to a temporary folder, then runs, alternating
between the two code bases so that both see the same machine load, ``check-tasks PATH --no-cache``
and ``audit PATH`` (both at their defaults, on the same sandbox backend), ``--rounds`` times each,
and prints the median wall times, the ratio new/baseline and the work each did (check-tasks: its
sandboxed runs; audit: mutants judged, reruns and probes).

    python scripts/bench_curation.py --baseline fa3a913 [--path sample_tasks] [--rounds 1]

Timings on a shared machine are noisy; the ratio from one run is what to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def export(revision: str, dest: Path) -> None:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def timed(code: Path, args: list[str], json_out: Path) -> tuple[float, int, int]:
    """(seconds, exit code, work items) of one ``python -m verify_cli`` command."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "verify_cli", *args, "--json", str(json_out)],
                          cwd=code, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    runs = 0
    try:
        doc = json.loads(json_out.read_text())
        for task in doc.get("tasks", []):
            runs += len(task.get("runs", []))  # check-tasks
            m, f, p = task.get("mutation") or {}, task.get("flakiness") or {}, task.get("probes") or []
            runs += len(m.get("mutants", [])) + int(f.get("reruns", 0)) + len(p)  # audit
    except (OSError, ValueError):
        pass
    return seconds, done.returncode, runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="git revision to compare against")
    parser.add_argument("--path", default="sample_tasks", help="task set, relative to the repository")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sandbox", default="auto")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verify-bench-curation-") as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        export(args.baseline, base)
        commands = {"check-tasks": ["check-tasks", args.path, "--no-cache", "--sandbox", args.sandbox],
                    "audit": ["audit", args.path, "--sandbox", args.sandbox]}
        print(f"{'command':<12} {'baseline':>10} {'this':>10} {'ratio':>6}  {'work (baseline / this)':>22}  exit codes")
        for name, cmd in commands.items():
            times: dict[str, list[float]] = {"baseline": [], "this": []}
            runs: dict[str, int] = {}
            codes: dict[str, int] = {}
            for _ in range(args.rounds):
                for label, code in (("baseline", base), ("this", REPO)):
                    seconds, rc, n = timed(code, cmd, Path(tmp) / f"{label}-{name}.json")
                    times[label].append(seconds)
                    runs[label], codes[label] = n, rc
            b, t = statistics.median(times["baseline"]), statistics.median(times["this"])
            print(f"{name:<12} {b:>9.1f}s {t:>9.1f}s {t / b:>5.2f}x  {runs['baseline']:>10} / {runs['this']:<9}  "
                  f"{codes['baseline']} / {codes['this']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
