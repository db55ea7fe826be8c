"""Warm pytest runs in the docker backend's node mode (``sandbox/docker/warm_nodes.py``).

Each run forks from a warm parent inside a long-lived container: what one run leaves (a daemon,
files in any folder, a full /tmp, its environment, its interpreter's state) never reaches the
next run in the same container; a memory bomb is ``memory_limit`` and the node survives or is
recycled; a warm run's verdict, exit status and output are a cold run's. Verdict parity with
bwrap over the sample and defective tasks (``tests/checks/test_backend_parity.py``) runs
through these warm nodes too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.test_docker_nodes import _SKIP, PYTHON_IMAGE
from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Verdict
from verify_cli.sandbox.docker import node_pool
from verify_cli.sandbox.docker.node_pool import SHAPES_KEPT

pytestmark = [pytest.mark.docker, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

if _SKIP is None:
    from verify_cli.sandbox.docker import DockerSandbox

LIMITS = Limits(wall_seconds=30, memory_mb=256, processes=64)
ARGS = ["-q", "-s", "-p", "no:cacheprovider", "tests", "--junitxml=/results/junit.xml"]


@pytest.fixture
def one() -> Iterator[DockerSandbox]:
    """A node pool of at most one container per shape: consecutive warm runs share it."""
    box = DockerSandbox(max_containers=1, idle_timeout_s=60)
    yield box
    box.close()


def _warm(box: DockerSandbox, work: Path, test_body: str, *, limits: Limits = LIMITS,
          env: dict[str, str] | None = None, files: dict[str, str] | None = None
          ) -> tuple[RunResult, str]:
    (work / "tests").mkdir(parents=True, exist_ok=True)
    (work / "tests" / "test_it.py").write_text(test_body)
    for name, text in (files or {}).items():
        (work / name).write_text(text)
    spec = RunSpec(["python", "-m", "pytest", *ARGS], work, limits=limits, env=env or {},
                   image=PYTHON_IMAGE)
    return box.run_warm_job(spec, mode="module", argv0="python", args=ARGS)


DIRTY = '''
import json, os, subprocess, sys
def test_dirty():
    subprocess.Popen(["setsid", "sh", "-c", "trap '' HUP; while :; do "
                      "echo DAEMON_TOKEN_7f3 >> /tmp/daemon.log; sleep 0.05; done"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open("/workspace/left.txt", "w").write("left")
    open("/results/left.xml", "w").write("left")
    open("/dev/shm/left", "w").write("left")
    subprocess.run("dd if=/dev/zero of=/tmp/fill bs=1M count=1000 2>/dev/null", shell=True)
    os.environ["LEAKED"] = "yes"
    json.LEAKED = True
    sys.path.insert(0, "/tmp/leak")
    print("dirty done")
'''

CLEAN = '''
import json, os, shutil, sys
def test_clean():
    cmdlines = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                cmdlines.append(open(f"/proc/{p}/cmdline", "rb").read())
            except OSError:
                pass
    assert not any(b"DAEMON_TOKEN_" + b"7f3" in c for c in cmdlines), cmdlines
    assert sorted(os.listdir("/workspace")) == ["mine.txt", "tests"], os.listdir("/workspace")
    assert os.listdir("/tmp") == [], os.listdir("/tmp")
    assert shutil.disk_usage("/tmp").used < 1 << 20
    assert os.listdir("/results") == []
    assert os.listdir("/dev/shm") == []
    assert "LEAKED" not in os.environ and "FIRST_ONLY" not in os.environ
    assert not hasattr(json, "LEAKED") and "/tmp/leak" not in sys.path
    print("clean done")
'''


def test_nothing_of_a_warm_run_reaches_the_next_in_the_same_container(one: DockerSandbox,
                                                                      tmp_path: Path) -> None:
    dirty, how = _warm(one, tmp_path / "first", DIRTY, env={"FIRST_ONLY": "1"})
    assert how == "warm", one.warm_last_error
    assert dirty.verdict is Verdict.OK, (dirty.message, dirty.stdout.text, dirty.stderr.text)
    assert "dirty done" in dirty.stdout.text
    assert {"left.xml", "junit.xml"} <= set(dirty.results)
    clean, how = _warm(one, tmp_path / "second", CLEAN, files={"mine.txt": "second"})
    assert how == "warm", one.warm_last_error
    assert clean.verdict is Verdict.OK, (clean.message, clean.stdout.text, clean.stderr.text)
    assert "clean done" in clean.stdout.text
    assert set(clean.results) == {"junit.xml"}
    stats = one.container_stats()
    assert stats["started"] == 1 and stats["reused"] == 1, stats  # the same warm container


def test_a_warm_memory_bomb_is_a_memory_limit_and_the_node_goes_on(one: DockerSandbox,
                                                                   tmp_path: Path) -> None:
    limits = Limits(wall_seconds=30, memory_mb=160, processes=64)
    bomb, how = _warm(one, tmp_path / "bomb", (
        "def test_bomb():\n    b = []\n    while True:\n        b.append(bytearray(16 << 20))\n"),
        limits=limits)
    assert how == "warm", one.warm_last_error
    assert bomb.verdict is Verdict.MEMORY_LIMIT, (bomb.message, bomb.stderr.text)
    after, how = _warm(one, tmp_path / "after", "def test_fine():\n    print('fine')\n",
                       limits=limits)
    assert how == "warm" and after.verdict is Verdict.OK, (after.message, after.stderr.text)
    stats = one.container_stats()
    assert stats["started"] == 1 or stats["recycled"] == 1, stats  # survived, or recycled


def test_a_warm_run_matches_a_cold_run(one: DockerSandbox, tmp_path: Path) -> None:
    body = ("import os\n"
            "def test_pass():\n    assert os.getcwd() == '/workspace'\n"
            "def test_fail():\n    assert os.environ['PYTHONHASHSEED'] == 'nope'\n")
    warm, how = _warm(one, tmp_path / "warm", body)
    assert how == "warm", one.warm_last_error
    work = tmp_path / "cold"
    (work / "tests").mkdir(parents=True)
    (work / "tests" / "test_it.py").write_text(body)
    cold = one.run(RunSpec(["python", "-m", "pytest", *ARGS], work, limits=LIMITS,
                           image=PYTHON_IMAGE))
    assert (warm.verdict, warm.exit_code) == (cold.verdict, cold.exit_code) == (
        Verdict.NONZERO_EXIT, 1)
    assert warm.stdout.text.splitlines()[-1].startswith("1 failed, 1 passed")
    assert cold.stdout.text.splitlines()[-1].startswith("1 failed, 1 passed")
    assert warm.image_digest == cold.image_digest and warm.image_digest
    assert set(warm.results) == set(cold.results) == {"junit.xml"}


def test_a_warm_timeout_recycles_the_node_and_the_next_run_is_warm(one: DockerSandbox,
                                                                   tmp_path: Path) -> None:
    limits = Limits(wall_seconds=2, memory_mb=256, processes=64)
    slow, how = _warm(one, tmp_path / "slow", "import time\ndef test_slow():\n    time.sleep(30)\n",
                      limits=limits)
    assert how == "warm" and slow.verdict is Verdict.TIMEOUT
    fine, how = _warm(one, tmp_path / "fine", "def test_ok():\n    pass\n", limits=limits)
    assert how == "warm" and fine.verdict is Verdict.OK
    assert one.container_stats()["recycled"] >= 1


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> Iterator[DockerSandbox]:
    """A pool of one node per shape and no room for more keys: SHAPES_KEPT nodes in all."""
    monkeypatch.setattr(node_pool, "WARM_KEYS_KEPT", 0)
    box = DockerSandbox(max_containers=1, idle_timeout_s=60)
    yield box
    box.close()


def test_a_node_rearmed_for_another_hash_seed_runs_under_that_seed(small: DockerSandbox,
                                                                  tmp_path: Path) -> None:
    """A warm node's interpreter is keyed by its start-time variables: check-tasks runs each
    repeat under its own PYTHONHASHSEED. Once the pool is at its size (one node per shape here:
    SHAPES_KEPT nodes), the next seed re-arms the longest-idle node (its supervisor replaced in
    the same container, none of the old one's processes left) instead of starting a container,
    and the run's interpreter hashes under the new seed."""
    seeds = list(range(SHAPES_KEPT + 1))
    for seed in seeds:
        expected = subprocess.run([sys.executable, "-c", "print(hash('verify-cli'))"], text=True,
                                  capture_output=True, check=True,
                                  env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout.strip()
        body = ("import os\n"
                f"def test_seed():\n    assert os.environ['PYTHONHASHSEED'] == '{seed}'\n"
                f"    assert hash('verify-cli') == {expected}\n")
        result, how = _warm(small, tmp_path / f"seed{seed}", body, env={"PYTHONHASHSEED": str(seed)})
        assert how == "warm", small.warm_last_error
        assert result.verdict is Verdict.OK, (seed, result.message, result.stdout.text)
    stats = small.container_stats()
    assert stats["started"] == SHAPES_KEPT and stats["rearmed"] == 1, stats
    assert stats["recycled"] == 0, stats  # only the node's own processes were left after the run
