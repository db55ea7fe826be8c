"""A check-tasks on docker that is terminated (SIGTERM: a CI job cancelled, a timeout) removes
its long-lived containers before it exits, as Ctrl-C does; none is left running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.sandbox.test_docker_nodes import _SKIP

pytestmark = [pytest.mark.docker, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

if _SKIP is None:
    from docker.client import DockerClient

    from verify_cli.sandbox.docker.containers import OWNER_LABEL


def _containers_of(pid: int) -> list[str]:
    client = DockerClient.from_env(timeout=30)
    try:
        found = client.api.containers(
            all=True, filters={"label": [f"{OWNER_LABEL}={socket.gethostname()}/{pid}"]})
        return [c["Id"] for c in found]
    finally:
        client.close()


def test_a_terminated_check_tasks_leaves_no_container(sample_tasks_dir: Path) -> None:
    task = sample_tasks_dir / "coding-interval-merge"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "verify_cli", "check-tasks", str(task), "--sandbox", "docker",
         "--no-cache", "--repeats", "8", "--jobs", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while not _containers_of(proc.pid) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.2)
        assert _containers_of(proc.pid), "no container started"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = _containers_of(proc.pid)
    if left:  # clean up after a failure, then fail
        client = DockerClient.from_env(timeout=30)
        for cid in left:
            client.api.remove_container(cid, force=True)
        client.close()
    assert left == [], f"{len(left)} container(s) left behind"
    assert code == 130
    assert b"Traceback" not in (proc.stderr.read() if proc.stderr else b"")


@pytest.mark.parametrize("mode", ["node", "single-use"])
def test_an_absent_image_names_the_task_file_and_field(mode: str, sample_tasks_dir: Path,
                                                        tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import shutil

    from verify_cli.cli.app import main

    task = tmp_path / "coding-interval-merge"
    shutil.copytree(sample_tasks_dir / "coding-interval-merge", task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("verify-cli/python:3.11", "verify-cli/python:0.0-absent"))
    code = main(["check-tasks", str(task), "--sandbox", "docker", "--docker-mode", mode,
                 "--repeats", "1", "--no-cache", "--json", str(tmp_path / "r.json")])
    assert code == 3  # infrastructure: nothing could be concluded
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    checks = json.loads((tmp_path / "r.json").read_text())["tasks"][0]["checks"]
    failed = [c["message"] for c in checks if c["status"] == "error"]
    assert failed and all("'verify-cli/python:0.0-absent' is not present" in m for m in failed)
    assert all(f"{toml}: /environment/image" in m for m in failed), failed
    assert all("scripts/build_images.sh" in m for m in failed)


def test_cached_verdicts_name_their_image_and_a_rebuilt_image_is_checked_again(
        sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import shutil

    from verify_cli.cli.app import main

    client = DockerClient.from_env(timeout=60)
    tag = "verify-cli/accept-cache:1"
    python = client.images.get("verify-cli/python:3.11")
    python.tag(tag)
    task = tmp_path / "coding-interval-merge"
    shutil.copytree(sample_tasks_dir / "coding-interval-merge", task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("verify-cli/python:3.11", tag))
    args = ["check-tasks", str(task), "--sandbox", "docker", "--repeats", "1", "--jobs", "1",
            "--cache-dir", str(tmp_path / "cache"), "--json", str(tmp_path / "r.json")]
    try:
        for cached in (False, True):
            assert main(args) == 0
            doc = json.loads((tmp_path / "r.json").read_text())
            assert doc["tasks"][0]["cached"] is cached
            assert doc["sandbox"]["image_digests"] == {tag: python.id}
            assert f"image {tag}: {python.id}" in capsys.readouterr().out
        client.images.get("verify-cli/node:20").tag(tag)  # "rebuilt": now without python
        assert main(args) == 1  # checked again, in the new image: defective
        doc = json.loads((tmp_path / "r.json").read_text())
        assert doc["tasks"][0]["cached"] is False
        assert doc["sandbox"]["image_digests"] == {tag: client.images.get("verify-cli/node:20").id}
    finally:
        client.images.remove(tag)
        client.close()


def test_tasks_list_on_docker_finds_the_verdicts_check_tasks_wrote_there(
        sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json
    import shutil

    from verify_cli.cli.app import main

    root = tmp_path / "tasks"
    shutil.copytree(sample_tasks_dir / "coding-interval-merge", root / "coding-interval-merge")
    cache = ["--cache-dir", str(tmp_path / "cache"), "--repeats", "1"]
    assert main(["check-tasks", str(root), "--sandbox", "docker", *cache]) == 0
    capsys.readouterr()
    assert main(["tasks", "list", str(root), "--sandbox", "docker", *cache, "--json", "-"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [t["check"] for t in listed["tasks"]] == ["sound"]
    # Another backend's verdicts are not docker's.
    assert main(["tasks", "list", str(root), "--sandbox", "process", *cache, "--json", "-"]) == 0
    assert [t["check"] for t in json.loads(capsys.readouterr().out)["tasks"]] == ["unchecked"]
