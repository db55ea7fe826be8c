"""``localhost`` resolves inside every sandbox: in a run and in a session, on every backend.

A task whose program serves on ``localhost`` (a test client and a server in one exec) failed on
bwrap, whose sandboxes had no ``/etc/hosts``, and passed on docker (issue 39)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SandboxFor
from verify_cli.sandbox.base import RunSpec, Sandbox, Verdict
from verify_cli.sandbox.sessions import ExecVerdict, SessionLimits

IMAGE = "verify-cli/python:3.11"
#: Resolves localhost, then serves on it and connects to it (what the issue's task did).
SERVE_ON_LOCALHOST = (
    "import socket\n"
    "print(socket.gethostbyname('localhost'))\n"
    "server = socket.create_server(('localhost', 0))\n"
    "client = socket.create_connection(('localhost', server.getsockname()[1]), timeout=5)\n"
    "conn, _ = server.accept(); client.sendall(b'ping'); print(conn.recv(4).decode())\n")


def test_a_run_resolves_and_serves_on_localhost(any_sandbox: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "serve.py").write_text(SERVE_ON_LOCALHOST)
    result = any_sandbox.run(RunSpec(["python", "serve.py"], tmp_path, image=IMAGE))
    assert result.verdict is Verdict.OK, (result.message, result.stderr.text)
    assert result.stdout.text.split() == ["127.0.0.1", "ping"]


SESSION_BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param("bwrap", marks=pytest.mark.bwrap, id="bwrap"),
    pytest.param("docker", marks=pytest.mark.docker, id="docker"),
]


@pytest.mark.parametrize("backend", SESSION_BACKENDS)
def test_a_session_resolves_and_serves_on_localhost(backend: str, sandbox_for: SandboxFor) -> None:
    limits = SessionLimits(memory_mb=256, processes=64, disk_bytes=32 << 20, command_seconds=20,
                           idle_seconds=300)
    with sandbox_for(backend).open_session({"serve.py": SERVE_ON_LOCALHOST.encode()}, limits,
                                           image=IMAGE) as session:
        looked_up = session.exec("getent hosts localhost")
        assert looked_up.verdict is ExecVerdict.OK, looked_up
        assert looked_up.stdout.text.split()[0] in ("127.0.0.1", "::1")
        served = session.exec("python3 serve.py")
        assert served.verdict is ExecVerdict.OK, served
        assert served.stdout.text.split() == ["127.0.0.1", "ping"]
