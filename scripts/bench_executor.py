#!/usr/bin/env python3
"""check-tasks on the local executor and on the ray executor, on this machine, side by side.

    python scripts/bench_executor.py [--tasks 200] [--repeats 1] [--jobs 2] [--rounds 2]
                                     [--sandbox auto] [--ray-address HOST:PORT] [--json]

The sample tasks are replicated (with fresh ids) to ``--tasks`` tasks; check-tasks runs over them
through :func:`verify_cli.checks.solvability.check_tasks` with ``--jobs`` threads locally, then
through a Ray cluster of this one machine offering ``--jobs`` sandbox slots (started here and
stopped afterwards unless ``--ray-address`` names one), both warm, no cache. The verdicts must be
the same. Ray's overhead per sandboxed run is (ray wall - local wall) / runs, and the ratio of
the walls is the figure to hold to <= 1.10. The executors' start-up (Ray actors, warm workers) is
timed apart from the grading. ``--rounds`` alternates the order (local first, then ray first, ...)
and the figures are medians over rounds: a shared machine's load drifts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import CheckOptions, check_tasks  # noqa: E402
from verify_cli.executors import Executor, LocalExecutor  # noqa: E402
from verify_cli.sandbox import resolve_backend_name  # noqa: E402
from verify_cli.tasks import load_task_set  # noqa: E402


def replicate(dest: Path, n: int) -> Path:
    """``n`` task folders copied round-robin from sample_tasks/, each with an id of its own."""
    samples = sorted(p for p in (REPO / "sample_tasks").iterdir() if (p / "task.toml").is_file())
    for i in range(n):
        src = samples[i % len(samples)]
        folder = dest / f"{src.name}-{i:03d}"
        shutil.copytree(src, folder, ignore=shutil.ignore_patterns("__pycache__"))
        toml = folder / "task.toml"
        text = re.sub(r'(?m)^id = "([^"]+)"', rf'id = "\g<1>-{i:03d}"', toml.read_text(), count=1)
        toml.write_text(text)
    return dest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def one_node_cluster(slots: int, tmp: Path) -> Any:
    """A Ray head on this machine with ``slots`` sandbox slots; ended (its process tree, by id)."""
    port = _free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_raylet_start_wait_time_s": "120",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    ray_bin = str(Path(sys.executable).with_name("ray"))
    with open(tmp / "head.log", "wb") as log:
        proc = subprocess.Popen(
            [ray_bin if Path(ray_bin).exists() else "ray", "start", "--head", "--block", f"--port={port}",
             f"--temp-dir={tmp / 'ray'}", f"--num-cpus={slots}", "--include-dashboard=false",
             "--object-store-memory=100000000", "--disable-usage-stats",
             "--resources", json.dumps({"sandbox_slots": slots})],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("ray start failed:\n" + (tmp / "head.log").read_text()[-2000:])
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        tree = _descendants(proc.pid) | {proc.pid}
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def measure(name: str, make: Any, tasks_dir: Path, options: CheckOptions) -> dict[str, Any]:
    items = list(load_task_set(tasks_dir))
    t0 = time.monotonic()
    executor: Executor = make()
    started = time.monotonic() - t0
    with executor:
        t1 = time.monotonic()
        reports = check_tasks(items, executor, options)
        graded = time.monotonic() - t1
        per_node = dict(getattr(getattr(executor, "stats", None), "per_node", {}) or {})
    runs = sum(len(r.runs) for r in reports)
    verdicts = {r.task_id: r.verdict.value for r in reports}
    return {"executor": name, "start_s": round(started, 2), "grade_s": round(graded, 2), "runs": runs,
            "runs_per_s": round(runs / graded, 2), "verdicts": verdicts, "summary": dict(Counter(verdicts.values())),
            "per_node": per_node}


def _median_round(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The round with the median grading time (the lower middle one for an even count)."""
    ordered = sorted(results, key=lambda r: r["grade_s"])
    return ordered[(len(ordered) - 1) // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="local threads, and the Ray node's sandbox slots")
    ap.add_argument("--rounds", type=int, default=2, help="measurements of each, in alternating order")
    ap.add_argument("--sandbox", default="auto")
    ap.add_argument("--ray-address", default=None, help="use this cluster instead of starting one here")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()

    backend, warning = resolve_backend_name(args.sandbox)
    if warning:
        print(warning, file=sys.stderr)
    options = CheckOptions(repeats=args.repeats, jobs=args.jobs)
    rounds: dict[str, list[dict[str, Any]]] = {"local": [], "ray": []}
    with tempfile.TemporaryDirectory(prefix="bench-executor-") as tmp_s:
        tmp = Path(tmp_s)
        tasks_dir = replicate(tmp / "tasks", args.tasks)

        from verify_cli.executors import RayExecutor

        with (contextlib.nullcontext(args.ray_address) if args.ray_address
              else one_node_cluster(args.jobs, tmp)) as address:
            makers = {"local": lambda: LocalExecutor(backend), "ray": lambda: RayExecutor(address, sandbox=backend)}
            for k in range(max(1, args.rounds)):
                for name in (("local", "ray") if k % 2 == 0 else ("ray", "local")):
                    rounds[name].append(measure(name, makers[name], tasks_dir, options))
                    print(f"round {k + 1}: {name} graded in {rounds[name][-1]['grade_s']:.2f}s", file=sys.stderr)
    local, on_ray = (_median_round(rounds["local"]), _median_round(rounds["ray"]))
    same = all(r["verdicts"] == rounds["local"][0]["verdicts"] for rs in rounds.values() for r in rs)
    overhead_ms = (on_ray["grade_s"] - local["grade_s"]) / max(1, local["runs"]) * 1000
    ratio = on_ray["grade_s"] / local["grade_s"]
    figures = {"tasks": args.tasks, "repeats": args.repeats, "jobs": args.jobs, "backend": backend,
               "rounds": {name: [r["grade_s"] for r in rs] for name, rs in rounds.items()},
               "local": {k: v for k, v in local.items() if k != "verdicts"},
               "ray": {k: v for k, v in on_ray.items() if k != "verdicts"},
               "same_verdicts": same, "ray_over_local": round(ratio, 3),
               "ray_overhead_ms_per_run": round(overhead_ms, 1)}
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"check-tasks, {args.tasks} tasks x {args.repeats + 1} runs, {backend}, {args.jobs} at once, warm")
        print(f"{'executor':<8} {'start':>8} {'grading':>9} {'runs':>6} {'runs/s':>8}  verdicts  (medians of "
              f"{len(rounds['local'])} round(s): local {rounds['local'] and [r['grade_s'] for r in rounds['local']]}, "
              f"ray {[r['grade_s'] for r in rounds['ray']]})")
        for r in (local, on_ray):
            print(f"{r['executor']:<8} {r['start_s']:>7.2f}s {r['grade_s']:>8.2f}s {r['runs']:>6} "
                  f"{r['runs_per_s']:>8.2f}  {r['summary']}")
        print(f"ray / local (grading): {ratio:.3f}  (target <= 1.10); Ray overhead per sandboxed run: "
              f"{overhead_ms:+.1f} ms; same verdicts: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
