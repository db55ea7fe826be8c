"""A real two-node Ray cluster on this machine for the ray executor's tests.

A head and a worker, each a ``ray start --block`` process in its own process group with its own
``sandbox_slots`` (head 1, worker 2), small object stores, no dashboard, ports of their own and a
temporary folder of their own. The finaliser ends exactly the processes the cluster started
(by process id, never by name), whatever the tests did.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

HEAD_SLOTS = 1
WORKER_SLOTS = 2
START_TIMEOUT = 120.0


@dataclass
class LocalRayCluster:
    address: str
    head_node_id: str
    worker_node_id: str
    slots: dict[str, int]  # node id -> sandbox_slots


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_bin() -> str:
    found = Path(sys.executable).with_name("ray")
    return str(found) if found.exists() else (shutil.which("ray") or "ray")


def _descendants(pids: list[int]) -> set[int]:
    """Every live process below ``pids`` (by parent id, read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with open(log, "wb") as fh:
        return subprocess.Popen([_ray_bin(), "start", "--block", "--disable-usage-stats", *args],
                                stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each ``ray start`` process group, then SIGKILL whatever of theirs is left."""
    started = [p for p in procs if p.poll() is None]
    tree = _descendants([p.pid for p in procs]) | {p.pid for p in procs}
    for p in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    for pid in tree:  # workers live in process groups of their own
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)


def _wait_for(predicate: object, what: str, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return
        for p, log in zip(procs, logs, strict=True):
            if p.poll() is not None:
                raise RuntimeError(f"ray start exited {p.returncode} while waiting for {what}:\n"
                                   + log.read_text(errors="replace")[-2000:])
        time.sleep(0.5)
    raise RuntimeError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalRayCluster]:
    import ray

    tmp = Path(tempfile.mkdtemp(prefix="vc-ray-"))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # One authentication mode for the cluster and this driver, whatever ~/.ray/auth_token holds:
    # Ray 2.59+ turns token auth on for local clusters started by ray.init() (which writes that
    # file), and a cluster started by `ray start` then refuses this driver's token (InvalidAuthToken).
    env["RAY_AUTH_MODE"] = "disabled"
    saved_auth_mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"  # this driver and the commands the tests start
    # A loaded machine (CI, shared cores) registers a raylet slowly: wait longer than Ray's default.
    env["RAY_raylet_start_wait_time_s"] = "120"
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", "--object-store-memory=100000000"]
    procs: list[subprocess.Popen[bytes]] = []
    logs = [tmp / "head.log", tmp / "worker.log"]
    try:
        procs.append(_start(["--head", f"--port={port}", f"--temp-dir={tmp / 'ray'}", "--include-dashboard=false",
                             *common,
                             "--resources", f'{{"sandbox_slots": {HEAD_SLOTS}}}'], logs[0], env))

        def head_up() -> bool:
            with socket.socket() as s:
                s.settimeout(0.5)
                return s.connect_ex(("127.0.0.1", port)) == 0

        _wait_for(head_up, "the head's GCS port", procs, logs[:1])

        def connected() -> bool:  # the driver needs the head's raylet registered: retry until it is
            try:
                ray.init(address=address, namespace="verify-cli", log_to_driver=False, configure_logging=False)
            except (ConnectionError, RuntimeError):
                return False
            return True

        _wait_for(connected, "the driver to connect", procs, logs[:1])

        def both_up() -> bool:
            return sum(1 for n in ray.nodes() if n["Alive"] and n["Resources"].get("sandbox_slots")) == 2

        worker_args = [f"--address={address}", *common, "--resources", f'{{"sandbox_slots": {WORKER_SLOTS}}}']
        procs.append(_start(worker_args, logs[1], env))
        try:
            _wait_for(both_up, "two live nodes with sandbox slots", procs, logs)
        except RuntimeError:
            if procs[1].poll() is None:
                raise
            # A raylet that could not register in time on a loaded machine: one more try.
            procs.append(_start(worker_args, logs[1], env))
            _wait_for(both_up, "two live nodes with sandbox slots", [procs[0], procs[2]], logs)
        nodes = [n for n in ray.nodes() if n["Alive"]]
        head = next(n["NodeID"] for n in nodes if "node:__internal_head__" in n["Resources"])
        worker = next(n["NodeID"] for n in nodes if n["NodeID"] != head)
        yield LocalRayCluster(address, head, worker, {head: HEAD_SLOTS, worker: WORKER_SLOTS})
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        _stop(procs)
        shutil.rmtree(tmp, ignore_errors=True)
        if saved_auth_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = saved_auth_mode
