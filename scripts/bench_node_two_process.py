"""Node two-process grading: the cost of one call across the channel, and of a whole graded run.

Prints, measured in this run (ratios against a baseline from the same run, since absolute
figures on a shared machine mean little):

- the round trip of one call from a node test process to the node candidate server and back,
  beside a bare ping-pong of 20 bytes between two processes over a Unix socket pair (the floor
  any two-process design pays), and beside a call with a callback that crosses back;
- the wall time of grading the two JavaScript sample tasks' references two-process and
  in-process on one backend (median of --runs each, interleaved).

    python scripts/bench_node_two_process.py [--calls 3000] [--runs 5] [--sandbox bwrap]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verify_cli import (  # noqa: E402
    create_sandbox,
    load_task,
)
from verify_cli.grading import Grader, GradeRequest, Phase  # noqa: E402
from verify_cli.sandbox import HARNESS_DIR  # noqa: E402
from verify_cli.tasks import Isolation  # noqa: E402

CANDIDATE = "module.exports = { echo: (x) => x, callBack: (f) => f(1) };\n"
TRUSTED = """
const { echo, callBack } = require('./m.js');
const N = Number(process.env.CALLS);
for (let i = 0; i < 200; i++) echo(i);
let t = process.hrtime.bigint();
for (let i = 0; i < N; i++) echo(i);
const roundTrip = Number(process.hrtime.bigint() - t) / N / 1000;
t = process.hrtime.bigint();
for (let i = 0; i < N; i++) callBack((x) => x);
const withCallback = Number(process.hrtime.bigint() - t) / N / 1000;
t = process.hrtime.bigint();
const local = (x) => x;
let s = 0;
for (let i = 0; i < N; i++) s += local(i);
const inProcess = Number(process.hrtime.bigint() - t) / N / 1000;
console.log(JSON.stringify({ roundTrip, withCallback, inProcess }));
"""


def socket_ping_pong_us(calls: int) -> float:
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the echoing process
        a.close()
        while data := b.recv(64):
            b.sendall(data)
        os._exit(0)
    b.close()
    for _ in range(200):
        a.sendall(b"x" * 20)
        a.recv(64)
    t = time.perf_counter()
    for _ in range(calls):
        a.sendall(b"x" * 20)
        a.recv(64)
    us = (time.perf_counter() - t) / calls * 1e6
    a.close()
    os.waitpid(pid, 0)
    return us


def node_round_trip(calls: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cand, trusted, chan = Path(tmp, "cand"), Path(tmp, "trusted"), Path(tmp, "chan")
        for d in (cand, trusted, chan):
            d.mkdir()
        (cand / "m.js").write_text(CANDIDATE)
        (trusted / "bench.js").write_text(TRUSTED)
        sock = str(chan / "channel.sock")
        base = {"PATH": os.environ["PATH"]}
        server = subprocess.Popen(["node", str(HARNESS_DIR / "candidate" / "node" / "candidate_server.js")],
                                  cwd=cand, env={**base, "VERIFY_CHANNEL": sock})
        try:
            out = subprocess.run(["node", "bench.js"], cwd=trusted, capture_output=True, check=True, timeout=600,
                                 env={**base, "VERIFY_CHANNEL": sock, "VERIFY_CANDIDATE_FILES": '["m.js"]',
                                      "NODE_PATH": str(HARNESS_DIR), "CALLS": str(calls),
                                      "NODE_OPTIONS": "--require verify_node_standin"})
        finally:
            server.kill()
            server.wait()
        return {k: float(v) for k, v in json.loads(out.stdout).items()}


def grading_seconds(sandbox: str, runs: int) -> dict[str, float]:
    grader = Grader(create_sandbox(sandbox))
    times: dict[str, list[float]] = {"two-process": [], "in-process": []}
    for name in ("coding-word-wrap-js", "interface-spec-event-emitter-js"):
        task = load_task(ROOT / "sample_tasks" / name)
        modes = {"two-process": task, "in-process": replace(task, isolation=Isolation.IN_PROCESS)}
        for _ in range(runs):
            for mode, t in modes.items():
                started = time.perf_counter()
                result = grader.grade(GradeRequest(t, Phase.REFERENCE))
                assert result.passed and result.isolation == mode, result.problems
                times[mode].append(time.perf_counter() - started)
    return {mode: statistics.median(ts) for mode, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sandbox", default="bwrap")
    args = parser.parse_args()
    floor = socket_ping_pong_us(args.calls)
    node = node_round_trip(args.calls)
    print(f"socket ping-pong (floor)        {floor:9.1f} us")
    print(f"node call round trip            {node['roundTrip']:9.1f} us  ({node['roundTrip'] / floor:.1f}x floor)")
    back = node["withCallback"]
    print(f"node call + callback crossing   {back:9.1f} us  ({back / floor:.1f}x floor)")
    print(f"same call in-process            {node['inProcess']:9.3f} us")
    grading = grading_seconds(args.sandbox, args.runs)
    ratio = grading["two-process"] / grading["in-process"]
    print(f"grading a JS sample reference on {args.sandbox} (median of {2 * args.runs}): "
          f"two-process {grading['two-process']:.2f} s, in-process {grading['in-process']:.2f} s, "
          f"ratio {ratio:.2f}")


if __name__ == "__main__":
    main()
