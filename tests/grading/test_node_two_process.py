"""Node's side of two-process grading, without a sandbox: the candidate server and the tests'
stand-in as two local node processes over a Unix socket in a temporary folder.

The tests' folder holds a poisoned copy of the candidate's file (it writes a marker when
loaded): the stand-in must never load it, only cross to the server's copy.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from verify_cli.grading.junit import Outcome, parse_junit
from verify_cli.sandbox.environment import HARNESS_DIR

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

HERE = Path(__file__).parent / "node_two_process"
SERVER = HARNESS_DIR / "candidate" / "node" / "candidate_server.js"
POISON = "require('fs').writeFileSync(__dirname + '/LOADED', 'x'); module.exports = {};\n"


def _env(**extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **extra}


def _run_tests(trusted: Path, channel: Path, test_file: str, timeout: float = 60) -> tuple[int, list]:
    junit = trusted / "junit.xml"
    proc = subprocess.run(
        ["node", "--test", "--test-reporter=junit", f"--test-reporter-destination={junit}", test_file],
        cwd=trusted, capture_output=True, timeout=timeout,
        env=_env(VERIFY_CHANNEL=str(channel), VERIFY_CANDIDATE_FILES='["*.js"]',
                 VERIFY_WORKDIR=str(trusted), NODE_PATH=str(HARNESS_DIR),
                 NODE_OPTIONS="--require verify_node_guard --require verify_node_standin"))
    tests = parse_junit(junit.read_bytes()) if junit.exists() else []
    return proc.returncode, tests


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(trusted work folder, channel socket) with a candidate server serving candidate/."""
    cand, trusted, chan = tmp_path / "cand", tmp_path / "trusted", tmp_path / "chan"
    shutil.copytree(HERE / "candidate", cand)
    shutil.copytree(HERE / "tests", trusted / "tests")
    chan.mkdir()
    (trusted / "shapes.js").write_text(POISON)
    sock = chan / "channel.sock"
    server = subprocess.Popen(["node", str(SERVER)], cwd=cand, env=_env(VERIFY_CHANNEL=str(sock)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        yield trusted, sock
    finally:
        server.kill()
        server.wait()
    assert not (trusted / "LOADED").exists(), "the tests' process loaded the candidate's file"


def test_every_shape_crosses(pair: tuple[Path, Path]) -> None:
    trusted, sock = pair
    rc, tests = _run_tests(trusted, sock, "tests/shapes.test.js")
    failed = [(t.id, t.message[:300]) for t in tests if not t.outcome.ok]
    assert not failed
    assert len(tests) == 7 and rc == 0


def test_a_candidate_that_dies_fails_the_run(pair: tuple[Path, Path]) -> None:
    trusted, sock = pair
    rc, tests = _run_tests(trusted, sock, "tests/broken.test.js")
    assert rc != 0
    assert any(t.outcome is Outcome.FAILED for t in tests)


def test_codec_unit_tests() -> None:
    proc = subprocess.run(["node", "--test", str(HERE / "tests" / "wire.test.js")], capture_output=True,
                          timeout=60, env=_env(VERIFY_NODE_HARNESS=str(HARNESS_DIR)))
    assert proc.returncode == 0, proc.stdout.decode()[-3000:]


def _garbage_server(sock_path: Path, reply: bytes) -> threading.Thread:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock_path))
    srv.listen(4)

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            (n,) = struct.unpack(">I", conn.recv(4))
            conn.recv(n)
            conn.sendall(reply)
            conn.recv(1)
        srv.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("reply", [
    struct.pack(">I", 5) + b"{oops",  # not JSON
    struct.pack(">I", 13) + b'{"id":1,"ok":',  # truncated, then the connection closes
    struct.pack(">I", 20) + b'{"id": 1, "ok": 1.5}',  # a bare float
    struct.pack(">I", 0x7FFFFFFF),  # over the size limit
    struct.pack(">I", 31) + b'{"id":1,"ok":{"$eval":"1 + 1"}}',  # a kind no decoder builds
])
def test_protocol_errors_fail_the_run(tmp_path: Path, reply: bytes) -> None:
    shutil.copytree(HERE / "tests", tmp_path / "tests")
    (tmp_path / "tests" / "swallow.test.js").write_text(
        "const test = require('node:test');\n"
        "let mod = null; try { mod = require('../shapes.js'); } catch (e) {}\n"
        "test('passes unless the run is failed', () => {});\n")
    sock = tmp_path / "channel.sock"
    thread = _garbage_server(sock, reply)
    rc, tests = _run_tests(tmp_path, sock, "tests/swallow.test.js")
    thread.join(timeout=5)
    assert rc != 0
    assert not tests or not all(t.outcome.ok for t in tests)


def test_esm_import_of_a_candidate_file_is_refused(pair: tuple[Path, Path]) -> None:
    trusted, sock = pair
    rc, tests = _run_tests(trusted, sock, "tests/esm.test.js")
    assert rc == 0 and [t.outcome for t in tests] == [Outcome.PASSED], [t.message for t in tests]


def test_each_test_file_gets_a_fresh_candidate_process(pair: tuple[Path, Path]) -> None:
    trusted, sock = pair
    for name in ("a", "b"):
        (trusted / "tests" / f"fresh_{name}.test.js").write_text(
            "const test = require('node:test');\nconst assert = require('node:assert');\n"
            "const mod = require('../shapes.js');\n"
            "test('module state starts afresh', () => {\n"
            "  assert.strictEqual(mod.counter, 0);\n  mod.bump();\n  assert.strictEqual(mod.counter, 1);\n});\n")
    # The server's first connection is served by the server itself (its counter is then 1)...
    rc, tests = _run_tests(trusted, sock, "tests/fresh_a.test.js")
    assert rc == 0
    # ...and every later one by a fresh process: both files see the counter at 0.
    junit = trusted / "junit.xml"
    proc = subprocess.run(
        ["node", "--test", "--test-reporter=junit", f"--test-reporter-destination={junit}",
         "tests/fresh_a.test.js", "tests/fresh_b.test.js"],
        cwd=trusted, capture_output=True, timeout=60,
        env=_env(VERIFY_CHANNEL=str(sock), VERIFY_CANDIDATE_FILES='["*.js"]', VERIFY_WORKDIR=str(trusted),
                 NODE_PATH=str(HARNESS_DIR), NODE_OPTIONS="--require verify_node_guard --require verify_node_standin"))
    tests = parse_junit(junit.read_bytes())
    assert proc.returncode == 0 and len(tests) == 2 and all(t.outcome.ok for t in tests), [t.message for t in tests]


def test_programs_run_through_the_candidate_exec_runner(pair: tuple[Path, Path]) -> None:
    import sys

    trusted, sock = pair
    for _ in range(200):  # the runner does not wait for the server (the tests' process does)
        if sock.exists():
            break
        time.sleep(0.05)
    proc = subprocess.run(
        [sys.executable, str(HARNESS_DIR / "verify_candidate_exec.py"), "--channel", str(sock), "--",
         "sh", "-c", "cat; echo oops >&2; exit 3"],
        input=b"to stdin\n", capture_output=True, timeout=60, cwd=trusted)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, b"to stdin\n", b"oops\n")


def test_the_node_exec_runner_matches_the_python_one(pair: tuple[Path, Path]) -> None:
    """verify_candidate_exec.js (images without Python; the docker backend's launcher picks it):
    arguments, stdin, output, exit status and environment cross as with the Python runner, and
    NODE_OPTIONS set aside by the launcher reaches the program again."""
    trusted, sock = pair
    for _ in range(200):
        if sock.exists():
            break
        time.sleep(0.05)
    proc = subprocess.run(
        ["node", str(HARNESS_DIR / "verify_candidate_exec.js"), "--channel", str(sock), "--",
         "sh", "-c", 'cat; echo "$NODE_OPTIONS|$WHO" >&2; exit 3'],
        input=b"to stdin\n", capture_output=True, timeout=60, cwd=trusted,
        env=_env(WHO="tests", VERIFY_EXEC_NODE_OPTIONS="--no-warnings"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, b"to stdin\n", b"--no-warnings|tests\n")
    gone = subprocess.run(["node", str(HARNESS_DIR / "verify_candidate_exec.js"), "--channel",
                           str(sock.parent / "absent.sock"), "--", "true"], capture_output=True, timeout=60,
                          env=_env(VERIFY_EXEC_CONNECT_SECONDS="0.5"))
    assert gone.returncode == 125 and b"cannot reach the candidate sandbox" in gone.stderr


#: A candidate server's main thread that is slow to look at its channel's status: its first
#: wake-up (the I/O thread says LISTENING) is followed by half a second off the CPU, as on a busy
#: machine, during which the trusted side connects and the I/O thread accepts (status UP).
_SLOW_MAIN = """
const realWait = Atomics.wait;
let first = true;
Atomics.wait = function (ta, index, value, timeout) {
  const r = realWait.call(Atomics, ta, index, value, timeout);
  if (first) {
    first = false;
    const until = Date.now() + 500;
    while (Date.now() < until) {}
  }
  return r;
};
const { SyncChannel } = require(process.argv[2]);
try {
  new SyncChannel({ mode: 'listen', path: process.argv[3], connectSeconds: 1 });
  process.stdout.write('listening\\n');
  process.exit(0);
} catch (e) {
  process.stdout.write(`failed: ${e.message}\\n`);
  process.exit(1);
}
"""


def test_a_server_that_sees_its_first_connection_before_listening_still_serves(tmp_path: Path) -> None:
    """The I/O thread may listen and accept the first connection before the main thread looks:
    that is listening too (it used to wait for LISTENING until the deadline and fail the run)."""
    script = tmp_path / "slow_main.js"
    script.write_text(_SLOW_MAIN)
    sock_path = tmp_path / "channel.sock"
    server = subprocess.Popen(["node", str(script), str(SERVER.parent / "channel.js"), str(sock_path)],
                              stdout=subprocess.PIPE, text=True)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                client.connect(str(sock_path))
                break
            except OSError:
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.001)
        out, _ = server.communicate(timeout=30)
    finally:
        client.close()
        if server.poll() is None:
            server.kill()
            server.wait()
    assert out.strip() == "listening", out


#: Inside a pid namespace of its own whose session leader is outside it (so every session id
#: reads 0, as on a host whose init never made a session): pid 2 is a stand-in for the kernel's
#: kthreadd, a daemon of a session of its own is pid 3, the candidate server pid 4. The server is
#: not a sandbox's pid 2, so an exec's sweep must not run: the daemon must live.
_HOST_LIKE = """
sleep 600 &
python3 -c 'import os, time; os.setsid(); time.sleep(600)' &
daemon=$!
VERIFY_CHANNEL="$1/channel.sock" node "$2" &
i=0; while [ ! -S "$1/channel.sock" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
node "$3" --channel "$1/channel.sock" -- true
echo "exec=$?"
sleep 0.2
if kill -0 "$daemon" 2>/dev/null; then echo daemon=alive; else echo daemon=killed; fi
kill -9 -1
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_a_server_outside_a_sandbox_never_sweeps_the_host(tmp_path: Path) -> None:
    """The node server's sweep after an exec kills every process outside its session, and only
    where it is pid 2 of a pid namespace of its own. Where the host's pid 2 (kthreadd) shares the
    server's session id (0, as where init never called setsid: this project's CI), the check once
    read "pid 2 is in my session" as "this is my sandbox" and killed the Docker engine."""
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc",
         "sh", "-c", _HOST_LIKE, "sh", str(tmp_path), str(SERVER),
         str(HARNESS_DIR / "verify_candidate_exec.js")],
        capture_output=True, timeout=60, cwd=tmp_path, env=_env())
    out = proc.stdout.decode()
    assert "exec=0" in out, (out, proc.stderr.decode()[-2000:])
    assert "daemon=alive" in out, out
