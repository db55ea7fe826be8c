#!/usr/bin/env python3
"""Agent episodes in flight: how well tool execution hides behind other episodes' generation.

    python scripts/bench_agents.py [--task sample_tasks/coding-interval-merge] [--episodes 16]
                                   [--in-flight 8] [--model-slots 4] [--model-ms 500] [--json]

A loopback OpenAI-compatible server plays a model that takes ``--model-ms`` per reply and serves
``--model-slots`` replies at once (a batch server at capacity); each episode looks around, reads
a file, writes the reference, runs the visible tests and submits (5 turns), in a real bwrap
session graded by the trusted grader. In the same run:

- **generation alone**: the same number of replies, the same server, no tools (the floor);
- **episodes**: ``--episodes`` episodes, ``--in-flight`` at once (``run_episodes``);
- **graded in its slot**: the same episodes, each graded in the thread that played it
  (``run_episode`` on ``--in-flight`` threads), for comparison.

The ratio episodes / generation alone is the target (<= 1.2x): near 1.0 means tool execution and
grading overlapped with generation almost entirely. An episode's session is closed before its
grade, and the grade runs while the next episode plays (``run_episodes``), so a grade holds no
``-j`` slot; the last episode's grade comes after the last reply and is never hidden. The load
average is printed: the tools and the grade are CPU work, and on a saturated machine they set
the ratio whatever overlaps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli.agents import EpisodeJob, EpisodeLimits, agent_model, run_episode, run_episodes  # noqa: E402
from verify_cli.grading import Grader  # noqa: E402
from verify_cli.models import create_model_backend  # noqa: E402
from verify_cli.sandbox import create_sandbox  # noqa: E402
from verify_cli.tasks import Task, load_task  # noqa: E402


def _plan(task: Task) -> list[list[dict[str, Any]]]:
    files = task.solution_files()
    first = sorted(task.starter_files()) or sorted(files)
    return [[{"name": "bash", "arguments": {"command": "ls -R"}}],
            [{"name": "read_file", "arguments": {"path": first[0]}}],
            [{"name": "write_file", "arguments": {"path": rel, "content": p.read_text()}}
             for rel, p in sorted(files.items())],
            [{"name": "run_tests", "arguments": {}}], [{"name": "submit", "arguments": {}}]]


class SlowModel:
    """A loopback chat server: each reply takes ``seconds``, at most ``slots`` at once."""

    def __init__(self, plan: list[list[dict[str, Any]]], seconds: float, slots: int) -> None:
        gate = threading.Semaphore(slots)
        self.replies = 0
        lock = threading.Lock()
        bench = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                turn = sum(1 for m in body.get("messages", []) if m["role"] == "assistant")
                calls = plan[min(turn, len(plan) - 1)]
                with gate:
                    time.sleep(seconds)
                with lock:
                    bench.replies += 1
                message = {"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"c{turn}_{i}", "type": "function",
                     "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                    for i, c in enumerate(calls)]}
                data = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", type=Path, default=REPO / "sample_tasks" / "coding-interval-merge")
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--in-flight", type=int, default=8)
    ap.add_argument("--model-slots", type=int, default=4)
    ap.add_argument("--model-ms", type=float, default=500.0)
    ap.add_argument("--sandbox", default="bwrap")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    task = load_task(args.task)
    plan = _plan(task)
    load_before = os.getloadavg()[0]
    server = SlowModel(plan, args.model_ms / 1000, args.model_slots)
    backend = create_model_backend("openai", model="bench", base_url=server.url, concurrency=args.in_flight * 2)
    model = agent_model(backend)
    replies = args.episodes * len(plan)
    try:
        with create_sandbox(args.sandbox) as sandbox, Grader(sandbox, warm=True) as grader:
            grader.reserve(2)
            # warm-up: one episode (warm workers, the sessions' parent)
            list(run_episodes([EpisodeJob(task, -1)], lambda j: model, sandbox, grader, concurrency=1))

            started = time.monotonic()
            with ThreadPoolExecutor(max_workers=args.in_flight) as pool:
                messages = [{"role": "user", "content": "hi"}]
                list(pool.map(lambda _: backend.post_chat({"model": "bench", "messages": messages}),
                              range(replies)))
            generation_alone = time.monotonic() - started

            started = time.monotonic()
            episodes = list(run_episodes([EpisodeJob(task, i) for i in range(args.episodes)], lambda j: model,
                                         sandbox, grader, concurrency=args.in_flight,
                                         limits=EpisodeLimits(max_turns=len(plan) + 1)))
            batch = time.monotonic() - started

            # The same episodes, each graded in its own -j slot (run_episode on -j threads: the
            # session held while it is graded, as run_episodes did before grades got their pool).
            started = time.monotonic()
            with ThreadPoolExecutor(max_workers=args.in_flight) as pool:
                list(pool.map(lambda i: run_episode(task, model, sandbox, grader, sample_index=i,
                                                    limits=EpisodeLimits(max_turns=len(plan) + 1)),
                              range(args.episodes)))
            graded_in_slot = time.monotonic() - started
    finally:
        backend.close()
        server.close()
    load_after = os.getloadavg()[0]
    passed = sum(e.status == "passed" for e in episodes)
    tool_seconds = sum(e.execution_seconds for e in episodes)
    # What an episode spent neither in the model nor in a tool: opening its session and its grade.
    grades = [e.seconds - e.generation_seconds - e.execution_seconds for e in episodes]
    result = {
        "episodes": len(episodes), "passed": passed, "replies": replies, "in_flight": args.in_flight,
        "model_slots": args.model_slots, "model_ms": args.model_ms,
        "generation_alone_s": round(generation_alone, 3), "episodes_s": round(batch, 3),
        "ratio": round(batch / generation_alone, 3),
        "graded_in_slot_s": round(graded_in_slot, 3),
        "graded_in_slot_ratio": round(graded_in_slot / generation_alone, 3),
        "tool_seconds_total": round(tool_seconds, 3),
        "tool_share_hidden": round(1 - max(0.0, batch - generation_alone) / tool_seconds, 3) if tool_seconds else 1.0,
        "grade_seconds_p50": round(statistics.median(grades), 3) if grades else 0.0,
        "load_before": round(load_before, 2), "load_after": round(load_after, 2), "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{len(episodes)} episodes ({passed} passed), {replies} model replies, {args.in_flight} in flight, "
              f"a {args.model_ms:.0f} ms model serving {args.model_slots} at once")
        print(f"generation alone: {generation_alone:.2f} s")
        print(f"episodes:         {batch:.2f} s  ->  {result['ratio']:.2f}x generation alone (target <= 1.2x)")
        print(f"graded in its slot: {graded_in_slot:.2f} s  ->  {result['graded_in_slot_ratio']:.2f}x "
              f"(each episode's grade holding its -j slot)")
        print(f"tool and grading time, summed over episodes: {tool_seconds:.2f} s "
              f"({100 * float(result['tool_share_hidden']):.0f}% of it hidden behind generation)")
        print(f"session open + grade per episode: {result['grade_seconds_p50']:.2f} s p50 (the last episode's "
              f"grade follows the last reply: no generation is left to hide it)")
        print(f"load average {load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} CPUs (run_tests and the "
              f"grade are CPU work: on a saturated machine they, not the overlap, set the ratio)")
    return 0 if passed == len(episodes) else 1


if __name__ == "__main__":
    sys.exit(main())
