"""The fd-passing job send, written once (verify_cli/sandbox/plumbing/job_send.py): what the warm workers
and candidate parents are handed, and the caller's own error when the other end is gone."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from verify_cli.sandbox.plumbing.job_send import send_job

ROOT = Path(__file__).resolve().parents[2]


class Unreachable(Exception):
    pass


def test_the_job_and_its_descriptors_arrive() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    try:
        send_job(a, {"op": "run", "id": "j1"}, [w], unreachable=Unreachable)
        data, fds, _, _ = socket.recv_fds(b, 1 << 16, 4)
        assert json.loads(data) == {"op": "run", "id": "j1"} and len(fds) == 1
        os.write(fds[0], b"x")  # the received descriptor is the same pipe
        assert os.read(r, 1) == b"x"
        os.close(fds[0])
    finally:
        for fd in (r, w):
            os.close(fd)
        a.close()
        b.close()


def test_a_gone_peer_is_the_callers_error() -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    b.close()
    with pytest.raises(Unreachable) as e:
        send_job(a, {"op": "run"}, [], unreachable=lambda why: Unreachable(f"cannot reach it: {why}"))
    assert "cannot reach it" in str(e.value) and isinstance(e.value.__cause__, OSError)
    a.close()


def test_only_job_send_passes_descriptors_on_the_host_side() -> None:
    users = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "verify_cli" / "sandbox").rglob("*.py")
                   if "send_fds(" in p.read_text(encoding="utf-8"))
    assert users == ["verify_cli/sandbox/plumbing/job_send.py"]


def test_no_module_of_the_package_is_over_800_lines() -> None:
    long = {p.relative_to(ROOT).as_posix(): n for p in (ROOT / "verify_cli").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800}
    assert long == {}
