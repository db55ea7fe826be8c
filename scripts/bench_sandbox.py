#!/usr/bin/env python3
"""Sandbox overhead over bare runs, measured side by side in one run over the sample tasks.

For each sample task, the reference test command runs bare (a plain subprocess, no limits, no
sandbox) and in each available backend, interleaved round by round so machine noise hits all
alike; the median wall time of each and its ratio to bare are printed. Then ``check-tasks -j 2``
over the whole set (no cache) is timed against (sum of bare reference runs x repeats / 2).

    python scripts/bench_sandbox.py [--rounds 5] [--backends process,bwrap,docker] [--json out.json]
                                    [--docker-runs 50] [--docker-only]

Targets (issue 2): bwrap at most 1.15x bare; check-tasks -j 2 at most 1.3x of the ideal.

The docker section (``--docker-runs N``, 0 to skip) times, N times each and interleaved, for both
``python -c pass`` and the full test command of a small task (the reference of
``coding-interval-merge``): the command bare (a host subprocess), a cold ``docker run --rm`` with the
CLI (same limits, same files: a fresh copy of the work folder mounted), the docker backend cold
(``pool_size=0``: create, start, harness, run, remove) and the backend from a full warm pool (the
pool is refilled between runs: this is start latency, not throughput; the previous run's
container is removed during the timed run, as in steady use). "own" is the backend's share:
elapsed minus the command's own time inside the container (``RunResult.wall_seconds``); the bare
column runs the host's interpreter, which may start slower or faster than the image's.
Targets: warm-pool overhead p50 at most 150 ms over bare; cold CLI at least 3x the warm pool.

The comparison section (``--compare``, on by default; ``--compare-only`` runs nothing else) runs
check-tasks over the task set (``--tasks``: the sample tasks, or e.g. the 164 imported HumanEval
problems) with -j equal to the cores, as the CLI does (warm grading on), on bwrap and on docker
(node mode: runs isolated inside long-lived containers; and single-use containers with a warm
pool of 2 for reference), interleaved over ``--compare-rounds`` rounds; then the sustained
throughput of each backend alone: ``--throughput-runs`` runs of one task's reference test command
with -j = cores, in runs per second, through the warm pytest path as check-tasks grades (and every
run cold, for reference). Targets (issue 12): docker check-tasks wall time at most
1.5x bwrap's, docker throughput at least 80% of bwrap's.
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

from verify_cli import (  # noqa: E402
    CheckOptions,
    Grader,
    Phase,
    RunSpec,
    Task,
    check_tasks,
    create_sandbox,
    load_task_set,
)
from verify_cli.grading import (  # noqa: E402
    lay_out,
    run_environment,
    task_limits,
)
from verify_cli.sandbox import (  # noqa: E402
    HARNESS_DIR,
    pinned_environment,
    runtime_path,
    sandbox_class,
)

DOCKER_TASK = "coding-interval-merge"


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


def _pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def _docker_cli_run(image: str, argv: list[str], work: Path, env: dict[str, str], limits: object) -> float:
    """``docker run --rm`` from nothing, as close to the backend's container as the CLI gets."""
    copy = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    try:
        shutil.copytree(work, copy / "w")
        for dirpath, dirnames, filenames in os.walk(copy):
            for name in [*dirnames, *filenames]:
                os.chmod(os.path.join(dirpath, name), 0o777)
        os.chmod(copy, 0o755)
        env_file = copy / "env"
        env_file.write_text("".join(f"{k}={v}\n" for k, v in env.items()))
        mem = f"{limits.memory_mb}m"  # type: ignore[attr-defined]
        cmd = ["docker", "run", "--rm", "--network", "none", "--user", "1000:1000", "--read-only",
               "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--memory", mem,
               "--memory-swap", mem, "--pids-limit", str(limits.processes + 1),  # type: ignore[attr-defined]
               "--cpus", "1", "--tmpfs", "/results:uid=1000,gid=1000,size=32m",
               "--tmpfs", "/tmp:mode=1777,size=64m", "-v", f"{copy / 'w'}:/workspace",
               "-v", f"{HARNESS_DIR}:/opt/verify-harness:ro", "-w", "/workspace",
               "--env-file", str(env_file), image, *argv]
        t = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        elapsed = time.perf_counter() - t
        if proc.returncode != 0:
            print(f"warning: docker run exited {proc.returncode}: {proc.stderr.decode()[-300:]}", file=sys.stderr)
        return elapsed
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def docker_section(tasks: list[Task], runs: int) -> dict[str, object] | None:
    """Cold and warm-pool start of the docker backend against bare and a cold ``docker run``."""
    if runs <= 0:
        return None
    avail = sandbox_class("docker").availability()
    if not avail.available:
        print(f"skipping the docker section: {avail.reason}", file=sys.stderr)
        return None
    task = next((t for t in tasks if t.root.name == DOCKER_TASK), None) if tasks else None
    if task is None or not task.environment.image:
        print(f"skipping the docker section: no task {DOCKER_TASK} with an image", file=sys.stderr)
        return None
    image = task.environment.image
    limits = task_limits(task)
    extra = run_environment(task, 1)
    commands = {"python -c pass": ["python", "-c", "pass"],
                "task test command": ["/bin/sh", "-c", task.test.command]}
    modes = ["bare", "docker_run_cli_cold", "backend_cold", "backend_warm"]
    cold = create_sandbox("docker", pool_size=0, mode="single-use")
    warm = create_sandbox("docker", pool_size=2, mode="single-use")
    cold.start()
    warm.start([image], limits)  # type: ignore[call-arg]
    work = Path(tempfile.mkdtemp(prefix="bench-docker-"))
    times: dict[str, dict[str, list[float]]] = {c: {m: [] for m in modes} for c in commands}
    # the backend's own share: elapsed minus the command's time inside (RunResult.wall_seconds)
    own: dict[str, dict[str, list[float]]] = {c: {m: [] for m in modes[2:]} for c in commands}
    try:
        lay_out(task, Phase.REFERENCE, work)
        cli_env = pinned_environment(workdir="/workspace", results_dir="/results",
                                     harness_dir="/opt/verify-harness", tmp_dir="/tmp", extra=extra)
        cases = [(c, m) for c in commands for m in modes]
        for c in commands:  # one untimed round of each, to warm caches
            _bare_argv(commands[c], work, extra)
            warm.run(_spec(commands[c], work, limits, extra, image))
        for r in range(runs):
            shift = r % len(cases)
            for c, mode in cases[shift:] + cases[:shift]:
                argv = commands[c]
                if mode == "bare":
                    times[c][mode].append(_bare_argv(argv, work, extra))
                    continue
                if mode == "docker_run_cli_cold":
                    times[c][mode].append(_docker_cli_run(image, argv, work, cli_env, limits))
                    continue
                box = cold if mode == "backend_cold" else warm
                if box is warm:
                    warm.wait_until_warm(120)  # type: ignore[attr-defined]
                t = time.perf_counter()
                res = box.run(_spec(argv, work, limits, extra, image))
                times[c][mode].append(time.perf_counter() - t)
                own[c][mode].append(times[c][mode][-1] - res.wall_seconds)
                if res.verdict.value != "ok":
                    print(f"warning: {c} on {mode}: {res.verdict.value} {res.message} {res.stderr.text[-300:]}",
                          file=sys.stderr)
    finally:
        cold.close()
        warm.close()
        shutil.rmtree(work, ignore_errors=True)

    out: dict[str, object] = {"runs": runs, "task": task.id, "image": image}
    print(f"\ndocker: {runs} runs each, interleaved; task {task.id} ({image}); milliseconds")
    print(f"{'command':<19} {'mode':<22} {'p50':>8} {'p95':>8}  {'own p50':>8} {'own p95':>8}")
    for c in commands:
        stats: dict[str, dict[str, float]] = {
            m: {"p50_ms": round(statistics.median(v) * 1000, 1), "p95_ms": round(_pct(v, 95) * 1000, 1)}
            for m, v in times[c].items()}
        for m, v in own[c].items():
            stats[m]["own_p50_ms"] = round(statistics.median(v) * 1000, 1)
            stats[m]["own_p95_ms"] = round(_pct(v, 95) * 1000, 1)
        for m in modes:
            extra_cols = (f"  {stats[m]['own_p50_ms']:>8.1f} {stats[m]['own_p95_ms']:>8.1f}"
                          if "own_p50_ms" in stats[m] else "")
            print(f"{c:<19} {m:<22} {stats[m]['p50_ms']:>8.1f} {stats[m]['p95_ms']:>8.1f}{extra_cols}")
        w50, b50 = stats["backend_warm"]["p50_ms"], stats["bare"]["p50_ms"]
        ratios = {
            "warm_overhead_over_bare_p50_ms": round(w50 - b50, 1),
            "warm_overhead_over_bare_p95_ms": round(stats["backend_warm"]["p95_ms"] - stats["bare"]["p95_ms"], 1),
            "cli_cold_over_warm_p50": round(stats["docker_run_cli_cold"]["p50_ms"] / w50, 2),
            "backend_cold_over_warm_p50": round(stats["backend_cold"]["p50_ms"] / w50, 2),
        }
        print(f"{c:<19} warm overhead over bare: p50 {ratios['warm_overhead_over_bare_p50_ms']:.1f} ms "
              f"(target <= 150), p95 {ratios['warm_overhead_over_bare_p95_ms']:.1f} ms; cold CLI / warm "
              f"{ratios['cli_cold_over_warm_p50']:.2f}x (target >= 3); backend cold / warm "
              f"{ratios['backend_cold_over_warm_p50']:.2f}x")
        out[c] = {**stats, **ratios}
    return out


def _spec(argv: list[str], work: Path, limits: object, extra: dict[str, str], image: str) -> RunSpec:
    return RunSpec(command=argv, workdir=work, limits=limits, env=extra, image=image)  # type: ignore[arg-type]


def _bare_argv(argv: list[str], workdir: Path, extra: dict[str, str]) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results"
        results.mkdir()
        env = pinned_environment(workdir=str(workdir), results_dir=str(results), harness_dir=str(HARNESS_DIR),
                                 tmp_dir=scratch, path=runtime_path(), extra=extra)
        t = time.perf_counter()
        subprocess.run(argv, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return time.perf_counter() - t


def _timed_check_tasks(box: object, tasks: list[Task], repeats: int, jobs: int,
                       warm: bool = True) -> tuple[float, int]:
    with Grader(box, warm=warm) as grader:  # type: ignore[arg-type]
        t = time.perf_counter()
        reports = check_tasks(tasks, grader, CheckOptions(repeats=repeats, jobs=jobs))
        elapsed = time.perf_counter() - t
    return elapsed, sum(r.verdict.value == "sound" for r in reports)


def _throughput(box: object, task: Task, runs: int, jobs: int, warm: bool = False) -> tuple[float, int]:
    """Runs per second of ``task``'s reference test command, ``jobs`` at a time; and failures.
    ``warm``: through the warm pytest path, as check-tasks grades (else every run cold)."""
    from concurrent.futures import ThreadPoolExecutor

    from verify_cli.grading import WarmRunner

    works = [Path(tempfile.mkdtemp(prefix="bench-tp-")) for _ in range(jobs)]
    runner = WarmRunner(box, workers_per_key=jobs) if warm else None  # type: ignore[arg-type]
    try:
        specs = []
        for work in works:  # one work folder per concurrent run (a warm bwrap run moves it)
            lay_out(task, Phase.REFERENCE, work)
            specs.append(RunSpec(command=["/bin/sh", "-c", task.test.command], workdir=work,
                                 limits=task_limits(task), env=run_environment(task, 1),
                                 image=task.environment.image, runtime=task.environment.runtime))
        free = list(specs)
        import threading

        lock = threading.Lock()

        def one(_i: int) -> object:
            with lock:
                spec = free.pop()
            try:
                if runner is not None:
                    return runner.run(task, Phase.REFERENCE, spec)
                return box.run(spec)  # type: ignore[attr-defined]
            finally:
                with lock:
                    free.append(spec)

        with ThreadPoolExecutor(jobs) as pool:  # untimed: pools and caches warm, one per job
            list(pool.map(one, range(jobs)))
        with ThreadPoolExecutor(jobs) as pool:
            t = time.perf_counter()
            results = list(pool.map(one, range(runs)))
            elapsed = time.perf_counter() - t
        return runs / elapsed, sum(r.verdict.value != "ok" for r in results)  # type: ignore[attr-defined]
    finally:
        if runner is not None:
            runner.close()
        for work in works:
            shutil.rmtree(work, ignore_errors=True)


def compare_section(tasks: list[Task], *, repeats: int, rounds: int, throughput_runs: int) -> dict[str, object] | None:
    """check-tasks and sustained throughput on bwrap against docker (node and single-use)."""
    for name in ("bwrap", "docker"):
        avail = sandbox_class(name).availability()
        if not avail.available:
            print(f"skipping the bwrap/docker comparison: {name}: {avail.reason}", file=sys.stderr)
            return None
    jobs = os.cpu_count() or 1
    configs = {"bwrap": ("bwrap", {}), "docker_node": ("docker", {"mode": "node"}),
               "docker_single_use": ("docker", {"mode": "single-use", "pool_size": 2})}
    boxes = {k: create_sandbox(name, **opts) for k, (name, opts) in configs.items()}
    for box in boxes.values():
        box.start()
    # As the CLI runs it (warm grading on: bwrap forks pytest from warm workers, docker's node
    # mode from warm parents inside its containers), and bwrap with --cold for reference.
    runs_of = {"bwrap": ("bwrap", True), "bwrap_cold": ("bwrap", False),
               "docker_node": ("docker_node", True), "docker_single_use": ("docker_single_use", True)}
    wall: dict[str, list[float]] = {k: [] for k in runs_of}
    sound: dict[str, int] = {}
    try:
        for r in range(rounds):
            order = list(runs_of)
            order = order[r % len(order):] + order[: r % len(order)]
            for k in order:
                box_key, warm = runs_of[k]
                elapsed, sound[k] = _timed_check_tasks(boxes[box_key], tasks, repeats, jobs, warm)
                wall[k].append(elapsed)
        task = next((t for t in tasks if t.root.name == DOCKER_TASK), tasks[0])
        rate: dict[str, float] = {}
        for k, (box_key, warm) in {"bwrap": ("bwrap", True), "docker_node": ("docker_node", True),
                                   "bwrap_cold": ("bwrap", False),
                                   "docker_node_cold": ("docker_node", False)}.items():
            rate[k], failed = _throughput(boxes[box_key], task, throughput_runs, jobs, warm)
            if failed:
                print(f"warning: {failed} throughput runs on {k} did not end ok", file=sys.stderr)
        containers = boxes["docker_node"].facts().get("containers")
    finally:
        for box in boxes.values():
            box.close()
    med = {k: statistics.median(v) for k, v in wall.items()}
    runs = len(tasks) * (repeats + 1)
    out: dict[str, object] = {
        "jobs": jobs, "tasks": len(tasks), "repeats": repeats, "rounds": rounds,
        "check_tasks_seconds": {k: round(v, 3) for k, v in med.items()},
        "check_tasks_runs_per_second": {k: round(runs / v, 2) for k, v in med.items()},
        "sound": sound,
        "docker_node_over_bwrap_wall": round(med["docker_node"] / med["bwrap"], 3),
        "docker_single_use_over_bwrap_wall": round(med["docker_single_use"] / med["bwrap"], 3),
        "docker_node_over_bwrap_cold_wall": round(med["docker_node"] / med["bwrap_cold"], 3),
        "throughput_runs": throughput_runs,
        "throughput_runs_per_second": {k: round(v, 2) for k, v in rate.items()},
        "docker_node_throughput_share_of_bwrap": round(rate["docker_node"] / rate["bwrap"], 3),
        "docker_node_cold_throughput_share_of_bwrap_cold": round(
            rate["docker_node_cold"] / rate["bwrap_cold"], 3),
        "docker_node_containers": containers,
    }
    print(f"\ncheck-tasks over {len(tasks)} tasks, --repeats {repeats}, -j {jobs}, median of {rounds} "
          f"interleaved round(s):")
    for k, v in med.items():
        print(f"  {k:<18} {v:8.2f} s  ({runs / v:.2f} runs/s, {sound[k]} sound)")
    print(f"  docker (node) / bwrap wall: {out['docker_node_over_bwrap_wall']:.3f}x (target <= 1.5); "
          f"docker (single-use) / bwrap: {out['docker_single_use_over_bwrap_wall']:.3f}x; "
          f"docker (node) / bwrap --cold: {out['docker_node_over_bwrap_cold_wall']:.3f}x")
    print(f"sustained throughput, {throughput_runs} runs of {task.id}, -j {jobs}: bwrap "
          f"{rate['bwrap']:.2f} runs/s, docker (node) {rate['docker_node']:.2f} runs/s -> "
          f"{out['docker_node_throughput_share_of_bwrap']:.0%} of bwrap (target >= 80%); "
          f"every run cold: bwrap {rate['bwrap_cold']:.2f}, docker (node) "
          f"{rate['docker_node_cold']:.2f} runs/s -> "
          f"{out['docker_node_cold_throughput_share_of_bwrap_cold']:.0%}")
    print(f"docker (node) containers: {containers}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default=str(ROOT / "sample_tasks"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--backends", default="process,bwrap,docker")
    ap.add_argument("--repeats", type=int, default=3, help="check-tasks repeats")
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--docker-runs", type=int, default=50,
                    help="runs per mode in the docker start-latency section (0: skip it)")
    ap.add_argument("--docker-only", action="store_true", help="run only the docker section")
    ap.add_argument("--compare-only", action="store_true",
                    help="run only the bwrap/docker check-tasks and throughput comparison")
    ap.add_argument("--compare-rounds", type=int, default=1)
    ap.add_argument("--throughput-runs", type=int, default=40)
    args = ap.parse_args()

    tasks = [t for t in load_task_set(Path(args.tasks)) if isinstance(t, Task)]
    if args.compare_only:
        compare = compare_section(tasks, repeats=args.repeats, rounds=args.compare_rounds,
                                  throughput_runs=args.throughput_runs)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({"compare": compare}, indent=2))
        return 0 if compare is not None else 1
    if args.docker_only:
        docker = docker_section(tasks, args.docker_runs)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({"docker": docker}, indent=2))
        return 0 if docker is not None else 1
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
    ideal = bare_total * (args.repeats + 1) / jobs
    ideal_ref_only = bare_total * args.repeats / jobs
    # As the CLI runs it (warm workers for pytest tasks), then with --cold.
    for mode, warm in (("warm", True), ("cold", False)):
        with Grader(boxes[default], warm=warm) as grader:
            t = time.perf_counter()
            reports = check_tasks(tasks, grader, CheckOptions(repeats=args.repeats, jobs=jobs))
            elapsed = time.perf_counter() - t
        sound = sum(r.verdict.value == "sound" for r in reports)
        print(f"check-tasks -j {jobs} --repeats {args.repeats} on {default} ({mode}): {elapsed:.2f}s for "
              f"{len(tasks)} tasks ({sound} sound); bare reference runs x repeats / {jobs} = {ideal_ref_only:.2f}s "
              f"-> {elapsed / ideal_ref_only:.3f}x; counting the starter run too: {ideal:.2f}s -> "
              f"{elapsed / ideal:.3f}x")
        summary.update({f"check_tasks_{mode}_seconds": round(elapsed, 3),
                        f"check_tasks_{mode}_over_ideal": round(elapsed / ideal_ref_only, 3),
                        f"check_tasks_{mode}_over_ideal_with_starter": round(elapsed / ideal, 3)})
    summary.update({"ideal_reference_seconds": round(ideal_ref_only, 3), "cpu_count": os.cpu_count()})
    for box in boxes.values():
        box.close()
    docker = docker_section(tasks, args.docker_runs)
    compare = compare_section(tasks, repeats=args.repeats, rounds=args.compare_rounds,
                              throughput_runs=args.throughput_runs)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"rows": rows, "summary": summary, "docker": docker,
                                                   "compare": compare}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
