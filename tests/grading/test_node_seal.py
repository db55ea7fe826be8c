"""The seal of node test runs: the runner's own JUnit is trusted, anything else scores 0."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from verify_cli.grading.seal import new_seal_key
from verify_cli.kinds.node_seal import check_node_seal, node_seal_command, runner_writes_junit
from verify_cli.sandbox.environment import HARNESS_DIR
from verify_cli.sandbox.plumbing.trusted_launch import MOVE_SEAL_FD, seal_key_pipe

ROOT = Path(__file__).resolve().parents[2]
JUNIT = b'<?xml version="1.0"?>\n<testsuites><testcase name="t" classname="test"/></testsuites>\n'


def _seal(key: str, junit: bytes, mac_key: str | None = None) -> bytes:
    payload = json.dumps({"version": 1, "runner": "node", "pid": 7,
                          "junit_sha256": hashlib.sha256(junit).hexdigest()})
    mac = hmac.new((mac_key or key).encode(), payload.encode(), hashlib.sha256).hexdigest()
    return json.dumps({"payload": payload, "mac": mac}).encode()


def test_a_sealed_junit_file_is_trusted() -> None:
    key = new_seal_key()
    results = {"junit.xml": JUNIT, "verify-seal-node-7.json": _seal(key, JUNIT)}
    assert check_node_seal(results, key, ["junit.xml"]) == []


@pytest.mark.parametrize("results, why", [
    ({"junit.xml": JUNIT}, "no valid record"),
    ({"junit.xml": JUNIT + b" ", "verify-seal-node-7.json": "SEAL"}, "is not what node's test runner wrote"),
    ({"junit.xml": JUNIT, "verify-seal-node-7.json": "FORGED"}, "forged"),
    ({"junit.xml": JUNIT, "verify-seal-node-7.json": b"{not json"}, "not readable"),
])
def test_unsealed_rewritten_or_forged_results_are_refused(results: dict, why: str) -> None:
    key = new_seal_key()
    seals = {"SEAL": _seal(key, JUNIT), "FORGED": _seal(key, JUNIT, mac_key=new_seal_key())}
    results = {k: seals.get(v, v) if isinstance(v, str) else v for k, v in results.items()}
    problems = check_node_seal(results, key, ["junit.xml"])
    assert problems and any(why in p for p in problems), problems


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_runner_seals_exactly_the_junit_it_writes(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "sample_tasks" / "coding-word-wrap-js" / "tests", tmp_path / "tests")
    shutil.copy(ROOT / "sample_tasks" / "coding-word-wrap-js" / "solution" / "wrap.js", tmp_path)
    (tmp_path / "tests" / "env.test.js").write_text(
        "require('node:test')('the key is out of reach of the tests', () => {\n"
        "  if (process.env.VERIFY_SEAL_KEY !== undefined || process.env.VERIFY_SEAL_FD !== undefined)"
        " throw new Error('key visible');\n});\n")
    results = tmp_path / "results"
    results.mkdir()
    key = new_seal_key()
    command = node_seal_command('node --test --test-reporter=junit '
                                '--test-reporter-destination="$VERIFY_RESULTS_DIR/junit.xml" tests/')
    env = {"PATH": os.environ["PATH"], "NODE_PATH": str(HARNESS_DIR), "VERIFY_HARNESS_DIR": str(HARNESS_DIR),
           "VERIFY_RESULTS_DIR": str(results), "VERIFY_SEAL_KEY": key,
           "NODE_OPTIONS": "--require verify_node_guard"}
    key_fd = seal_key_pipe(env)  # as a backend hands it: a pipe, never the environment
    assert "VERIFY_SEAL_KEY" not in env
    try:
        proc = subprocess.run(["/bin/sh", "-c", f"{MOVE_SEAL_FD}; {command}"], cwd=tmp_path, env=env,
                              stdin=key_fd, capture_output=True, timeout=120)
    finally:
        os.close(key_fd)
    assert proc.returncode == 0, proc.stdout.decode()[-2000:]
    files = {p.name: p.read_bytes() for p in results.iterdir()}
    assert any(n.startswith("verify-seal-node-") for n in files)
    assert check_node_seal(files, key, ["junit.xml"]) == []
    assert check_node_seal(files, new_seal_key(), ["junit.xml"])  # another run's key: refused
    files["junit.xml"] = files["junit.xml"].replace(b"<failure", b"<!-- ")  # any edit at all
    files["junit.xml"] += b"\n"
    assert check_node_seal(files, key, ["junit.xml"])


@pytest.mark.parametrize("command, sealed", [
    ('node --test --test-reporter=junit --test-reporter-destination="$VERIFY_RESULTS_DIR/junit.xml" tests/a.js', True),
    ("node --test --test-reporter junit --test-reporter-destination=out.xml", True),
    ("node --test --test-reporter=tap tests | tap-junit > $VERIFY_RESULTS_DIR/junit.xml", False),
])
def test_the_seal_is_required_where_nodes_own_reporter_writes_the_junit(command: str, sealed: bool) -> None:
    assert runner_writes_junit(command) is sealed
