#!/usr/bin/env python3
"""Docker sessions: the exec server on the host's interpreter carried in (the bundle) against the
image's own ``python`` (the baseline, measured in the same run on the same image).

Opens ``--sessions`` fresh sessions each way (no spare: each open creates and starts a
container), alternating the two in rounds, and prints per way the open latency (p50), the
round trip of ``exec cat`` (p50) and a snapshot (p50), and the bundle's ratios to the baseline;
then one session on ``verify-cli/node:20`` (no Python in the image), which only the bundle opens.

    python scripts/bench_exec_python.py [--sessions 12] [--image verify-cli/python:3.11]

Timings on a shared machine are noisy: compare the ratios of one run; the load is printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from verify_cli.sandbox.registry import create_sandbox
from verify_cli.sandbox.sessions import SessionLimits
from verify_cli.sandbox.sessions import docker as docker_sessions


def _image_python() -> tuple[list[str], dict[str, str], dict[str, dict[str, str]]]:
    return ["python", "-S", "-E"], {}, {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--image", default="verify-cli/python:3.11")
    args = parser.parse_args()
    ways = {"bundle": docker_sessions.server_python, "image python": _image_python}
    times: dict[str, dict[str, list[float]]] = {w: {"open": [], "exec": [], "snapshot": []} for w in ways}
    with create_sandbox("docker") as box:
        for i in range(args.sessions):
            for way, fn in ways.items():
                docker_sessions.server_python = fn  # type: ignore[assignment]
                t0 = time.monotonic()
                # A label: never a ready spare, each open starts its container.
                s = box.open_session({"a.txt": b"x" * 1000}, SessionLimits(), image=args.image,
                                     labels={"bench": f"{way}-{i}"})
                t1 = time.monotonic()
                s.exec("cat a.txt")
                t2 = time.monotonic()
                s.snapshot(["*"])
                t3 = time.monotonic()
                s.close()
                for key, value in (("open", t1 - t0), ("exec", t2 - t1), ("snapshot", t3 - t2)):
                    times[way][key].append(value)
        docker_sessions.server_python = ways["bundle"]  # type: ignore[assignment]
        with box.open_session(None, SessionLimits(), image="verify-cli/node:20", labels={"bench": "node"}) as s:
            node = s.exec("node -e 'console.log(6 * 7)'")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.sessions} sessions each way")
    p50 = {w: {k: statistics.median(v) for k, v in d.items()} for w, d in times.items()}
    for way, d in p50.items():
        print(f"{way:>13}: open {d['open'] * 1000:7.1f} ms, exec {d['exec'] * 1000:6.1f} ms, "
              f"snapshot {d['snapshot'] * 1000:6.1f} ms (p50)")
    base, new = p50["image python"], p50["bundle"]
    print("bundle / image python: " + ", ".join(f"{k} {new[k] / base[k]:.2f}x" for k in ("open", "exec", "snapshot")))
    print(f"verify-cli/node:20 (no Python): {node.verdict.value}, {node.stdout.text.strip()!r}")


if __name__ == "__main__":
    main()
