"""kill_all_but: the warm workers' way to end a run's processes and wait for them."""

from __future__ import annotations

import os
import subprocess
import time

from verify_cli.sandbox.environment import scratch_root
from verify_cli.sandbox.plumbing.killing import kill_all_but


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_kills_every_listed_process_but_the_kept_ones_and_waits_for_them() -> None:
    procs = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    kept = procs[0].pid
    try:
        def listed() -> set[int]:
            for p in procs:
                p.poll()  # reap what ended, as a process's parent would
            return {p.pid for p in procs if _alive(p.pid)}

        started = time.monotonic()
        assert kill_all_but(listed, {kept}, timeout=10) == set()
        assert time.monotonic() - started < 5
        assert [_alive(p.pid) for p in procs] == [True, False, False]
        assert [p.wait(timeout=5) for p in procs[1:]] == [-9, -9]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_nothing_listed_returns_at_once() -> None:
    assert kill_all_but(set, {os.getpid()}) == set()


def test_scratch_root_is_a_ram_file_system_or_the_default() -> None:
    root = scratch_root()
    assert root is None or (os.path.isdir(root) and os.access(root, os.W_OK))
