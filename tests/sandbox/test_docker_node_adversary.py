"""Node mode against an adversary: what a run can reach inside a long-lived container.

Each test runs a hostile run and then a probe in the *same* container (a pool of one per
shape) and checks that nothing of the first reached the second, or that the hostile run got the
verdict a bwrap run gets (never ``infra_error``, which would mask a wrong answer).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.test_docker_nodes import _SKIP, PYTHON_IMAGE
from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Verdict

pytestmark = [pytest.mark.docker, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

if _SKIP is None:
    from verify_cli.sandbox.docker import DockerSandbox

LIMITS = Limits(wall_seconds=20, memory_mb=256, processes=64)
ARGS = ["-q", "-s", "-p", "no:cacheprovider", "tests", "--junitxml=/results/junit.xml"]


@pytest.fixture(scope="module")
def one() -> Iterator[DockerSandbox]:
    """At most one container per shape: a run and the next of its shape share it."""
    box = DockerSandbox(max_containers=1, idle_timeout_s=120)
    yield box
    box.close()


def _cold(box: DockerSandbox, work: Path, script: str, *, limits: Limits = LIMITS) -> RunResult:
    work.mkdir(parents=True, exist_ok=True)
    return box.run(RunSpec(["sh", "-c", script], work, limits=limits, image=PYTHON_IMAGE))


def _warm(box: DockerSandbox, work: Path, test_body: str) -> tuple[RunResult, str]:
    (work / "tests").mkdir(parents=True, exist_ok=True)
    (work / "tests" / "test_it.py").write_text(test_body)
    spec = RunSpec(["python", "-m", "pytest", *ARGS], work, limits=LIMITS, image=PYTHON_IMAGE)
    return box.run_warm_job(spec, mode="module", argv0="python", args=ARGS)


#: Plants a file in every folder of the container a run might write to.
_PLANT = '''
import os
PLACES = ["/opt/verify-harness", "/dev/mqueue", "/dev/shm", "/dev", "/tmp", "/var/tmp", "/run",
          "/run/lock", "/home", "/etc", "/", "/usr/local/lib/python3.11/site-packages"]
def test_plant():
    planted = []
    for place in PLACES:
        for name in ("sitecustomize.py", "PLANTED_c0ffee"):
            try:
                with open(os.path.join(place, name), "w") as fh:
                    fh.write("print('PLANTED_RAN')\\n")
                planted.append(place)
            except OSError:
                pass
    print("planted in", sorted(set(planted)))
'''

#: Looks for what _PLANT left, and starts an interpreter (a planted sitecustomize would run).
_LOOK = '''
import os, subprocess, sys
PLACES = ["/opt/verify-harness", "/dev/mqueue", "/dev/shm", "/dev", "/tmp", "/var/tmp", "/run",
          "/run/lock", "/home", "/etc", "/", "/usr/local/lib/python3.11/site-packages"]
def test_look():
    left = [p for p in PLACES
            for n in ("sitecustomize.py", "PLANTED_c0ffee") if os.path.exists(os.path.join(p, n))]
    out = subprocess.run([sys.executable, "-c", "print('child')"], capture_output=True,
                         text=True).stdout
    assert left == [] and out == "child\\n", (left, out)
'''


def test_a_warm_run_cannot_leave_files_for_the_next_run_in_its_container(
        one: DockerSandbox, tmp_path: Path) -> None:
    planted, how = _warm(one, tmp_path / "plant", _PLANT)
    assert how == "warm" and planted.verdict is Verdict.OK, (how, planted.message)
    assert "planted in" in planted.stdout.text
    before = one.container_stats()["reused"]
    look, how = _warm(one, tmp_path / "look", _LOOK)
    assert how == "warm" and one.container_stats()["reused"] == before + 1  # the same node
    assert look.verdict is Verdict.OK, look.stdout.text[-2000:]


def test_a_cold_run_cannot_leave_files_for_the_next_run_in_its_container(
        one: DockerSandbox, tmp_path: Path) -> None:
    for name, body in (("plant", _PLANT), ("look", _LOOK)):
        work = tmp_path / name
        work.mkdir()
        (work / "probe.py").write_text(body + f"\ntest_{name}()\n")
        result = _cold(one, work, "python probe.py")
        assert result.verdict is Verdict.OK, (name, result.stdout.text, result.stderr.text)


def test_a_run_over_its_cpu_time_is_a_timeout_and_the_next_run_is_fine(
        one: DockerSandbox, tmp_path: Path) -> None:
    limits = Limits(wall_seconds=20, memory_mb=256, processes=64, cpu_seconds=1)
    spin = _cold(one, tmp_path / "spin", "python -c 'while True: pass'", limits=limits)
    assert spin.verdict is Verdict.TIMEOUT, (spin.message, spin.stderr.text)
    assert "CPU" in spin.message and spin.wall_seconds < 10
    fine = _cold(one, tmp_path / "fine", "ulimit -t; echo fine", limits=limits)
    assert fine.verdict is Verdict.OK, (fine.message, fine.stderr.text)
    assert fine.stdout.text == "1\nfine\n"  # the run's own CPU limit, set without complaint


def test_a_run_that_floods_its_results_channel_gets_output_limit_not_infra_error(
        one: DockerSandbox, tmp_path: Path) -> None:
    # The in-run wrapper (pid 2) holds the results channel open; its /proc entry is the run's.
    flood = _cold(one, tmp_path / "flood", (
        "for fd in /proc/2/fd/*; do case $(readlink $fd) in *verify-results*) "
        "head -c 90000000 /dev/zero > $fd;; esac; done; echo wrote"))
    assert flood.stdout.text == "wrote\n"
    assert flood.verdict is Verdict.OUTPUT_LIMIT, (flood.verdict, flood.message)
    assert _cold(one, tmp_path / "next", "echo next").stdout.text == "next\n"


@pytest.mark.parametrize("mode", ["node", "single-use"])
def test_the_digest_recorded_is_the_image_the_run_ran_in_after_a_retag(mode: str,
                                                                        tmp_path: Path) -> None:
    from docker.client import DockerClient

    client = DockerClient.from_env(timeout=60)
    tag = f"verify-cli/accept-retag-{mode}:1"  # one per case: the two may run at once (xdist)
    python_id = client.images.get(PYTHON_IMAGE).id
    node_id = client.images.get("verify-cli/node:20").id
    client.images.get(PYTHON_IMAGE).tag(tag)
    box = DockerSandbox(max_containers=1, max_runs=1, mode=mode)  # a new container every run
    try:
        def which(work: Path) -> RunResult:
            work.mkdir()
            return box.run(RunSpec(["sh", "-c", "command -v node || echo none"], work,
                                   limits=LIMITS, image=tag))

        first = which(tmp_path / "a")
        assert first.stdout.text == "none\n" and first.image_digest == python_id
        client.images.get("verify-cli/node:20").tag(tag)  # the name now means another image
        second = which(tmp_path / "b")
        ran_in = python_id if second.stdout.text == "none\n" else node_id
        assert second.image_digest == ran_in, (second.stdout.text, second.image_digest)
    finally:
        box.close()
        client.images.remove(tag)
        client.close()


def test_an_image_without_bubblewrap_says_what_node_mode_needs_and_single_use_runs_it(
        tmp_path: Path) -> None:
    import io

    from docker.client import DockerClient

    client = DockerClient.from_env(timeout=120)
    tag = "verify-cli/accept-nobwrap:1"
    dockerfile = (f"FROM {PYTHON_IMAGE}\nUSER root\nRUN rm -f /usr/bin/bwrap\n"
                  "USER 1000:1000\n").encode()
    client.images.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True, network_mode="none")
    try:
        work = tmp_path / "w"
        work.mkdir()
        spec = RunSpec(["sh", "-c", "echo fine"], work, limits=LIMITS, image=tag)
        with DockerSandbox(max_containers=1) as node:
            result = node.run(spec)
        assert result.verdict is Verdict.SETUP_ERROR, result.message
        assert "bwrap" in result.message and "--docker-mode single-use" in result.message
        assert "verify-job-" not in result.message  # the node's secret stays its own
        with DockerSandbox(mode="single-use") as single:
            assert single.run(spec).stdout.text == "fine\n"
    finally:
        client.images.remove(tag, force=True)
        client.close()


def test_a_container_is_never_shared_between_images_or_limit_shapes(tmp_path: Path) -> None:
    box = DockerSandbox(max_containers=1, idle_timeout_s=120)
    try:
        shapes = [(PYTHON_IMAGE, LIMITS), (PYTHON_IMAGE, Limits(wall_seconds=20, memory_mb=384)),
                  (PYTHON_IMAGE, Limits(wall_seconds=20, memory_mb=256, processes=32)),
                  ("verify-cli/node:20", LIMITS)]
        for i, (image, limits) in enumerate(shapes * 2):
            work = tmp_path / str(i)
            work.mkdir()
            result = box.run(RunSpec(["sh", "-c", "echo ok"], work, limits=limits, image=image))
            assert result.verdict is Verdict.OK, result.message
        stats = box.container_stats()
        assert stats["started"] == 4 and stats["reused"] == 4, stats  # one per shape, reused once
    finally:
        box.close()


_HOLDER = '''
import sys, time
from pathlib import Path
from verify_cli.sandbox.base import Limits, RunSpec
from verify_cli.sandbox.docker import DockerSandbox
box = DockerSandbox(max_containers=1, idle_timeout_s=600)
work = Path(sys.argv[1])
(work / "tests").mkdir(parents=True)
(work / "tests" / "test_it.py").write_text("def test_ok():\\n    pass\\n")
args = ["-q", "-p", "no:cacheprovider", "tests"]
spec = RunSpec(["python", "-m", "pytest", *args], work,
               limits=Limits(wall_seconds=30, memory_mb=256), image=sys.argv[2])
if sys.argv[3] == "warm":
    result, how = box.run_warm_job(spec, mode="module", argv0="python", args=args)
    assert how == "warm", how
else:
    result = box.run(spec)
assert result.verdict.value == "ok", result.message
print("ran", flush=True)
time.sleep(600)
'''


@pytest.mark.parametrize("how", ["cold", "warm"])
def test_a_killed_process_leaves_no_running_node(how: str, tmp_path: Path) -> None:
    """SIGKILL runs no clean-up: the node stops by itself once its supervisor is gone (what is
    left is a stopped container for ``sandbox cleanup``, holding no process or memory)."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time

    from docker.client import DockerClient
    from docker.errors import APIError

    from verify_cli.sandbox.docker.containers import OWNER_LABEL

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path / "w"), PYTHON_IMAGE, how],
                            env=env, stdout=subprocess.PIPE)
    client = DockerClient.from_env(timeout=30)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ran\n"
        owned = {"label": [f"{OWNER_LABEL}={socket.gethostname()}/{proc.pid}"]}
        assert len(client.api.containers(filters=owned)) == 1  # running
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 45
        while client.api.containers(filters=owned) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert client.api.containers(filters=owned) == [], "the node still runs"
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in client.api.containers(all=True, filters={
                "label": [f"{OWNER_LABEL}={socket.gethostname()}/{proc.pid}"]}):
            try:
                client.api.remove_container(c["Id"], force=True)
            except APIError as e:  # another sandbox's orphan sweep got there first (409, 404)
                if e.status_code not in (404, 409):
                    raise
        client.close()
