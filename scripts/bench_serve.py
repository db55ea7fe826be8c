#!/usr/bin/env python3
"""Throughput and latency of ``verify-cli serve`` against the Grader called in-process, same run.

Overhead: ``--requests`` grade requests of one cheap task (the reference of
``coding/interval-merge``) each way, in ``--rounds`` alternating rounds so that both see the same
machine load:

- in-process: the local executor's ``grade_many`` on ``--jobs`` threads;
- service: ``verify-cli serve`` on a loopback port with the same ``--jobs`` (and a journal), a
  queue as deep as the clients, and ``--clients`` concurrent clients (asyncio,
  :class:`verify_cli.client.AsyncVerifyClient`), one candidate per request, each with its own id.

Overload: ``--overload-requests`` more requests from the same clients to a second service whose
queue (``--overload-queue``) is far shallower than the clients: it answers 429 with Retry-After
and the clients retry until answered.

Prints requests/s and p50/p99 latency, the service's throughput overhead (1 - service/in-process),
the 429s, and checks that every request was answered exactly once (each id once at the client;
each service graded exactly what was sent and replayed nothing). Loopback only. Timings on a
shared machine are noisy: compare the ratio from one run.

Small calls and hostile traffic (``--small-calls-only`` runs this part alone), against one
service: the round trip of a session ``exec`` of ``true`` through the service beside the same
exec on a session of the same task opened in-process (``TaskEnvironment.open``, the service's
own path; the thread form ``Session.exec``), in ``--small-rounds`` rounds of ``--small-calls``
calls each, taking turns call by call so that both see the same machine load; per round the
median of each, then the median over rounds: the service's overhead per call (target <= 2 ms). In the
same rounds: ``/healthz`` (the HTTP stack's own round trip: uvicorn, h11, the gate, FastAPI,
httpx; the floor under any call) and the same exec sent as ``application/vnd.api+json``, which
takes FastAPI's route instead of the fast lane (``verify_cli/service/fastlane.py``). Then
``/healthz`` and exec against a service listening without TCP_NODELAY (the before of that fix);
the event loop's longest stall (``/healthz`` ``loop_block_ms_max``) while a 5.9 MB body of
100,000 candidates arrives, and /healthz's worst latency meanwhile (target <= 50 ms); a request
head that never finishes and a trickled body, each cut after the service's timeout.

    python scripts/bench_serve.py [--requests 2000] [--clients 64] [--jobs 2] [--rounds 4]
    python scripts/bench_serve.py --small-calls-only [--small-rounds 7] [--small-calls 100] [--compare-checkout DIR]

``--compare-checkout DIR`` starts the same service from another checkout (``git worktree add DIR
REV``, or ``git archive REV | tar -x -C DIR``) and measures its exec in the same rounds: a
change's before and after in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from verify_cli import GradeRequest, Phase, create_executor, load_task
from verify_cli.client import AsyncVerifyClient

REPO = Path(__file__).resolve().parent.parent
TASK = REPO / "sample_tasks" / "coding-interval-merge"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


class InProcess:
    """The local executor, kept open across rounds."""

    def __init__(self, jobs: int, sandbox: str, files: dict[str, bytes]) -> None:
        self.task = load_task(TASK)
        self.jobs = jobs
        self.files = files
        self.executor = create_executor("local", sandbox=sandbox, warm=True)
        self.executor.reserve(jobs)
        self.executor.grade(GradeRequest(task=self.task, phase=Phase.CANDIDATE, candidate=files))  # warm up

    def round(self, n: int) -> tuple[float, list[float], list[float | None]]:
        requests = (GradeRequest(task=self.task, phase=Phase.CANDIDATE, candidate=self.files, label=str(i))
                    for i in range(n))
        started = time.perf_counter()
        latencies, scores = [], []
        for result in self.executor.grade_many(requests, jobs=self.jobs):
            latencies.append(result.seconds)
            scores.append(result.score)
        return time.perf_counter() - started, latencies, scores

    def close(self) -> None:
        self.executor.close()


def start_service(jobs: int, queue_size: int, sandbox: str, journal: Path) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-m", "verify_cli", "serve", str(TASK), "--port", "0", "--jobs", str(jobs),
            "--queue-size", str(queue_size), "--sandbox", sandbox, "--journal", str(journal),
            "--log-level", "warning"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None
    for line in proc.stdout:
        if "listening on " in line:
            return proc, line.rsplit("listening on ", 1)[1].strip()
    raise SystemExit("the service did not start")


def metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


async def service_clients(url: str, ids: list[str], clients: int, source: str) -> dict[str, Any]:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for i in ids:
        queue.put_nowait(i)
    answered: dict[str, int] = {}
    latencies: list[float] = []
    grade_seconds: list[float] = []
    scores: list[float | None] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with AsyncVerifyClient(url, max_retries=1000, max_wait=5.0,
                                 transport=httpx.AsyncHTTPTransport(limits=limits)) as client:
        async def worker() -> None:
            while True:
                try:
                    ident = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                t0 = time.perf_counter()
                result = await client.grade("coding/interval-merge", files={"intervals.py": source}, id=ident)
                latencies.append(time.perf_counter() - t0)
                grade_seconds.append(result["timings"]["grade_seconds"])
                answered[result["id"]] = answered.get(result["id"], 0) + 1
                scores.append(result["score"])

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        seconds = time.perf_counter() - started
        throttled = client.throttled
    return {"seconds": seconds, "latencies": latencies, "throttled": throttled, "scores": scores,
            "grade_seconds": grade_seconds,
            "each_once": sorted(answered) == sorted(ids) and set(answered.values()) == {1}}


def row(name: str, n: int, seconds: float, latencies: list[float]) -> str:
    return (f"{name:12} {n / seconds:8.1f} {percentile(latencies, 0.5):8.3f} {percentile(latencies, 0.99):8.3f} "
            f"{seconds:8.1f}")


def served_counts(url: str) -> tuple[float, float, float]:
    return (metric(url, 'verify_serve_runs_total{status="graded"}'), metric(url, "verify_serve_replayed_total"),
            metric(url, 'verify_serve_rejected_total{reason="queue_full"}'))


def _median_ms(call: Any, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1000)
    return percentile(times, 0.5)


#: The service as it listened before TCP_NODELAY (a socket made without IPPROTO_TCP, uvicorn's own
#: protocol), for the before/after ratio of small calls in one run.
_WITHOUT_NODELAY = """
import socket, sys
from pathlib import Path
import uvicorn
from verify_cli.service import GradingService, ServiceConfig, create_app
service = GradingService(ServiceConfig(roots=(Path(sys.argv[1]),), sandbox=sys.argv[2], jobs=2))
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", 0))
sock.listen(128)
print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
uvicorn.Server(uvicorn.Config(create_app(service), log_config=None, lifespan="on", log_level="warning")).run(
    sockets=[sock])
"""


def small_call_times(url: str, n: int) -> tuple[float, float]:
    """Median ms of /healthz and of a session exec of ``true`` against ``url``."""
    with httpx.Client(base_url=url) as c:
        c.get("/healthz")
        health = _median_ms(lambda: c.get("/healthz"), n)
        sid = c.post("/v1/sessions", json={"task_id": "coding/interval-merge"}).json()["session_id"]
        c.post(f"/v1/sessions/{sid}/exec", json={"command": "true"})
        served = _median_ms(lambda: c.post(f"/v1/sessions/{sid}/exec", json={"command": "true"}), n)
        c.delete(f"/v1/sessions/{sid}")
    return health, served


#: What each small-calls round measures, in this order within the round.
SMALL_KINDS = ("in-process", "service", "through FastAPI", "/healthz")


def _scheduled(pid: int) -> tuple[int, int]:
    """CPU ns and times scheduled so far of every thread of process ``pid`` (Linux schedstat)."""
    cpu = slices = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            ran, _waited, count = (int(x) for x in stat.read_text().split())
        except (OSError, ValueError):
            continue
        cpu, slices = cpu + ran, slices + count
    return cpu, slices


def small_call_rounds(url: str, sandbox: str, rounds: int, n: int, pids: dict[str, int],
                      compare_url: str | None = None) -> tuple[dict[str, list[float]], dict[str, tuple[float, float]]]:
    """Per kind of :data:`SMALL_KINDS`, the median ms of each round of ``n`` calls of each
    (within a round the kinds take turns call by call, so that each sees the same load). The
    in-process session is opened as the service opens its own (the task's starter, its
    limits), and driven by the thread form ``Session.exec``, as a library user calls it. With
    ``compare_url`` (a service of another checkout), its exec is a kind of its own, "compared".

    Then, for each service of ``pids`` (by kind), ``n`` execs on their own: the CPU the
    service process spent per exec (all its threads) and how many times its threads were
    scheduled per exec (each a wake-up that waits for a core on a loaded machine); for
    "in-process", the CPU of the calling thread per exec. These two do not depend on the load."""
    from verify_cli.agents import TaskEnvironment
    from verify_cli.sandbox import create_sandbox

    exec_body = json.dumps({"command": "true"}).encode()
    box = create_sandbox(sandbox)
    box.start()
    grader = create_executor("local", sandbox=sandbox, warm=True)
    env = TaskEnvironment.open(load_task(TASK), box, grader)
    kinds = (*SMALL_KINDS, "compared") if compare_url else SMALL_KINDS
    out: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        with httpx.Client(base_url=url) as c, httpx.Client(base_url=compare_url or url) as other:
            sid = c.post("/v1/sessions", json={"task_id": "coding/interval-merge"}).json()["session_id"]
            other_sid = (other.post("/v1/sessions", json={"task_id": "coding/interval-merge"}).json()["session_id"]
                         if compare_url else "")
            calls = {
                "in-process": lambda: env.session.exec("true"),
                "service": lambda: c.post(f"/v1/sessions/{sid}/exec", content=exec_body,
                                          headers={"content-type": "application/json"}),
                "through FastAPI": lambda: c.post(f"/v1/sessions/{sid}/exec", content=exec_body,
                                                  headers={"content-type": "application/vnd.api+json"}),
                "/healthz": lambda: c.get("/healthz"),
                "compared": lambda: other.post(f"/v1/sessions/{other_sid}/exec", content=exec_body,
                                               headers={"content-type": "application/json"}),
            }
            for kind in kinds:  # warm up every path
                for _ in range(5):
                    calls[kind]()
            check = calls["service"]()
            assert check.status_code == 200 and check.json()["verdict"] == "ok", check.text
            for _ in range(rounds):
                # call by call in turn: every kind sees the same moment's load
                times: dict[str, list[float]] = {k: [] for k in kinds}
                for _ in range(n):
                    for kind in kinds:
                        t0 = time.perf_counter()
                        calls[kind]()
                        times[kind].append((time.perf_counter() - t0) * 1000)
                for kind in kinds:
                    out[kind].append(_median(times[kind]))
            cpu: dict[str, tuple[float, float]] = {}
            started = time.thread_time()
            for _ in range(n):
                calls["in-process"]()
            cpu["in-process"] = ((time.thread_time() - started) * 1e6 / n, float("nan"))
            spent = {kind: [0, 0] for kind in pids}
            for _ in range(max(1, n // 10)):  # in turn, ten calls at a time
                for kind, pid in pids.items():
                    before = _scheduled(pid)
                    for _ in range(10):
                        calls[kind]()
                    after = _scheduled(pid)
                    spent[kind][0] += after[0] - before[0]
                    spent[kind][1] += after[1] - before[1]
            calls_made = max(1, n // 10) * 10
            for kind, (ns, slices) in spent.items():
                cpu[kind] = (ns / 1e3 / calls_made, slices / calls_made)
            c.delete(f"/v1/sessions/{sid}")
    finally:
        env.close()
        grader.close()
        box.close()
    return out, cpu


def _median(values: list[float]) -> float:
    return percentile(values, 0.5)


def without_nodelay(sandbox: str, n: int) -> tuple[float, float]:
    proc = subprocess.Popen([sys.executable, "-c", _WITHOUT_NODELAY, str(TASK), sandbox], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None
    try:
        url = next(line.rsplit("listening on ", 1)[1].strip() for line in proc.stdout if "listening on " in line)
        return small_call_times(url, n)
    finally:
        proc.terminate()
        proc.wait(60)


def small_calls(sandbox: str, rounds: int = 7, n: int = 100, compare: Path | None = None) -> bool:
    """Small-call round trips, a huge body and slow clients against one service; True when
    every target holds."""
    import socket
    import threading

    with tempfile.TemporaryDirectory() as tmp:
        # a task folder of 20,000 files (outside starter/: graded runs never copy them)
        big = Path(tmp) / "tasks" / "big-folder"
        shutil.copytree(TASK, big)
        toml = big / "task.toml"
        toml.write_text(toml.read_text().replace('id = "coding/interval-merge"', 'id = "bench/big-folder"'))
        for i in range(200):
            sub = big / "notes" / f"d{i}"
            sub.mkdir(parents=True)
            for j in range(100):
                (sub / f"n{j}.txt").write_text("x")
        args = [sys.executable, "-m", "verify_cli", "serve", str(TASK), str(big.parent), "--port", "0", "--jobs", "2",
                "--sandbox", sandbox, "--journal", str(Path(tmp) / "j.jsonl"), "--log-level", "warning",
                "--header-timeout", "2", "--body-timeout", "2"]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        assert proc.stdout is not None
        url = next(line.rsplit("listening on ", 1)[1].strip() for line in proc.stdout if "listening on " in line)
        port = int(url.rsplit(":", 1)[1])
        other: subprocess.Popen[str] | None = None
        try:
            compare_url = None
            if compare is not None:  # the same service from another checkout (the before of a change)
                other = subprocess.Popen([*args[:5], "--port", "0", "--sandbox", sandbox, "--journal",
                                          str(Path(tmp) / "j2.jsonl"), "--log-level", "warning"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                         env={**os.environ, "PYTHONPATH": str(compare)},
                                         cwd=compare)  # python -m looks in its working folder first
                assert other.stdout is not None
                compare_url = next(line.rsplit("listening on ", 1)[1].strip() for line in other.stdout
                                   if "listening on " in line)
            load_before = os.getloadavg()[0]
            pids = {"service": proc.pid, **({"compared": other.pid} if other is not None else {})}
            small, cpu = small_call_rounds(url, sandbox, rounds, n, pids, compare_url)
            load_after = os.getloadavg()[0]
            if other is not None:
                other.terminate()
                other.wait(60)
            health, served = _median(small["/healthz"]), _median(small["service"])
            old_health, old_served = without_nodelay(sandbox, max(20, n // 4))
            body = json.dumps({"candidates": [{"id": f"c{i}", "task_id": "coding/interval-merge",
                                               "files": {"intervals.py": "def merge(x):\n    return x\n"}}
                                              for i in range(100_000)]}).encode()
            worst: list[float] = []
            stop = threading.Event()

            def probe() -> None:
                with httpx.Client(base_url=url) as pc:
                    while not stop.is_set():
                        t0 = time.perf_counter()
                        pc.get("/healthz")
                        worst.append(time.perf_counter() - t0)

            time.sleep(10.5)  # the recent window holds only what follows
            before = httpx.get(f"{url}/healthz").json()["loop_block_ms_recent"]
            prober = threading.Thread(target=probe)
            prober.start()
            t0 = time.perf_counter()
            big = httpx.post(f"{url}/v1/grade", content=body, headers={"content-type": "application/json"},
                             timeout=120)
            big_s = time.perf_counter() - t0
            stop.set()
            prober.join()
            block = httpx.get(f"{url}/healthz").json()["loop_block_ms_recent"]
            time.sleep(10.5)
            t0 = time.perf_counter()
            folder = httpx.post(f"{url}/v1/grade", json={"candidates": [
                {"task_id": "bench/big-folder", "completion": f"no code ({i})"} for i in range(32)]}, timeout=120)
            folder_s = time.perf_counter() - t0
            folder_block = httpx.get(f"{url}/healthz").json()["loop_block_ms_recent"]
            assert folder.status_code == 200, folder.text[:300]
            cut = {}
            for name, data in (("unfinished head", b"POST /v1/grade HTTP/1.1\r\nHost: x\r\n"),
                               ("trickled body", b"POST /v1/grade HTTP/1.1\r\nHost: x\r\ncontent-length: 100"
                                                 b"\r\n\r\n{")):
                with socket.create_connection(("127.0.0.1", port), timeout=30) as sk:
                    t0 = time.perf_counter()
                    sk.sendall(data)
                    head = sk.recv(4096).split(b"\r\n", 1)[0].decode()
                    cut[name] = (head, time.perf_counter() - t0)
        finally:
            for running in (proc, other):
                if running is not None and running.poll() is None:
                    running.terminate()
                    running.wait(60)
    overheads = [svc - local for svc, local in zip(small["service"], small["in-process"], strict=True)]
    overhead = _median(overheads)
    in_process, routed = _median(small["in-process"]), _median(small["through FastAPI"])
    print(f"small calls: {rounds} rounds of {n} calls of each kind, in turn call by call; load average "
          f"{load_before:.1f} before, {load_after:.1f} after, on {os.cpu_count()} cores; ms, the median of the "
          f"rounds' medians (each round's in brackets):")
    for kind, label in (("in-process", "session exec of true, in-process (Session.exec)"),
                        ("service", "session exec of true, through the service"),
                        ("through FastAPI", "the same exec through FastAPI's route (no fast lane)"),
                        ("/healthz", "/healthz round trip (the HTTP stack's floor)"),
                        ("compared", f"session exec of true, the service of {compare}")):
        if kind not in small:
            continue
        rounds_text = " ".join(f"{v:.2f}" for v in small[kind])
        print(f"  {label:55} {_median(small[kind]):6.2f}  [{rounds_text}]")
    print(f"session exec of true: service {served:.2f} ms, in-process {in_process:.2f} ms, overhead {overhead:.2f} ms "
          f"(median of the rounds' differences; target <= 2 ms: {'met' if overhead <= 2.0 else 'NOT met'}); "
          f"service/in-process = {served / in_process:.2f}")
    if "compared" in small:
        compared = [b - local for b, local in zip(small["compared"], small["in-process"], strict=True)]
        print(f"  the service of {compare}: overhead {_median(compared):.2f} ms in the same rounds")
    print(f"  CPU per exec: the service process {cpu['service'][0]:.0f} us, its threads scheduled "
          f"{cpu['service'][1]:.1f} times" + (f"; the service of {compare}: {cpu['compared'][0]:.0f} us, "
                                              f"{cpu['compared'][1]:.1f} times" if "compared" in cpu else "")
          + f"; the calling thread in-process: {cpu['in-process'][0]:.0f} us (these do not depend on the load)")
    print(f"  of the overhead, the HTTP round trip itself (/healthz) is {health:.2f} ms; the rest, "
          f"{overhead - health:.2f} ms, is the exec route's own; FastAPI's route instead of the fast lane adds "
          f"{routed - served:.2f} ms")
    print(f"/healthz round trip: median {health:.2f} ms; without TCP_NODELAY {old_health:.2f} ms "
          f"(ratio {old_health / health:.1f}x)")
    print(f"session exec of true: without TCP_NODELAY {old_served:.2f} ms, now {served:.2f} ms "
          f"(ratio {old_served / served:.1f}x)")
    print(f"5.9 MB body of 100,000 candidates: {big.status_code} {big.json()['error']['code']} in {big_s:.3f} s; "
          f"/healthz worst meanwhile {max(worst) * 1000:.1f} ms over {len(worst)} calls; event loop's longest "
          f"stall {block:.1f} ms in the last 10 s (the 10 s before the body: {before:.1f} ms; target <= 50 ms); "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"32 candidates of a task folder of 20,000 files: answered in {folder_s:.2f} s; event loop's longest "
          f"stall {folder_block:.1f} ms in the last 10 s")
    for name, (head, seconds) in cut.items():
        print(f"{name}: answered '{head}' after {seconds:.2f} s (timeout 2 s)")
    return (overhead <= 2.0 and block <= 50 and folder_block <= 50 and big.status_code == 422
            and all(" 408 " in h + " " for h, _ in cut.values()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--overload-requests", type=int, default=500)
    parser.add_argument("--overload-queue", type=int, default=8)
    parser.add_argument("--sandbox", default="bwrap")
    parser.add_argument("--small-calls-only", action="store_true",
                        help="only the small-call, huge-body and slow-client measurements")
    parser.add_argument("--small-rounds", type=int, default=7,
                        help="rounds of the small calls (the median of the rounds is reported)")
    parser.add_argument("--small-calls", type=int, default=100, help="calls of each kind per small-calls round")
    parser.add_argument("--compare-checkout", type=Path, metavar="DIR",
                        help="also measure the small calls of a service run from another checkout of verify-cli "
                             "(its folder holding verify_cli/), in the same rounds: a change's before and after")
    args = parser.parse_args()
    if args.small_calls_only:
        return 0 if small_calls(args.sandbox, args.small_rounds, args.small_calls, args.compare_checkout) else 1
    source = (TASK / "solution" / "intervals.py").read_text()
    files = {"intervals.py": source.encode()}
    per_round = max(1, args.requests // args.rounds)
    n = per_round * args.rounds
    base_s, base_lat, base_scores = 0.0, [], []
    svc_s, svc_lat, svc_scores, svc_once, svc_throttled = 0.0, [], [], True, 0
    svc_grade: list[float] = []
    local = InProcess(args.jobs, args.sandbox, files)
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_service(args.jobs, args.clients, args.sandbox, Path(tmp) / "journal.jsonl")
        try:
            asyncio.run(service_clients(url, ["warm-up"], 1, source))
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds}: {per_round} requests in-process, then through the "
                      f"service from {args.clients} clients ...", flush=True)
                seconds, lat, scores = local.round(per_round)
                base_s, base_lat, base_scores = base_s + seconds, base_lat + lat, base_scores + scores
                out = asyncio.run(service_clients(url, [f"r{r}-{i}" for i in range(per_round)], args.clients,
                                                  source))
                svc_s, svc_lat = svc_s + out["seconds"], svc_lat + out["latencies"]
                svc_scores += out["scores"]
                svc_grade += out["grade_seconds"]
                svc_once, svc_throttled = svc_once and out["each_once"], svc_throttled + out["throttled"]
            graded, replayed, _ = served_counts(url)
        finally:
            proc.terminate()
            proc.wait(60)
        local.close()
        print(f"overload: {args.overload_requests} requests from {args.clients} clients, queue "
              f"{args.overload_queue} + {args.jobs} workers ...", flush=True)
        proc, url = start_service(args.jobs, args.overload_queue, args.sandbox, Path(tmp) / "journal2.jsonl")
        try:
            over = asyncio.run(service_clients(url, [f"o-{i}" for i in range(args.overload_requests)],
                                               args.clients, source))
            o_graded, o_replayed, o_rejected = served_counts(url)
        finally:
            proc.terminate()
            proc.wait(60)
    rps_base, rps_svc = n / base_s, n / svc_s
    print(f"\n{'':12} {'req/s':>8} {'p50 s':>8} {'p99 s':>8} {'wall s':>8}")
    print(row("in-process", n, base_s, base_lat))
    print(row("service", n, svc_s, svc_lat))
    print(row("overloaded", args.overload_requests, over["seconds"], over["latencies"]))
    print(f"grade time per run inside the service: p50 {percentile(svc_grade, 0.5):.3f} s, p99 "
          f"{percentile(svc_grade, 0.99):.3f} s (in-process: p50 {percentile(base_lat, 0.5):.3f} s, "
          f"p99 {percentile(base_lat, 0.99):.3f} s)")
    print(f"service throughput overhead: {1 - rps_svc / rps_base:.1%} (target <= 15%); "
          f"service/in-process = {rps_svc / rps_base:.3f}; 429s: {svc_throttled}")
    print(f"overloaded: {over['throttled']} 429s at the clients, {int(o_rejected)} at the service, every "
          f"retried request answered: {'yes' if over['each_once'] else 'NO'}")
    ok = (svc_once and over["each_once"] and graded == n + 1 and o_graded == args.overload_requests
          and replayed == 0 and o_replayed == 0 and o_rejected > 0
          and all(x == 1.0 for x in [*base_scores, *svc_scores, *over["scores"]]))
    print(f"graded by the services: {int(graded)} (+1 warm-up) and {int(o_graded)}, replayed: "
          f"{int(replayed + o_replayed)}; every request answered exactly once, every score 1.0: "
          + ("yes" if ok else "NO"))
    print("latency: in-process, a run's grade time; through the service, the client's wall time per request "
          "(queueing and 429 waits included)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
