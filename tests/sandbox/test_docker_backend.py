"""The docker backend's single-use mode against a real Docker engine and the verify-cli images
(the node mode: ``test_docker_nodes.py``).

The verdicts every backend owes (exit codes, both streams, timeouts, memory, output floods, the
results folder) are tested once over every registered backend in ``test_verdicts.py``, both docker
modes included; this module keeps what is the docker backend's own.

Skipped, with the reason, where the daemon does not answer (``scripts/setup_docker.sh``) or the
images are missing (``scripts/build_images.sh``). The hostile-program suite in
``test_conformance.py`` covers containment; these tests cover the backend's own promises.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Verdict
from verify_cli.sandbox.registry import sandbox_class

PYTHON_IMAGE = "verify-cli/python:3.11"
NODE_IMAGE = "verify-cli/node:20"


def _docker_skip_reason(*images: str) -> str | None:
    try:
        from docker.client import DockerClient
        from docker.errors import ImageNotFound
    except ImportError as e:
        return f"the docker SDK is not installed ({e})"
    try:
        client = DockerClient.from_env(timeout=5)
        client.ping()
    except Exception as e:
        return f"the Docker daemon does not answer ({e}); run scripts/setup_docker.sh"
    try:
        for image in images:
            try:
                client.images.get(image)
            except ImageNotFound:
                return f"image {image} is missing; run scripts/build_images.sh"
    finally:
        client.close()
    return None


_SKIP = _docker_skip_reason(PYTHON_IMAGE)
_NODE_SKIP = _SKIP or _docker_skip_reason(NODE_IMAGE)

pytestmark = [pytest.mark.docker, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

if _SKIP is None:
    from docker.client import DockerClient

    from verify_cli.sandbox.docker import DockerSandbox, reap_containers
    from verify_cli.sandbox.docker.containers import LABEL, OWNER_LABEL, RUN_ID_LABEL


@pytest.fixture(scope="module")
def client() -> Iterator[DockerClient]:
    c = DockerClient.from_env(timeout=60)
    yield c
    c.close()


@pytest.fixture(scope="module")
def box() -> Iterator[DockerSandbox]:
    sandbox = DockerSandbox(mode="single-use")
    sandbox.start()
    yield sandbox
    sandbox.close()


def _run(box: DockerSandbox, tmp_path: Path, command: list[str], *, limits: Limits | None = None,
         image: str = PYTHON_IMAGE, **kw: object) -> RunResult:
    spec = RunSpec(command=command, workdir=tmp_path, limits=limits or Limits(wall_seconds=20),
                   image=image, **kw)  # type: ignore[arg-type]
    return box.run(spec)


def _py(code: str) -> list[str]:
    return ["python", "-c", code]


def _containers_labelled(client: DockerClient, key: str, value: str) -> list[dict[str, object]]:
    return list(client.api.containers(all=True, filters={"label": f"{key}={value}"}))


def test_registered_with_an_isolation_summary() -> None:
    assert sandbox_class("docker") is DockerSandbox
    assert "no network" in DockerSandbox.isolation
    assert DockerSandbox.availability().available


def test_work_folder_stdin_and_pinned_environment(box: DockerSandbox, tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "data.txt").write_text("payload\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\necho script-ran\n")
    (tmp_path / "run.sh").chmod(0o755)
    os.environ["VERIFY_TEST_HOST_ONLY"] = "leak"
    try:
        result = _run(box, tmp_path, ["sh", "-c",
                                      "cat pkg/data.txt; ./run.sh; stat -c %u pkg/data.txt; "
                                      "echo $HOME $VERIFY_RESULTS_DIR $EXTRA; "
                                      "echo host=${VERIFY_TEST_HOST_ONLY:-none}; tr a-z A-Z"],
                      env={"EXTRA": "extra-var"}, stdin=b"from stdin\n")
    finally:
        del os.environ["VERIFY_TEST_HOST_ONLY"]
    assert result.verdict is Verdict.OK, result
    assert result.stdout.text.splitlines() == [
        "payload", "script-ran", "1000", "/workspace /results extra-var", "host=none",
        "FROM STDIN"]


def test_timeout_kills_the_container(box: DockerSandbox, client: DockerClient,
                                     tmp_path: Path) -> None:
    nonce = uuid.uuid4().hex
    started = time.monotonic()
    result = _run(box, tmp_path, ["sleep", "100"], limits=Limits(wall_seconds=2),
                  labels={"verify-cli-test": nonce})
    elapsed = time.monotonic() - started
    assert result.verdict is Verdict.TIMEOUT, result
    assert 2 <= result.wall_seconds < 4 and elapsed < 6
    assert _containers_labelled(client, "verify-cli-test", nonce) == []


def test_process_limit_holds_and_a_fork_bomb_ends(box: DockerSandbox, tmp_path: Path) -> None:
    spawn = ("import subprocess\nn = 0\n"
             "try:\n    procs = []\n    for _ in range(100):\n"
             "        procs.append(subprocess.Popen(['sleep', '30'])); n += 1\n"
             "except OSError:\n    pass\nprint(n)")
    result = _run(box, tmp_path, _py(spawn), limits=Limits(wall_seconds=20, processes=20))
    assert result.verdict is Verdict.OK, result
    assert 5 <= int(result.stdout.text) < 20

    started = time.monotonic()
    bomb = _run(box, tmp_path, ["sh", "-c", "b() { b | b & }; b"],
                limits=Limits(wall_seconds=3, processes=32))
    assert bomb.verdict in {Verdict.TIMEOUT, Verdict.NONZERO_EXIT, Verdict.OK, Verdict.SIGNAL}
    assert time.monotonic() - started < 10
    assert _run(box, tmp_path, ["true"]).verdict is Verdict.OK


def test_no_network_but_loopback(box: DockerSandbox, tmp_path: Path) -> None:
    probe = ("import socket\n"
             "names = [l.split(':')[0].strip() for l in open('/proc/net/dev').readlines()[2:]]\n"
             "print(sorted(names))\n"
             "s = socket.socket(); s.settimeout(5)\n"
             "try:\n    s.connect(('10.255.255.1', 9))\n    print('connected')\n"
             "except OSError as e:\n    print(e.errno)\n")
    result = _run(box, tmp_path, _py(probe))
    assert result.verdict is Verdict.OK, result
    assert result.stdout.text.splitlines() == ["['lo']", str(errno.ENETUNREACH)]


def test_read_only_root_non_root_user_read_only_harness(box: DockerSandbox,
                                                        tmp_path: Path) -> None:
    script = ("id -u; touch /etc/x 2>/dev/null && echo etc-writable; "
              "touch /opt/verify-harness/x 2>/dev/null && echo harness-writable; "
              "ls /opt/verify-harness | grep -c . ; "
              "touch /workspace/ok /tmp/ok $VERIFY_RESULTS_DIR/ok && echo writable-places")
    result = _run(box, tmp_path, ["sh", "-c", script])
    lines = result.stdout.text.splitlines()
    assert lines[0] == "1000"
    assert "etc-writable" not in lines and "harness-writable" not in lines
    assert int(lines[1]) >= 1  # the harness helpers are there
    assert lines[-1] == "writable-places"


def test_labels_present_during_run_and_nothing_left(box: DockerSandbox, client: DockerClient,
                                                    tmp_path: Path) -> None:
    nonce = uuid.uuid4().hex
    seen: list[dict[str, object]] = []

    def watch() -> None:
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            seen.extend(_containers_labelled(client, "verify-cli-test", nonce))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    result = _run(box, tmp_path, ["sleep", "1.5"], labels={"verify-cli-test": nonce})
    watcher.join()
    assert result.verdict is Verdict.OK
    assert seen, "the run's container was never seen"
    labels = seen[0]["Labels"]
    assert isinstance(labels, dict)
    assert labels[LABEL] == "1" and labels[RUN_ID_LABEL]
    assert labels[OWNER_LABEL] == f"{socket.gethostname()}/{os.getpid()}"
    assert _containers_labelled(client, "verify-cli-test", nonce) == []


def test_missing_image_is_a_setup_error(box: DockerSandbox, tmp_path: Path) -> None:
    result = _run(box, tmp_path, ["true"], image="verify-cli/does-not-exist:0")
    assert result.verdict is Verdict.SETUP_ERROR
    assert "scripts/build_images.sh" in result.message


def test_unreachable_daemon_is_an_infra_error_not_an_exception(tmp_path: Path) -> None:
    dead = DockerClient(base_url=f"unix://{tmp_path}/no-daemon.sock", version="1.41", timeout=2)
    result = _run(DockerSandbox(mode="single-use", client=dead), tmp_path, ["true"])
    assert result.verdict is Verdict.INFRA_ERROR
    assert "scripts/setup_docker.sh" in result.message


def test_warm_pool_is_single_use_and_refills(tmp_path: Path) -> None:
    marker = ("import os, socket\n"
              "print(socket.gethostname(), os.path.exists('/tmp/marker'))\n"
              "open('/tmp/marker', 'w').write('x')\n"
              "open(os.environ['VERIFY_RESULTS_DIR'] + '/r.txt', 'w').write('r')")
    with DockerSandbox(mode="single-use", pool_size=2) as pool:
        pool.start([PYTHON_IMAGE], Limits(wall_seconds=20))
        assert pool.wait_until_warm(60)
        assert pool.warm_count(PYTHON_IMAGE, Limits(wall_seconds=20)) == 2
        first = _run(pool, tmp_path, _py(marker))
        second = _run(pool, tmp_path, _py(marker))
        for result in (first, second):
            assert result.verdict is Verdict.OK, result
            assert result.results == {"r.txt": b"r"}
            assert result.stdout.text.split()[1] == "False"  # a fresh container each time
        assert first.stdout.text.split()[0] != second.stdout.text.split()[0]
        assert pool.wait_until_warm(60)
        assert pool.warm_count(PYTHON_IMAGE, Limits(wall_seconds=20)) == 2
    assert pool.warm_count(PYTHON_IMAGE) == 0


def test_reap_removes_only_orphans(client: DockerClient) -> None:
    host = socket.gethostname()
    dead_pid = 2**22 + 12345  # above pid_max's default: never a live process
    made = []
    for owner in (f"{host}/{dead_pid}", f"{host}/{os.getpid()}"):
        made.append(client.api.create_container(
            PYTHON_IMAGE, ["true"], labels={LABEL: "1", OWNER_LABEL: owner})["Id"])
    try:
        removed = reap_containers(client, orphans_only=True)
        assert made[0] in removed and made[1] not in removed
        assert client.api.inspect_container(made[1])["Id"] == made[1]
    finally:
        for cid in made:
            with contextlib.suppress(Exception):
                client.api.remove_container(cid, force=True)


@pytest.mark.skipif(_NODE_SKIP is not None, reason=_NODE_SKIP or "")
def test_node_image_writes_junit(box: DockerSandbox, tmp_path: Path) -> None:
    (tmp_path / "add.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "test('adds', () => assert.strictEqual(1 + 1, 2));\n")
    result = _run(box, tmp_path, ["sh", "-c", "node --test --test-reporter=junit "
                                  "--test-reporter-destination=$VERIFY_RESULTS_DIR/junit.xml"],
                  image=NODE_IMAGE)
    assert result.verdict is Verdict.OK, result
    assert b"<testsuites" in result.results["junit.xml"]


# -- the runner / collector protocol and the background reaper ------------------------------------


@pytest.fixture(scope="module")
def pooled() -> Iterator[DockerSandbox]:
    from verify_cli.sandbox.kit.conformance import SMALL_LIMITS

    sandbox = DockerSandbox(mode="single-use", pool_size=2)
    sandbox.start([PYTHON_IMAGE], SMALL_LIMITS)
    sandbox.start([PYTHON_IMAGE], Limits(wall_seconds=20))
    yield sandbox
    sandbox.close()


def _conformance_params() -> list[object]:
    from verify_cli.sandbox.kit.conformance import CASES

    return [pytest.param(case, id=case.name) for case in CASES]


@pytest.mark.parametrize("case", _conformance_params())
def test_warm_pool_contains_every_hostile_program(pooled: DockerSandbox, case: object,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The conformance suite again, through pooled containers (removed in the background)."""
    from docker.models.containers import ContainerCollection

    from verify_cli.sandbox.kit.conformance import ConformanceCase, run_case

    # The leftover-container check lists, then inspects each: a container the reaper removes in
    # between must count as gone, not as an error (docker-py's ignore_removed).
    listing = ContainerCollection.list
    monkeypatch.setattr(ContainerCollection, "list",
                        lambda self, **kw: listing(self, **{"ignore_removed": True, **kw}))
    assert isinstance(case, ConformanceCase)
    result = run_case(pooled, case, image=PYTHON_IMAGE)
    assert result.expected_contained and result.conforms, result.describe()


def test_pooled_containers_are_gone_after_close(client: DockerClient, tmp_path: Path) -> None:
    made: list[str] = []
    with DockerSandbox(mode="single-use", pool_size=1) as pool:
        pool.start([PYTHON_IMAGE], Limits(wall_seconds=20))
        assert pool.wait_until_warm(60)
        for _ in range(3):
            result = _run(pool, tmp_path, ["sh", "-c", "hostname; sleep 30 & echo started"])
            assert result.verdict is Verdict.OK, result
            made.append(result.stdout.text.split()[0])
    left = [c["Id"] for c in client.api.containers(all=True, filters={"label": f"{LABEL}=1"})]
    assert not [cid for cid in left if any(cid.startswith(h) for h in made)]
    assert pool.warm_count(PYTHON_IMAGE, Limits(wall_seconds=20)) == 0


def test_what_a_run_leaves_is_dead_when_run_returns(pooled: DockerSandbox,
                                                    tmp_path: Path) -> None:
    token = f"vcc-left-{uuid.uuid4().hex}"
    result = _run(pooled, tmp_path, ["sh", "-c", f"setsid sleep 60 {token} >/dev/null 2>&1 & "
                                                 "echo ok"])
    assert result.verdict is Verdict.OK, result
    from verify_cli.sandbox.kit.conformance import processes_with_token

    deadline = time.monotonic() + 1.0
    while processes_with_token(token) and time.monotonic() < deadline:
        time.sleep(0.02)  # SIGKILLed; the kernel may take a moment to tear it down
    assert processes_with_token(token) == []


def test_stolen_wake_up_still_collects(pooled: DockerSandbox, tmp_path: Path) -> None:
    """A leftover process that reads the collector's stdin delays the results, no more."""
    thief = ("import os, sys\n"
             "if os.fork() == 0:\n"
             "    os.setsid()\n"
             "    fd = os.open('/proc/1/fd/0', os.O_RDONLY)\n"
             "    os.read(fd, 100)\n"
             "    os._exit(0)\n"
             "open(os.environ['VERIFY_RESULTS_DIR'] + '/r.txt', 'w').write('kept')\n")
    started = time.monotonic()
    result = _run(pooled, tmp_path, _py(thief))
    assert result.verdict is Verdict.OK, result
    assert result.results == {"r.txt": b"kept"}
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("poke", ["echo now > /proc/1/fd/0", "kill -USR1 1"])
def test_waking_the_collector_early_only_ends_the_own_run(pooled: DockerSandbox,
                                                          tmp_path: Path, poke: str) -> None:
    result = _run(pooled, tmp_path, ["sh", "-c", f"{poke}; sleep 5; echo never"],
                  limits=Limits(wall_seconds=20))
    assert not result.verdict.is_infrastructure, result
    assert result.verdict is not Verdict.OK and "never" not in result.stdout.text
    assert _run(pooled, tmp_path, ["true"]).verdict is Verdict.OK


def test_a_run_that_ends_its_collector_early_is_not_waited_for(pooled: DockerSandbox, tmp_path: Path) -> None:
    """The collector woken by the run itself collects and ends the container; the host's attach
    to it could be made while the container was stopping, stay open with no data, and hold the
    run for the collector's whole timeout (60 s: about 1 run in 5 here). Each of several such
    runs now ends within a few seconds (the nudge finds the container gone and stops waiting)."""
    from verify_cli.sandbox.docker.containers import COLLECT_TIMEOUT_S

    for _ in range(6):
        started = time.monotonic()
        result = _run(pooled, tmp_path, ["sh", "-c", "kill -USR1 1; sleep 5; echo never"],
                      limits=Limits(wall_seconds=20))
        assert not result.verdict.is_infrastructure and result.verdict is not Verdict.OK, result
        assert time.monotonic() - started < COLLECT_TIMEOUT_S / 4


def test_env_names_a_shell_cannot_export_still_reach_the_command(pooled: DockerSandbox,
                                                                 tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("here\n")
    result = _run(pooled, tmp_path, _py("import os; print(os.environ['A-B'], open('f.txt').read())"),
                  env={"A-B": "dash ok", "PLAIN": "1"}, stdin=b"in")
    assert result.verdict is Verdict.OK, result
    assert result.stdout.text.split() == ["dash", "ok", "here"]


def test_argv_and_environment_reach_the_command_verbatim(pooled: DockerSandbox,
                                                         tmp_path: Path) -> None:
    odd = ["it's", 'a "quote"', "multi\nline", "$HOME", "`id`", "-n", ""]
    code = "import os, sys, json; print(json.dumps([sys.argv[1:], os.environ['ODD'], 'PWD' in os.environ]))"
    result = _run(pooled, tmp_path, ["python", "-c", code, *odd], env={"ODD": "a'b\n$(id)"})
    assert result.verdict is Verdict.OK, result
    import json

    assert json.loads(result.stdout.text) == [odd, "a'b\n$(id)", False]


def test_a_work_folder_too_big_for_its_tmpfs_is_a_setup_error(pooled: DockerSandbox,
                                                              tmp_path: Path) -> None:
    with (tmp_path / "big.bin").open("wb") as f:
        f.truncate(80 * 1024 * 1024)
    result = _run(pooled, tmp_path, ["true"], limits=Limits(wall_seconds=20, memory_mb=256))
    assert result.verdict is Verdict.SETUP_ERROR, result
    assert "does not fit in /workspace" in result.message

