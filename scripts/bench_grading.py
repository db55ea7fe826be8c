#!/usr/bin/env python3
"""Graded runs per second, cold and warm, in-process and two-process, on every available
sandbox backend, side by side (plus one stand-in call's round trip).

    python scripts/bench_grading.py [--task sample_tasks/coding-interval-merge] [--runs 40]
                                    [--jobs 1] [--backends bwrap,docker] [--json]
                                    [--baseline REF] [--many-calls-only]

Each row grades the task's reference ``--runs`` times (after an untimed warm-up: the first
cold run, the warm workers' start) through the public Grader, exactly as check-tasks does. The
floors are what no grader can beat: the tests' own durations from the JUnit XML, and a pytest
session forked from a warmed interpreter on the host with no sandbox at all.

The boundary's own cost: a test making 10,000 small calls (a scalar call, a list argument the
candidate mutates, a method of a candidate object), through this checkout's harness and, with
``--baseline REF``, through the harness of commit REF (lists copied there, shared here), in the
same run; with ``--baseline`` the warm two-process rows are also graded by REF's whole checkout
(a temporary git worktree, its own bench script) and the ratio printed (target <= 1.2x).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import (  # noqa: E402
    Task,
    create_sandbox,
)
from verify_cli.grading import (  # noqa: E402
    Grader,
    GradeRequest,
    GradeResult,
    Phase,
    lay_out,
    parse_pytest_command,
    run_environment,
)
from verify_cli.sandbox import (  # noqa: E402
    HARNESS_DIR,
    WARM_CANDIDATE_ENV,
    sandbox_class,
)
from verify_cli.tasks import (  # noqa: E402
    Isolation,
    load_task,
)

SEED = 1
POOL_SIZE = 2  # check-tasks' default --pool-size


def _requests(task: Task, n: int) -> list[GradeRequest]:
    return [GradeRequest(task, Phase.REFERENCE, seed=SEED, label=str(i)) for i in range(n)]


def _in_process(task: Task) -> Task:
    """The task graded in-process (the candidate imported into the test process): the
    baseline rows ("cold", "warm") measure this, as before two-process grading."""
    return dataclasses.replace(task, isolation=Isolation.IN_PROCESS)


def _timed(grader: Grader, task: Task, runs: int, jobs: int) -> tuple[float, list[GradeResult]]:
    start = time.monotonic()
    results = list(grader.grade_many(_requests(task, runs), jobs=jobs))
    return time.monotonic() - start, results


def _timed_ready(grader: Grader, box: Any, task: Task, runs: int) -> tuple[float, list[GradeResult]]:
    """One run at a time, each timed once the pools are full again (docker: single-use
    containers): what one grade costs when a prepared container is waiting for it."""
    total = 0.0
    results: list[GradeResult] = []
    for req in _requests(task, runs):
        box.wait_until_warm(120.0)
        start = time.monotonic()
        results.append(grader.grade(req))
        total += time.monotonic() - start
    return total, results


def _row(backend: str, mode: str, seconds: float, results: list[GradeResult],
         **extra: Any) -> dict[str, Any]:
    ok = sum(r.passed for r in results)
    return {"backend": backend, "mode": mode, "runs": len(results), "passed": ok,
            "seconds": round(seconds, 3), "runs_per_second": round(len(results) / seconds, 2),
            "seconds_per_run": round(seconds / len(results), 4),
            "median_run_wall": round(statistics.median(r.run.wall_seconds for r in results), 4),
            **extra}


def bench_two_process(name: str, task: Task, runs: int, jobs: int) -> list[dict[str, Any]]:
    """Cold and warm rows of two-process grading on backend ``name`` (where it has it)."""
    rows: list[dict[str, Any]] = []
    with create_sandbox(name) as box:
        if not box.two_process:
            return [{"backend": name, "mode": "two-process", "unavailable":
                     f"{name} grades in-process (no two-process support)"}]
        cold = Grader(box)
        list(cold.grade_many(_requests(task, jobs), jobs=jobs))
        seconds, results = _timed(cold, task, runs, jobs)
        rows.append(_row(name, "cold two-process", seconds, results))
        # Warm trusted side, with the candidate forked by a warm candidate parent and, for
        # comparison in the same run, started cold (a new interpreter per run) as before.
        for mode, switch in (("warm two-process", "1"), ("warm two-process, cold candidate", "0")):
            saved = os.environ.get(WARM_CANDIDATE_ENV)
            os.environ[WARM_CANDIDATE_ENV] = switch
            try:
                with Grader(box, warm=True) as warm:
                    list(warm.grade_many(_requests(task, jobs), jobs=jobs))  # starts the workers
                    before = dataclasses.replace(warm.warm_stats) if warm.warm_stats else None
                    seconds, results = _timed(warm, task, runs, jobs)
                    after = warm.warm_stats
                    counts = {} if before is None or after is None else {
                        "runs_warm": after.warm_runs - before.warm_runs,
                        "warm_candidates": after.warm_candidates - before.warm_candidates,
                        "fallbacks": after.fallbacks - before.fallbacks}
                    rows.append(_row(name, mode, seconds, results, **counts))
            finally:
                if saved is None:
                    os.environ.pop(WARM_CANDIDATE_ENV, None)
                else:
                    os.environ[WARM_CANDIDATE_ENV] = saved
    return rows


_ROUND_TRIP = r"""
import json, os, socket, subprocess, sys, tempfile, time
harness, n = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, os.path.join(harness, "candidate"))
import verify_wire


def stats(samples):
    samples.sort()
    return {"median_us": samples[len(samples) // 2] * 1e6, "p90_us": samples[int(len(samples) * 0.9)] * 1e6}


def ping_pong(framed):
    # The floor: two processes passing a message back and forth over a Unix stream socket,
    # bare (20 bytes), or framed JSON through the codec (the same message as the call below).
    a, b = socket.socketpair()
    if os.fork() == 0:
        a.close()
        if framed:
            reader = verify_wire.FrameReader(b)
            dec = verify_wire.Decoder()
            try:
                while True:
                    msg = reader.read()
                    value = dec.decode(msg["args"])
                    b.sendall(verify_wire.pack_frame({"id": msg["id"], "ok": verify_wire.encode(value[0])}))
            except EOFError:
                os._exit(0)
        while data := b.recv(64):
            b.sendall(data)
        os._exit(0)
    b.close()
    reader = verify_wire.FrameReader(a)
    out = []
    for i in range(n + 200):
        t = time.perf_counter()
        if framed:
            a.sendall(verify_wire.pack_frame({"id": i, "op": "call", "target": {"$handle": 1, "owner": "candidate"},
                                              "args": verify_wire.encode([[1, "two", 3.0]]),
                                              "kwargs": verify_wire.encode({})}))
            verify_wire.decode(reader.read()["ok"])
        else:
            a.sendall(b"x" * 20)
            a.recv(64)
        out.append(time.perf_counter() - t)
    a.close()
    os.wait()
    return stats(out[200:])


work = tempfile.mkdtemp(prefix="verify-rtt-")
with open(os.path.join(work, "rtt_mod.py"), "w") as fh:
    fh.write("def echo(x):\n    return x\n")
channel = os.path.join(work, "channel.sock")
env = {**os.environ, "VERIFY_CHANNEL": channel, "PYTHONPATH": os.path.join(harness, "candidate")}
server = subprocess.Popen([sys.executable, os.path.join(harness, "candidate", "verify_candidate_server.py")],
                          cwd=work, env=env)
try:
    os.environ.update(VERIFY_CHANNEL=channel, VERIFY_CANDIDATE_MODULES=json.dumps(["rtt_mod"]),
                      VERIFY_WORKDIR=work)
    sys.path.insert(0, harness)
    import verify_standin
    verify_standin.install()
    import rtt_mod
    echo = rtt_mod.echo
    for _ in range(200):
        echo(1)
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        echo([1, "two", 3.0])
        samples.append(time.perf_counter() - t)
    report = stats(samples)
    report["socket_ping_pong"] = ping_pong(False)
    report["codec_ping_pong"] = ping_pong(True)
    local = lambda x: x
    t = time.perf_counter()
    for _ in range(n):
        local([1, "two", 3.0])
    report["in_process_us"] = (time.perf_counter() - t) / n * 1e6
    print(json.dumps(report))
finally:
    server.kill()
"""


_MANY_CALLS = r"""
import json, os, subprocess, sys, tempfile, time
harness, n = sys.argv[1], int(sys.argv[2])
work = tempfile.mkdtemp(prefix="verify-calls-")
with open(os.path.join(work, "calls_mod.py"), "w") as fh:
    fh.write("def scale(x):\n    return x * 2\n\n"
             "def append_one(values):\n    values.append(1)\n\n"
             "class Stack:\n    def __init__(self):\n        self.items = []\n"
             "    def push(self, x):\n        self.items.append(x)\n        return len(self.items)\n")
channel = os.path.join(work, "channel.sock")
env = {**os.environ, "VERIFY_CHANNEL": channel, "PYTHONPATH": os.path.join(harness, "candidate")}
server = subprocess.Popen([sys.executable, os.path.join(harness, "candidate", "verify_candidate_server.py")],
                          cwd=work, env=env)
try:
    os.environ.update(VERIFY_CHANNEL=channel, VERIFY_CANDIDATE_MODULES=json.dumps(["calls_mod"]),
                      VERIFY_WORKDIR=work)
    sys.path.insert(0, harness)
    import verify_standin
    verify_standin.install()
    import calls_mod
    stack = calls_mod.Stack()
    for _ in range(200):
        calls_mod.scale(1)
    report = {}

    def candidate_cpu():
        try:
            with open(f"/proc/{server.pid}/stat") as fh:
                parts = fh.read().rsplit(")", 1)[1].split()
            return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return float("nan")

    for shape in ("scalar", "list_argument", "method"):
        cpu, their_cpu = time.process_time(), candidate_cpu()
        start = time.perf_counter()
        if shape == "scalar":
            for i in range(n):
                calls_mod.scale(i)
        elif shape == "list_argument":
            for i in range(n):
                values = [i, i + 1]
                calls_mod.append_one(values)
        else:
            for i in range(n):
                stack.push(i)
        report[shape + "_us"] = (time.perf_counter() - start) / n * 1e6
        # CPU of both processes per call: what the boundary's code costs, whatever the load.
        report[shape + "_cpu_us"] = ((time.process_time() - cpu) + (candidate_cpu() - their_cpu)) / n * 1e6
    print(json.dumps(report))
finally:
    server.kill()
"""


def bench_many_calls(harness: Path, n: int = 10_000) -> dict[str, Any] | None:
    """Microseconds per call of a test making ``n`` small calls of each shape through the
    harness in ``harness`` (no sandbox)."""
    out = subprocess.run([sys.executable, "-c", _MANY_CALLS, str(harness), str(n)],
                         capture_output=True, text=True, timeout=600, check=False)
    try:
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return None


def bench_many_calls_against(harnesses: dict[str, Path], n: int = 10_000,
                             rounds: int = 5) -> dict[str, dict[str, float] | None]:
    """``bench_many_calls`` for each harness, in ``rounds`` interleaved rounds of ``n // rounds``
    calls (so that a change in the machine's load falls on all of them alike); per shape, the
    median of the rounds."""
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in harnesses}
    for _ in range(rounds):
        for name, harness in harnesses.items():
            got = bench_many_calls(harness, max(n // rounds, 1))
            if got is not None:
                samples[name].append(got)
    out: dict[str, dict[str, float] | None] = {}
    for name, runs in samples.items():
        out[name] = ({k: round(statistics.median(r[k] for r in runs), 1) for k in runs[0]}
                     if runs else None)
    return out


class BaselineCheckout:
    """Commit ``ref`` of this repository in a temporary git worktree (removed on exit)."""

    def __init__(self, ref: str) -> None:
        self.ref = ref
        self.path = Path(tempfile.mkdtemp(prefix="verify-baseline-")) / "tree"
        self.error = ""

    def __enter__(self) -> BaselineCheckout:
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(self.path),
                        self.ref], check=True, capture_output=True, text=True, timeout=120)
        return self

    def __exit__(self, *exc: Any) -> None:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(self.path)],
                       capture_output=True, text=True, timeout=120, check=False)
        shutil.rmtree(self.path.parent, ignore_errors=True)

    def bench(self, args: list[str]) -> dict[str, Any] | None:
        """The baseline's own bench script, with ``args`` and ``--json``."""
        out = subprocess.run([sys.executable, str(self.path / "scripts" / "bench_grading.py"), *args, "--json"],
                             cwd=self.path, capture_output=True, text=True, timeout=3600, check=False)
        try:  # the first JSON object it printed (anything after it is not ours to parse)
            report, _ = json.JSONDecoder().raw_decode(out.stdout, out.stdout.index("{"))
            return dict(report)
        except ValueError:
            self.error = (out.stderr or out.stdout)[-500:]
            return None


def _flat_harness(source: Path) -> Path:
    """A checkout's harness folder as runs see it: flat. A checkout from before the harness was
    grouped by role is flat already; a later one is copied flat into a temporary folder (its role
    folders' files side by side, ``candidate/`` as its subfolder), as verify-cli does at run time."""
    roles = [d for d in ("plugins", "runners", "warm", "exec") if (source / d).is_dir()]
    if not roles:
        return source
    flat = Path(tempfile.mkdtemp(prefix="bench-baseline-harness-"))
    for role in roles:
        for f in (source / role).iterdir():
            if f.is_file() and f.name != "__init__.py":
                shutil.copyfile(f, flat / f.name)
    shutil.copytree(source / "candidate", flat / "candidate", ignore=shutil.ignore_patterns("__pycache__"))
    return flat


def boundary_cost(baseline: BaselineCheckout | None, calls: int) -> dict[str, Any]:
    """The 10,000-call case through this harness and the baseline's, and their ratios."""
    harnesses = {"here": HARNESS_DIR}
    if baseline is not None:
        harnesses["baseline"] = _flat_harness(baseline.path / "verify_cli" / "harness")
    report: dict[str, Any] = {"calls": calls, **bench_many_calls_against(harnesses, calls)}
    if baseline is not None:
        report["baseline_ref"] = baseline.ref
        here, base = report["here"], report["baseline"]
        if here and base:
            report["ratios"] = {k.removesuffix("_us"): round(here[k] / base[k], 2)
                                for k in here if k in base and base[k] > 0}
    return report


def _print_boundary(cost: dict[str, Any]) -> None:
    here = cost.get("here") or {}
    line = ", ".join(f"{k.removesuffix('_us').replace('_cpu', ' (CPU of both sides)')} {v:.0f} us"
                     for k, v in here.items())
    print(f"a test making {cost['calls']} small calls, per call: {line or 'failed'}")
    if "ratios" in cost:
        ratios = ", ".join(f"{k} {v}x" for k, v in cost["ratios"].items())
        print(f"  against {cost['baseline_ref']}'s harness (lists copied there, shared here): {ratios}")


def bench_round_trip(n: int = 2000) -> dict[str, Any] | None:
    """One stand-in call's round trip (a list of three values each way), no sandbox, beside a
    bare socket ping-pong between two processes and the same message through the codec alone
    (measured in the same run), and one node call's round trip (when node is here)."""
    out = subprocess.run([sys.executable, "-c", _ROUND_TRIP, str(HARNESS_DIR), str(n)],
                         capture_output=True, text=True, timeout=300, check=False)
    try:
        report = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return None
    if shutil.which("node"):
        sys.path.insert(0, str(REPO / "scripts"))
        from bench_node_two_process import node_round_trip

        try:
            node = node_round_trip(n)
            report["node_us"] = node["roundTrip"]
            report["node_callback_us"] = node["withCallback"]
        except (subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
            report["node_error"] = str(e)[:200]
    return report


def bench_backend(name: str, task: Task, runs: int, jobs: int,
                  bodies: list[float]) -> list[dict[str, Any]]:
    """Cold and warm rows for backend ``name``; appends each run's test-body time to ``bodies``."""
    rows: list[dict[str, Any]] = []
    two_process_task = task
    task = _in_process(task)
    # Pools as check-tasks keeps them (--pool-size 2): docker's warm runs need pooled containers,
    # which only single-use mode keeps (node mode runs pytest cold inside long-lived containers).
    options: dict[str, Any] = {"pool_size": POOL_SIZE, "mode": "single-use"} if name == "docker" else {}
    with create_sandbox(name, **options) as box:
        cold = Grader(box)
        list(cold.grade_many(_requests(task, jobs), jobs=jobs))  # untimed: image, caches
        seconds, results = _timed(cold, task, runs, jobs)
        bodies.extend(sum(t.duration for t in r.tests) for r in results)
        rows.append(_row(name, "cold", seconds, results))
        with Grader(box, warm=True) as warm:
            start = time.monotonic()
            list(warm.grade_many(_requests(task, jobs), jobs=jobs))  # starts the workers
            wait_until_warm = getattr(box, "wait_until_warm", None)
            if wait_until_warm is not None:  # docker: the first runs filled the warm pool
                wait_until_warm(120.0)
                list(warm.grade_many(_requests(task, jobs), jobs=jobs))
            startup = time.monotonic() - start
            stats = warm.warm_stats
            if stats is None or stats.warm_runs == 0:
                why = (stats.last_error if stats and stats.last_error
                       else f"no run went warm on {name}")
                rows.append({"backend": name, "mode": "warm", "unavailable": why})
                return rows
            before = stats.warm_runs
            seconds, results = _timed(warm, task, runs, jobs)
            bodies.extend(sum(t.duration for t in r.tests) for r in results)
            warm_runs = stats.warm_runs - before
            rows.append(_row(name, "warm", seconds, results, worker_start_seconds=round(startup, 3),
                             runs_warm=warm_runs, fallbacks=stats.fallbacks))
            if wait_until_warm is not None:
                # Sustained rates above are bound by how fast the daemon makes containers (each
                # serves one run); these rows show one grade's cost with a container ready.
                seconds, results = _timed_ready(cold, box, task, runs)
                rows.append(_row(name, "cold, container ready", seconds, results))
                before = stats.warm_runs
                seconds, results = _timed_ready(warm, box, task, runs)
                rows.append(_row(name, "warm, container ready", seconds, results,
                                 runs_warm=stats.warm_runs - before))
    rows.extend(bench_two_process(name, two_process_task, runs, jobs))
    return rows


# --- the floor: pytest in-process, forked from a warmed interpreter, no sandbox ---------------

_INPROCESS = r"""
import os, sys, time, shutil, runpy, gc, json
src, runs, args = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
import pytest
null = os.open(os.devnull, os.O_WRONLY)
saved = os.dup(1), os.dup(2)
os.dup2(null, 1); os.dup2(null, 2)
os.makedirs(src + "-warmup")
pytest.main(["-q", "-s", "-p", "no:cacheprovider", "--collect-only", src + "-warmup"])
os.dup2(saved[0], 1); os.dup2(saved[1], 2)
gc.collect(); gc.freeze()
walls = []
for i in range(runs):
    work = f"{src}-{i}"
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        shutil.copytree(src, work)
        os.chdir(work); sys.path[0] = work
        os.dup2(null, 1); os.dup2(null, 2)
        sys.argv = ["-m", *[a.replace("$RESULTS", work) for a in args]]
        try:
            runpy.run_module("pytest", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            os._exit(e.code if isinstance(e.code, int) else 1)
        os._exit(0)
    os.waitpid(pid, 0)
    walls.append(time.perf_counter() - t)
    shutil.rmtree(work, ignore_errors=True)
print(json.dumps(walls))
"""


def bench_inprocess_pytest(task: Task, runs: int) -> dict[str, Any] | None:
    env_run = run_environment(task, SEED)
    inv = parse_pytest_command(task.test.command, {"PATH": os.environ.get("PATH", ""),
                                                   "VERIFY_RESULTS_DIR": "$RESULTS"})
    if inv is None or inv.mode != "module":
        return None
    scratch = Path(tempfile.mkdtemp(prefix="verify-bench-"))
    try:
        lay_out(task, Phase.REFERENCE, scratch / "work")
        env = {**os.environ, **env_run, "PYTHONPATH": str(HARNESS_DIR),
               "PYTHONDONTWRITEBYTECODE": "1", "VERIFY_WORKDIR": str(scratch / "work"),
               "TMPDIR": str(scratch)}
        env.pop("VERIFY_SEAL_KEY", None)
        out = subprocess.run([inv.interpreter, "-c", _INPROCESS, str(scratch / "work"), str(runs),
                              json.dumps(list(inv.args))], env=env, capture_output=True, text=True,
                             timeout=600, check=False)
        walls = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else []
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not walls:
        return None
    total = sum(walls)
    return {"backend": "floor", "mode": "pytest in-process, forked, no sandbox", "runs": runs,
            "seconds": round(total, 3), "runs_per_second": round(runs / total, 2),
            "seconds_per_run": round(total / runs, 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", type=Path, default=REPO / "sample_tasks" / "coding-interval-merge")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--backends", default="bwrap,docker")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--round-trip-only", action="store_true",
                    help="only the call round trips (Python and node, beside a socket ping-pong)")
    ap.add_argument("--calls", type=int, default=2000, help="calls timed for the round trips")
    ap.add_argument("--baseline", default=None, metavar="REF",
                    help="also measure commit REF (a git ref): its harness on the 10,000-call case "
                         "and its whole checkout on the warm two-process rows")
    ap.add_argument("--many-calls-only", action="store_true",
                    help="only the 10,000-call case (with --baseline: against REF's harness)")
    opts = ap.parse_args(argv)
    if opts.many_calls_only:
        if opts.baseline:
            with BaselineCheckout(opts.baseline) as base:
                cost = boundary_cost(base, 10_000)
        else:
            cost = boundary_cost(None, 10_000)
        print(json.dumps(cost, indent=2)) if opts.json else _print_boundary(cost)
        return 0
    if opts.round_trip_only:
        rtt = bench_round_trip(opts.calls)
        if rtt is None:
            print("the round-trip benchmark failed", file=sys.stderr)
            return 1
        print(json.dumps(rtt, indent=2)) if opts.json else _print_round_trip(rtt)
        return 0
    task = load_task(opts.task)

    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    bodies: list[float] = []
    for name in [b.strip() for b in opts.backends.split(",") if b.strip()]:
        try:
            avail = sandbox_class(name).availability()
        except Exception as e:  # an unknown backend name
            avail = type("A", (), {"available": False, "reason": str(e)})()
        if not avail.available:
            skipped[name] = avail.reason
            continue
        rows.extend(bench_backend(name, task, opts.runs, opts.jobs, bodies))
    # The floor from the test bodies: the tests' own durations summed per run (JUnit XML gives
    # milliseconds, so the mean over every graded run above).
    body = statistics.fmean(bodies) if bodies else 0.0
    rows.append({"backend": "floor", "mode": "test bodies (sum of JUnit durations)",
                 "runs": len(bodies), "seconds_per_run": round(body, 5),
                 "runs_per_second": round(1 / body, 1) if body > 0 else None})
    inproc = bench_inprocess_pytest(task, opts.runs)
    if inproc:
        rows.append(inproc)

    ratios: dict[str, Any] = {}
    for name in {r["backend"] for r in rows if r["backend"] != "floor"}:
        by_mode = {r["mode"]: r for r in rows if r["backend"] == name}
        c, w = by_mode.get("cold"), by_mode.get("warm")
        if c and w and "seconds_per_run" in w:
            ratios[name] = {
                "warm_speedup_over_cold": round(c["seconds_per_run"] / w["seconds_per_run"], 1),
                "warm_time_over_test_bodies": (round(w["seconds_per_run"] / body, 1)
                                               if body > 0 else None),
                "warm_time_over_inprocess_pytest": (
                    round(w["seconds_per_run"] / inproc["seconds_per_run"], 2) if inproc else None),
            }
    for name in {r["backend"] for r in rows if r["backend"] != "floor"}:
        by_mode = {r["mode"]: r for r in rows if r["backend"] == name}
        for mode in ("cold", "warm"):
            one, two = by_mode.get(mode), by_mode.get(f"{mode} two-process")
            if one and two and "seconds_per_run" in one and "seconds_per_run" in two:
                ratios.setdefault(name, {})[f"two_process_over_in_process_{mode}"] = round(
                    two["seconds_per_run"] / one["seconds_per_run"], 2)
        w2, w2c = by_mode.get("warm two-process"), by_mode.get("warm two-process, cold candidate")
        if w2 and w2c and "seconds_per_run" in w2 and "seconds_per_run" in w2c:
            ratios.setdefault(name, {})["cold_candidate_over_warm_candidate"] = round(
                w2c["seconds_per_run"] / w2["seconds_per_run"], 2)
            if by_mode.get("warm") and "seconds_per_run" in by_mode["warm"]:
                ratios[name]["two_process_cold_candidate_over_in_process_warm"] = round(
                    w2c["seconds_per_run"] / by_mode["warm"]["seconds_per_run"], 2)
    rtt = bench_round_trip(opts.calls)
    baseline_rows: list[dict[str, Any]] = []
    baseline_error = ""
    if opts.baseline:
        with BaselineCheckout(opts.baseline) as base:
            cost = boundary_cost(base, 10_000)
            theirs = base.bench(["--task", str(opts.task.resolve()), "--runs", str(opts.runs),
                                 "--jobs", str(opts.jobs), "--backends", opts.backends])
            baseline_error = base.error if theirs is None else ""
        for row in (theirs or {}).get("rows", []):
            mine = next((r for r in rows if r["backend"] == row["backend"] and r["mode"] == row["mode"]), None)
            if row.get("mode") == "warm two-process" and mine and "seconds_per_run" in mine \
                    and "seconds_per_run" in row:
                baseline_rows.append({"backend": row["backend"], "baseline_seconds_per_run": row["seconds_per_run"],
                                      "seconds_per_run": mine["seconds_per_run"],
                                      "ratio": round(mine["seconds_per_run"] / row["seconds_per_run"], 2)})
    else:
        cost = boundary_cost(None, 10_000)
    report = {"task": task.id, "runs": opts.runs, "jobs": opts.jobs, "rows": rows, "ratios": ratios,
              "skipped_backends": skipped, "cpus": os.cpu_count(), "call_round_trip": rtt,
              "boundary": cost, "against_baseline": baseline_rows, "baseline_error": baseline_error}
    if opts.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"task {task.id}: {opts.runs} graded reference runs per row, jobs={opts.jobs}, "
          f"{os.cpu_count()} CPUs")
    print(f"{'backend':8} {'mode':40} {'runs':>5} {'runs/s':>8} {'ms/run':>8}  notes")
    for r in rows:
        if "unavailable" in r:
            print(f"{r['backend']:8} {r['mode']:40} {'-':>5} {'-':>8} {'-':>8}  {r['unavailable']}")
            continue
        notes = []
        if "passed" in r and r["passed"] != r["runs"]:
            notes.append(f"only {r['passed']} passed!")
        if "runs_warm" in r and "worker_start_seconds" not in r:
            notes.append(f"{r['runs_warm']} runs warm")
        if "warm_candidates" in r:
            notes.append(f"{r['warm_candidates']} candidates forked warm, {r['fallbacks']} fallbacks")
        if "worker_start_seconds" in r:
            notes.append(f"workers started in {r['worker_start_seconds']:.2f}s, "
                         f"{r['runs_warm']} runs warm, {r['fallbacks']} fallbacks")
        rps = r.get("runs_per_second")
        shown = rps if rps is not None else "-"
        print(f"{r['backend']:8} {r['mode']:40} {r['runs']:>5} {shown:>8} "
              f"{1000 * r['seconds_per_run']:>8.3f}  {'; '.join(notes)}")
    for name, why in skipped.items():
        print(f"{name:8} {'(skipped)':40} {'':>5} {'':>8} {'':>8}  {why}")
    for name, rt in sorted(ratios.items()):
        if "warm_speedup_over_cold" in rt:
            print(f"{name}: warm/cold speed-up {rt['warm_speedup_over_cold']}x (target >= 10x); "
                  f"warm time / test-body floor {rt['warm_time_over_test_bodies']}x (target <= 3x); "
                  f"warm time / in-process pytest {rt['warm_time_over_inprocess_pytest']}x")
        if "two_process_over_in_process_warm" in rt:
            print(f"{name}: two-process / in-process, warm {rt['two_process_over_in_process_warm']}x "
                  f"(target <= 1.5x), cold {rt.get('two_process_over_in_process_cold')}x")
        if "cold_candidate_over_warm_candidate" in rt:
            print(f"{name}: warm two-process, candidate started cold / forked warm "
                  f"{rt['cold_candidate_over_warm_candidate']}x; cold candidate / in-process warm "
                  f"{rt.get('two_process_cold_candidate_over_in_process_warm')}x")
    if rtt:
        _print_round_trip(rtt)
    _print_boundary(cost)
    if baseline_error:
        print(f"{opts.baseline}'s own bench failed: {baseline_error}")
    for row in baseline_rows:
        print(f"{row['backend']}: warm two-process {1000 * row['seconds_per_run']:.1f} ms/run, "
              f"{opts.baseline}'s {1000 * row['baseline_seconds_per_run']:.1f} ms/run: {row['ratio']}x "
              f"(target <= 1.2x)")
    return 0


def _print_round_trip(rtt: dict[str, Any]) -> None:
    floor = rtt["socket_ping_pong"]["median_us"]
    print(f"one stand-in call round trip (no sandbox, load {os.getloadavg()[0]:.1f}): median "
          f"{rtt['median_us']:.0f} us, p90 {rtt['p90_us']:.0f} us (target < 200 us), "
          f"{rtt['median_us'] / floor:.1f}x a bare socket ping-pong ({floor:.0f} us); "
          f"codec ping-pong {rtt['codec_ping_pong']['median_us']:.0f} us; "
          f"in-process call {rtt['in_process_us']:.2f} us")
    if "node_us" in rtt:
        print(f"one node call round trip: {rtt['node_us']:.0f} us ({rtt['node_us'] / floor:.1f}x the "
              f"ping-pong), with a callback crossing back {rtt['node_callback_us']:.0f} us")


if __name__ == "__main__":
    sys.exit(main())
