#!/usr/bin/env python3
"""Sessions (``Sandbox.open_session``): open/close latency, exec round trip, idle memory, capacity.

All from one run, on this machine, with the baseline measured in the same run: a cold sandboxed
run of ``true`` on the same backend (``Sandbox.run``), which is what an agent step costs without
sessions. Prints, per backend:

- open latency of a session (p50, p99): fresh (no ready spare) and handed out from the
  backend's spares (refilled between opens, as between episodes), close latency, and open as a
  ratio of a cold run;
- ``exec`` of ``true`` round trip (p50, p99), and as a ratio of a cold run;
- memory per idle session: PSS of its processes (``/proc/PID/smaps_rollup``; the session
  parent's share spread over the sessions) and the drop in ``MemAvailable`` per session (which
  also counts the kernel's namespaces, cgroups and tmpfs);
- how many idle sessions it held at once (up to ``--sessions``; stopped early when
  ``MemAvailable`` falls under ``--keep-free-mb`` or an open fails), exec ``true`` while they
  are all open, and the time to open and close them all;
- docker against bwrap: open and exec ratios.

    python scripts/bench_sessions.py [--backends bwrap,process,docker] [--sessions 500]

Targets on bwrap: open <= 20 ms p50, exec <= 5 ms p50, >= 500 idle sessions at <= 10 MB each.
Timings on a shared machine are noisy: compare the ratios of one run, and quote the raw figures
with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import VerifyError  # noqa: E402
from verify_cli.sandbox import (  # noqa: E402
    Limits,
    RunSpec,
    Sandbox,
    Session,
    SessionLimits,
    Verdict,
    create_sandbox,
)

IMAGE = "verify-cli/python:3.11"
IDLE = SessionLimits(memory_mb=256, processes=64, disk_bytes=64 << 20, idle_seconds=3600,
                     command_seconds=30)


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def ms(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": round(pct(xs, 0.5) * 1000, 2), "p99_ms": round(pct(xs, 0.99) * 1000, 2),
            "n": len(xs)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (host view)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cold_runs(box: Sandbox, n: int, image: str | None) -> list[float]:
    """The baseline: a fresh sandboxed run of ``true`` (what a step costs without sessions)."""
    times = []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(n):
            t, r = timed(lambda: box.run(RunSpec(["true"], Path(d), limits=Limits(wall_seconds=30),
                                                 image=image)))
            if r.verdict is Verdict.OK:
                times.append(t)
    return times


def spare_pool(box: Sandbox) -> Any:
    """The backend's pool of ready sessions, where it has one (after a first open)."""
    return getattr(box.__dict__.get("_sessions"), "spares", None)


def latency(box: Sandbox, opens: int, execs: int, image: str | None,
            gap: float = 0.0) -> dict[str, Any]:
    """Open (fresh: no spare ready; and handed out from the spares), close, exec ``true``."""
    first, s0 = timed(lambda: box.open_session(None, IDLE, image=image))  # starts any machinery
    s0.close()
    pool = spare_pool(box)
    if pool is not None:
        pool.set_spares(0)
    fresh_t, close_t, exec_t, spare_t = [], [], [], []
    for _ in range(opens):
        t, s = timed(lambda: box.open_session(None, IDLE, image=image))
        fresh_t.append(t)
        t, _ = timed(s.close)
        close_t.append(t)
    if pool is not None:
        pool.set_spares(2)
        box.open_session(None, IDLE, image=image).close()
        for _ in range(opens):
            time.sleep(gap)  # the spares are refilled between episodes, off their path
            t, s = timed(lambda: box.open_session(None, IDLE, image=image))
            spare_t.append(t)
            s.close()
    with box.open_session(None, IDLE, image=image) as s:
        for _ in range(3):
            s.exec(["true"])
        for _ in range(execs):
            t, r = timed(lambda: s.exec(["true"]))
            if r.ok:
                exec_t.append(t)
    out = {"first_open_ms": round(first * 1000, 1), "open": ms(fresh_t), "close": ms(close_t),
           "exec_true": ms(exec_t)}
    if spare_t:
        out["open_from_spare"] = ms(spare_t)
    return out


def capacity(box: Sandbox, limit: int, keep_free: int, image: str | None) -> dict[str, Any]:
    sessions: list[Session] = []
    before = mem_available()
    stopped = ""
    start = time.perf_counter()
    try:
        while len(sessions) < limit:
            if mem_available() < keep_free:
                stopped = f"MemAvailable under {keep_free >> 20} MiB"
                break
            try:
                sessions.append(box.open_session(None, IDLE, image=image))
            except VerifyError as e:  # a SessionError: the machine cannot hold more
                stopped = f"open failed: {e}"
                break
        opened_s = time.perf_counter() - start
        time.sleep(1.0)
        after = mem_available()
        pids = [getattr(s, "_server_pid", 0) for s in sessions]
        session_pss = sum(pss(p) for p in pids if p)
        parent_pss = 0
        hosts = box.__dict__.get("_sessions")
        for parent in getattr(hosts, "_parents", {}).values():
            if parent.proc is not None:
                parent_pss += sum(pss(p) for p in descendants(parent.proc.pid) if p not in pids)
        exec_t = []
        if sessions:
            probe = sessions[len(sessions) // 2]
            for _ in range(50):
                t, r = timed(lambda: probe.exec(["true"]))
                if r.ok:
                    exec_t.append(t)
        alive = sum(1 for s in sessions if s.alive)
        n = max(1, len(sessions))
        result = {
            "held": len(sessions), "alive": alive, "asked": limit, "stopped": stopped,
            "open_all_s": round(opened_s, 2),
            "pss_per_session_mb": round((session_pss + parent_pss) / n / 2**20, 2),
            "pss_server_only_mb": round(session_pss / n / 2**20, 2),
            "memavailable_drop_per_session_mb": round((before - after) / n / 2**20, 2),
            "exec_true_with_all_open": ms(exec_t),
        }
    finally:
        t, _ = timed(lambda: [s.close() for s in sessions])
    result["close_all_s"] = round(t, 2)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="bwrap,process,docker")
    parser.add_argument("--sessions", type=int, default=500, help="idle sessions to try to hold (bwrap)")
    parser.add_argument("--opens", type=int, default=50)
    parser.add_argument("--execs", type=int, default=200)
    parser.add_argument("--cold", type=int, default=20, help="cold runs of the baseline")
    parser.add_argument("--keep-free-mb", type=int, default=4096)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a descriptor or two per session

    report: dict[str, Any] = {"load_average": os.getloadavg(), "cpus": os.cpu_count()}
    for name in [b for b in args.backends.split(",") if b]:
        try:
            box = create_sandbox(name)
        except Exception as e:
            report[name] = {"unavailable": str(e)}
            continue
        image = IMAGE if name == "docker" else None
        small = name == "docker"
        try:
            cold = cold_runs(box, max(3, args.cold // (4 if small else 1)), image)
            lat = latency(box, args.opens // (5 if small else 1), args.execs // (4 if small else 1), image,
                          gap=1.5 if small else 0.3)
            held = min(args.sessions, 50 if small else args.sessions)
            pool = spare_pool(box)
            if pool is not None:
                pool.set_spares(0)  # capacity counts the sessions asked for, no more
            cap = capacity(box, held, args.keep_free_mb << 20, image)
        finally:
            box.close()
        cold_p50 = pct(cold, 0.5)
        lat["cold_run_true"] = ms(cold)
        lat["open_vs_cold_run"] = round(pct_ms(lat["open"]) / (cold_p50 * 1000), 3)
        lat["exec_vs_cold_run"] = round(pct_ms(lat["exec_true"]) / (cold_p50 * 1000), 3)
        report[name] = {**lat, "idle": cap}
        print(f"{name}: {json.dumps(report[name])}", flush=True)
    if "bwrap" in report and "docker" in report and "open" in report["docker"]:
        dk, bw = report["docker"], report["bwrap"]
        report["docker_vs_bwrap"] = {
            "open": round(pct_ms(dk["open"]) / pct_ms(bw["open"]), 2),
            "open_from_spare": round(pct_ms(dk["open_from_spare"]) / pct_ms(bw["open_from_spare"]), 2),
            "exec_true": round(pct_ms(report["docker"]["exec_true"]) / pct_ms(report["bwrap"]["exec_true"]), 2)}
    bw = report.get("bwrap", {})
    if "open" in bw:
        report["bwrap_targets"] = {
            "open_p50_le_20ms": pct_ms(bw["open"]) <= 20,
            "open_from_spare_p50_le_20ms": pct_ms(bw["open_from_spare"]) <= 20,
            "exec_p50_le_5ms": pct_ms(bw["exec_true"]) <= 5,
            "holds_500_idle": bw["idle"]["held"] >= 500 and bw["idle"]["alive"] == bw["idle"]["held"],
            "idle_le_10mb_each": bw["idle"]["pss_per_session_mb"] <= 10}
    print(json.dumps({k: v for k, v in report.items() if k in ("docker_vs_bwrap", "bwrap_targets",
                                                               "load_average", "cpus")}))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def pct_ms(figures: dict[str, float]) -> float:
    return figures["p50_ms"]


if __name__ == "__main__":
    sys.exit(main())
