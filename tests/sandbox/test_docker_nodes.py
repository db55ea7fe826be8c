"""The docker backend's node mode: runs isolated by bubblewrap inside long-lived containers.

What one run leaves (processes, files in any folder, environment) never reaches the next run in
the same container; limits hold and a damaged container is recycled; the pools grow while work
waits and shrink to nothing when idle; every result names the image's content digest. The
hostile-program suite (``test_conformance.py``) and the verdict parity with bwrap
(``tests/checks/test_backend_parity.py``) cover this mode too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Verdict

PYTHON_IMAGE = "verify-cli/python:3.11"


def _skip_reason() -> str | None:
    try:
        from docker.client import DockerClient as Client
        from docker.errors import ImageNotFound
    except ImportError as e:
        return f"the docker SDK is not installed ({e})"
    try:
        client = Client.from_env(timeout=5)
        client.ping()
    except Exception as e:
        return f"the Docker daemon does not answer ({e}); run scripts/setup_docker.sh"
    try:
        client.images.get(PYTHON_IMAGE)
    except ImageNotFound:
        return f"image {PYTHON_IMAGE} is missing; run scripts/build_images.sh"
    finally:
        client.close()
    return None


_SKIP = _skip_reason()
pytestmark = [pytest.mark.docker, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

if _SKIP is None:
    from docker.client import DockerClient

    from verify_cli.sandbox.docker import DockerSandbox
    from verify_cli.sandbox.docker.containers import LABEL, OWNER_LABEL, owner

LIMITS = Limits(wall_seconds=20, memory_mb=256, processes=64)


@pytest.fixture
def one() -> Iterator[DockerSandbox]:
    """A node pool of at most one container: consecutive runs share it."""
    box = DockerSandbox(max_containers=1, idle_timeout_s=60)
    yield box
    box.close()


def _run(box: DockerSandbox, work: Path, script: str, *, limits: Limits = LIMITS,
         env: dict[str, str] | None = None, stdin: bytes | None = None) -> RunResult:
    work.mkdir(exist_ok=True)
    return box.run(RunSpec(["sh", "-c", script], work, limits=limits, env=env or {},
                           image=PYTHON_IMAGE, stdin=stdin))


def _our_containers() -> list[str]:
    client = DockerClient.from_env(timeout=30)
    try:
        found = client.api.containers(all=True, filters={"label": [f"{LABEL}=1",
                                                                    f"{OWNER_LABEL}={owner()}"]})
        return [c["Id"] for c in found]
    finally:
        client.close()


def test_nothing_of_a_run_reaches_the_next_run_in_the_same_container(one: DockerSandbox,
                                                                     tmp_path: Path) -> None:
    first = tmp_path / "first"
    first.mkdir()
    (first / "input.txt").write_text("first run's file\n")
    dirty = _run(one, first, (
        # a daemon that outlives the command (new session, ignores SIGHUP) and keeps writing
        "(setsid sh -c 'trap \"\" HUP; while :; do echo DAEMON_TOKEN_7f3 >> /tmp/daemon.log; "
        "echo alive >> /workspace/daemon.log; sleep 0.05; done' >/dev/null 2>&1 &); "
        "echo left > /workspace/left.txt; echo left > $VERIFY_RESULTS_DIR/left.xml; "
        "dd if=/dev/zero of=/tmp/fill bs=1M count=1000 2>/dev/null; "  # fill /tmp to ENOSPC
        "export LEAKED=yes; echo 'export LEAKED=yes' >> $HOME/.profile; sleep 0.3; echo done"),
        env={"FIRST_ONLY": "1"})
    assert dirty.verdict is Verdict.OK, dirty.message or dirty.stderr.text
    assert dirty.stdout.text == "done\n"
    assert "left.xml" in dirty.results

    second = tmp_path / "second"
    second.mkdir()
    (second / "mine.txt").write_text("second\n")
    clean = _run(one, second, (
        "sleep 0.3; ls -A /workspace; echo ---; ls -A /tmp; echo ---; ls -A $VERIFY_RESULTS_DIR; "
        "echo ---; env | grep -c -e LEAKED -e FIRST_ONLY; echo ---; "
        "for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr '\\0' ' '; echo; done "
        "| grep -c 'DAEMON_TOKEN_[7]f3'; df -k /tmp | tail -1"))
    stats = one.container_stats()
    assert stats["started"] == 1 and stats["reused"] == 1, stats  # the same container
    parts = clean.stdout.text.split("---\n")
    assert parts[0].split() == ["mine.txt"], clean.stdout.text
    assert parts[1].split() == [], clean.stdout.text  # no daemon.log, no fill
    assert parts[2].split() == [], clean.stdout.text
    assert parts[3].split() == ["0"], clean.stdout.text
    assert parts[4].split()[0] == "0", clean.stdout.text  # no daemon process
    used_kib = int(parts[4].split()[3])
    assert used_kib < 1024, clean.stdout.text  # /tmp is empty again
    assert set(clean.results) == set()


def test_a_memory_bomb_is_a_memory_limit_and_the_pool_goes_on(one: DockerSandbox,
                                                              tmp_path: Path) -> None:
    bomb = _run(one, tmp_path / "bomb",
                "python -c 'b = []\nwhile True: b.append(bytearray(16 << 20))'",
                limits=Limits(wall_seconds=20, memory_mb=128, processes=64))
    assert bomb.verdict is Verdict.MEMORY_LIMIT, (bomb.message, bomb.stderr.text)
    after = _run(one, tmp_path / "after", "echo fine",
                 limits=Limits(wall_seconds=20, memory_mb=128, processes=64))
    assert after.verdict is Verdict.OK and after.stdout.text == "fine\n"
    stats = one.container_stats()
    assert stats["started"] + stats["reused"] == 2
    assert stats["started"] == 1 or stats["recycled"] == 1, stats  # survived, or recycled


def test_a_timeout_recycles_the_container(one: DockerSandbox, tmp_path: Path) -> None:
    slow = _run(one, tmp_path / "slow", "sleep 30", limits=Limits(wall_seconds=1, memory_mb=256))
    assert slow.verdict is Verdict.TIMEOUT
    fine = _run(one, tmp_path / "fine", "echo ok", limits=Limits(wall_seconds=1, memory_mb=256))
    assert fine.verdict is Verdict.OK
    stats = one.container_stats()
    assert stats["recycled"] == 1 and stats["started"] == 2, stats


def test_containers_are_recycled_after_max_runs(tmp_path: Path) -> None:
    with DockerSandbox(max_containers=1, max_runs=2) as box:
        for i in range(3):
            assert _run(box, tmp_path / str(i), "true").verdict is Verdict.OK
        stats = box.container_stats()
    assert stats["started"] == 2 and stats["recycled"] == 1 and stats["reused"] == 1, stats


def test_stdin_argv_and_environment_reach_the_command_verbatim(one: DockerSandbox,
                                                               tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    (work / "data.bin").write_bytes(bytes(range(256)) * 64)
    odd = "it's \"quoted\" $HOME `x` \\ \n newline"
    result = one.run(RunSpec(
        ["python", "-c", "import os,sys; d=sys.stdin.buffer.read(); print(len(d), d[:5], "
                         "repr(os.environ['ODD']), sys.argv[1:], os.environ['1BAD-NAME'], "
                         "len(open('data.bin','rb').read()))", odd, "two words"],
        work, limits=LIMITS, env={"ODD": odd, "1BAD-NAME": "ok"}, image=PYTHON_IMAGE,
        stdin=b"hello" + bytes(100_000)))
    assert result.verdict is Verdict.OK, result.stderr.text
    assert result.stdout.text == (f"100005 b'hello' {odd!r} [{odd!r}, 'two words'] ok 16384\n")
    # the run's unread stdin never reaches the next run's supervisor
    result = _run(one, tmp_path / "unread", "echo ignored stdin", stdin=b"x" * 300_000)
    assert result.verdict is Verdict.OK and result.stdout.text == "ignored stdin\n"
    assert _run(one, tmp_path / "next", "echo next").stdout.text == "next\n"


def test_pools_grow_under_a_queue_and_shrink_to_zero_when_idle(tmp_path: Path) -> None:
    # What this process held before (an earlier module's sandbox on the same xdist worker: a CI
    # run saw 10 such) is not this pool's: count the containers that are new.
    before = set(_our_containers())
    box = DockerSandbox(max_containers=3, idle_timeout_s=1.0)

    def new() -> set[str]:
        return set(_our_containers()) - before

    try:
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda i: _run(box, tmp_path / f"q{i}", "sleep 0.5; echo q"),
                                    range(12)))
        assert all(r.verdict is Verdict.OK for r in results), [r.message for r in results]
        stats = box.container_stats()
        assert stats["peak"] == 3 and stats["started"] == 3, stats  # grew to the limit, no more
        assert stats["reused"] == 9 and stats["waits"] > 0, stats
        assert len(new()) == 3, (len(before), new())
        deadline = time.monotonic() + 20
        while box.container_stats()["alive"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert box.container_stats()["alive"] == 0
        assert box.container_stats()["idle_removed"] == 3
        deadline = time.monotonic() + 20
        while new() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert new() == set()  # an idle pool holds no container
        # and grows again on demand
        assert _run(box, tmp_path / "again", "echo again").stdout.text == "again\n"
        assert box.container_stats()["started"] == 4
    finally:
        box.close()


def test_every_result_names_the_image_digest(one: DockerSandbox, tmp_path: Path) -> None:
    result = _run(one, tmp_path / "d", "true")
    client = DockerClient.from_env(timeout=30)
    try:
        digest = client.images.get(PYTHON_IMAGE).id
    finally:
        client.close()
    assert result.image_digest == digest and digest.startswith("sha256:")
    assert result.to_dict()["image_digest"] == digest
    assert one.facts()["image_digests"] == {PYTHON_IMAGE: digest}
    with DockerSandbox(mode="single-use") as single:
        assert _run(single, tmp_path / "s", "true").image_digest == digest


@pytest.mark.parametrize("mode", ["node", "single-use"])
def test_check_tasks_and_audit_report_the_image_digest(mode: str, sample_tasks_dir: Path,
                                                       tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from verify_cli.cli.app import main

    task = sample_tasks_dir / "coding-interval-merge"
    client = DockerClient.from_env(timeout=30)
    try:
        digest = client.images.get(PYTHON_IMAGE).id
    finally:
        client.close()
    common = ["--sandbox", "docker", "--docker-mode", mode, "--jobs", "1"]
    assert main(["check-tasks", str(task), *common, "--repeats", "1", "--no-cache",
                 "--json", str(tmp_path / "check.json")]) == 0
    assert f"image {PYTHON_IMAGE}: {digest}" in capsys.readouterr().out
    doc = json.loads((tmp_path / "check.json").read_text())
    assert doc["sandbox"]["docker_mode"] == mode
    assert doc["sandbox"]["image_digests"] == {PYTHON_IMAGE: digest}
    runs = doc["tasks"][0]["runs"]
    assert runs and all(r["image_digest"] == digest == r["run"]["image_digest"] for r in runs)
    if mode == "node":
        assert doc["sandbox"]["containers"]["started"] >= 1
    main(["audit", str(task), *common, "--no-mutants", "--reruns", "1", "--no-probes",
          "--no-labelled", "--json", str(tmp_path / "audit.json")])
    assert f"image {PYTHON_IMAGE}: {digest}" in capsys.readouterr().out
    audit = json.loads((tmp_path / "audit.json").read_text())
    assert audit["sandbox"]["image_digests"] == {PYTHON_IMAGE: digest}
