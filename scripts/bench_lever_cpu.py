#!/usr/bin/env python3
"""CPU a warm run costs with a speed lever on and off, alternated in one process (issue 40).

    python scripts/bench_lever_cpu.py LEVER [--tasks 10] [--per-task 7] [--blocks 8] [--sandbox bwrap]
    python scripts/bench_lever_cpu.py LEVER --perf [--rounds 2]    # page faults too, under perf stat

Imports the first ``--tasks`` HumanEval problems, opens one warm Grader, and grades each
problem's reference solution as a candidate ``--per-task`` times in a row (HumanEval's
``bench_peers.py`` workload has 7 completions a problem), block after block, the lever on in one
block and off (``VERIFY_LEVERS_OFF=LEVER``, read at each run) in the next, the order swapped
every other pair. Wall clock is the wrong judge of a lever on a shared machine; CPU per run is a
better one, and it is measured three ways here:

- the process tree's CPU per run (this process, its warm workers and their candidates), from a
  cpuacct cgroup this process joins (cgroup v1, as root; left out where there is none);
- the trusted run child's own CPU per run, as its worker reports it (``RunResult.cpu_seconds``);
- with ``--perf``: ``perf stat`` over the whole tree, a run of 4 blocks minus a run of 1 (the
  start-up cancels), for task-clock and page faults, on and off alternated ``--rounds`` times.

Printed: the figures per state and the on/off ratio of each block pair (same run, adjacent in
time). The machine is shared: quote the load average printed with them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import Grader, create_sandbox, load_task_set  # noqa: E402
from verify_cli.grading import GradeRequest, Phase, solution_as_candidate  # noqa: E402
from verify_cli.importers import import_rows  # noqa: E402
from verify_cli.sandbox import LEVERS  # noqa: E402
from verify_cli.tasks import Task  # noqa: E402

LEVERS_OFF_ENV = "VERIFY_LEVERS_OFF"  # verify_cli/sandbox/plumbing/levers.py
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def _join_cpuacct() -> Path | None:
    """A cpuacct cgroup of this process's own (its children inherit it), or None."""
    if not (CPUACCT / "cgroup.procs").exists():
        return None
    group = CPUACCT / f"verify-bench-lever-{os.getpid()}"
    try:
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    return group


def _requests(work: Path, tasks: int) -> list[GradeRequest]:
    report = import_rows(None, work / "tasks", preset="humaneval", limit=tasks)
    assert not report.failures, report.failures
    found = sorted((t for t in load_task_set(work / "tasks") if isinstance(t, Task)),
                   key=lambda t: int(t.id.rpartition("/")[2]))
    return [GradeRequest(t, Phase.CANDIDATE, candidate=solution_as_candidate(t)) for t in found]


def measure(args: argparse.Namespace, states: list[str]) -> dict[str, dict[str, list[float]]]:
    """Grade in blocks, one state a block (``states`` in order, swapped every other round)."""
    group = _join_cpuacct()
    usage = (lambda: int((group / "cpuacct.usage").read_text())) if group else (lambda: 0)
    out: dict[str, dict[str, list[float]]] = {s: {"tree": [], "child": [], "wall": []} for s in states}
    work = Path(tempfile.mkdtemp(prefix="verify-bench-lever-"))
    try:
        reqs = _requests(work, args.tasks)
        with create_sandbox(args.sandbox) as box, Grader(box, warm=True) as grader:
            for req in reqs[:2]:  # the workers start
                assert grader.grade(req).passed
            for block in range(args.blocks):
                order = states if block % 2 == 0 else states[::-1]
                for state in order:
                    if state == "off":
                        os.environ[LEVERS_OFF_ENV] = args.lever
                    else:
                        os.environ.pop(LEVERS_OFF_ENV, None)
                    used, started, runs = usage(), time.monotonic(), 0
                    for req in reqs:
                        for _ in range(args.per_task):
                            result = grader.grade(req)
                            assert result.passed, result.problems
                            out[state]["child"].append(result.run.cpu_seconds * 1e3)
                            runs += 1
                    out[state]["wall"].append((time.monotonic() - started) * 1e3 / runs)
                    if group:
                        out[state]["tree"].append((usage() - used) / 1e6 / runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        os.environ.pop(LEVERS_OFF_ENV, None)
        if group:  # back to the root group, and this one removed
            with contextlib.suppress(OSError):
                (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
                group.rmdir()
    return out


def _perf(args: argparse.Namespace) -> None:
    """``perf stat`` over a run of 4 blocks minus a run of 1, per state, alternated."""
    runs = 3 * args.tasks * args.per_task
    for _ in range(args.rounds):
        for state in ("on", "off"):
            totals = []
            for blocks in (1, 4):
                env = dict(os.environ)
                env.pop(LEVERS_OFF_ENV, None)
                if state == "off":
                    env[LEVERS_OFF_ENV] = args.lever
                with tempfile.NamedTemporaryFile("r", suffix=".perf") as fh:
                    subprocess.run(["perf", "stat", "-x,", "-e", "task-clock,page-faults", "-o", fh.name,
                                    sys.executable, __file__, args.lever, "--inner", "--blocks", str(blocks),
                                    "--tasks", str(args.tasks), "--per-task", str(args.per_task),
                                    "--sandbox", args.sandbox], check=True, env=env, stdout=subprocess.DEVNULL)
                    counts = {line.split(",")[2]: float(line.split(",")[0]) for line in fh
                              if line.count(",") > 2 and line[0].isdigit()}
                totals.append(counts)
            cpu = (totals[1]["task-clock"] - totals[0]["task-clock"]) / runs
            faults = (totals[1]["page-faults"] - totals[0]["page-faults"]) / runs
            print(f"{args.lever} {state:3s}: {cpu:.2f} ms CPU and {faults:.0f} page faults a run "
                  f"(perf stat, {runs} runs)", flush=True)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lever", help="a lever's name (verify_cli/sandbox/plumbing/levers.py)")
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--per-task", type=int, default=7)
    ap.add_argument("--blocks", type=int, default=8, help="block pairs (one block on, one off)")
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--perf", action="store_true", help="perf stat's CPU and page faults instead")
    ap.add_argument("--rounds", type=int, default=2, help="with --perf: on/off alternations")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)  # one state, for --perf
    args = ap.parse_args()
    if args.lever not in LEVERS:
        ap.error(f"no speed lever {args.lever} (known: {', '.join(sorted(LEVERS))})")
    if args.perf:
        _perf(args)
        return 0
    if args.inner:
        measure(args, ["env"])
        return 0
    out = measure(args, ["on", "off"])
    for state in ("on", "off"):
        got = out[state]
        tree = (f"tree CPU {statistics.mean(got['tree']):.2f} ms a run (blocks "
                f"{' '.join(f'{x:.2f}' for x in got['tree'])}); ") if got["tree"] else ""
        print(f"{args.lever} {state:3s}: {tree}trusted run child {statistics.median(got['child']):.2f} ms CPU "
              f"(median); wall {statistics.median(got['wall']):.1f} ms a run")
    if out["on"]["tree"]:
        pairs = [on / off for on, off in zip(out["on"]["tree"], out["off"]["tree"], strict=True)]
        print(f"on / off, tree CPU, block pairs: {' '.join(f'{p:.3f}' for p in pairs)}; "
              f"median {statistics.median(pairs):.3f}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
