"""``--executor ray`` with no cluster running starts a local Ray instance (as ``ray.init()``
does), says so on stderr, grades there and ends it; a ``--ray-address`` names a cluster that
must already be there."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, SAMPLE_TASKS

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _processes_under(folder: Path) -> list[int]:
    """Live processes whose command line names ``folder`` (a Ray instance's session files)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if str(folder).encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_no_cluster_running_starts_a_local_one_and_says_so() -> None:
    pytest.importorskip("ray")
    # A temporary folder of its own (short: Ray's socket paths are bounded), so that no cluster
    # another process started on this machine is found.
    folder = Path(tempfile.mkdtemp(prefix="vr-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # HOME too: a Ray that starts a cluster writes an auth token under ~/.ray, which other Ray
    # clusters on this machine would then read.
    env.update(RAY_TMPDIR=str(folder), HOME=str(folder), RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=str(REPO_ROOT))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "verify_cli", "check-tasks", str(SAMPLE_TASKS / "coding-interval-merge"),
             "--executor", "ray", "--sandbox", "process", "--no-cache", "--repeats", "1",
             "--json", str(folder / "report.json")],
            env=env, capture_output=True, text=True, timeout=240)
        assert proc.returncode == 0, proc.stderr
        assert "started a local Ray instance" in " ".join(proc.stderr.split())
        assert "Traceback" not in proc.stderr
        report = json.loads((folder / "report.json").read_text())
        assert report["executor"] == "ray" and [t["verdict"] for t in report["tasks"]] == ["sound"]
        assert _processes_under(folder) == []  # the instance ended with the command
    finally:
        for pid in _processes_under(folder):  # only what this test's instance left
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        shutil.rmtree(folder, ignore_errors=True)


def test_an_address_where_nothing_listens_is_an_error_not_a_new_cluster(
        capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ray")
    from verify_cli.cli.app import main

    code = main(["check-tasks", str(SAMPLE_TASKS / "coding-interval-merge"), "--executor", "ray",
                 "--ray-address", "127.0.0.1:9", "--sandbox", "process", "--no-cache"])
    assert code == 3
    err = capsys.readouterr().err
    assert "no Ray cluster answers at '127.0.0.1:9'" in err and "started a local" not in err
