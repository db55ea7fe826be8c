"""The process's one drain thread (verify_cli/sandbox/plumbing/drainer.py), which reads every
run's output pipes to their end instead of a thread per pipe."""

from __future__ import annotations

import os
import threading

from verify_cli.sandbox.plumbing.drainer import drain
from verify_cli.sandbox.plumbing.output import BoundedCapture


def _writer(fd: int, chunks: list[bytes]) -> threading.Thread:
    def write() -> None:
        with os.fdopen(fd, "wb", buffering=0) as out:
            for chunk in chunks:
                out.write(chunk)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def test_many_pipes_at_once_each_read_to_its_end_and_closed() -> None:
    pipes = [os.pipe() for _ in range(40)]
    captures = [BoundedCapture(10 << 20) for _ in pipes]
    # each writer writes more than a pipe holds (64 KiB): it blocks unless the drain reads
    writers = [_writer(w, [bytes([i]) * 50_000] * 4) for i, (_, w) in enumerate(pipes)]
    drains = [drain(r, cap) for (r, _), cap in zip(pipes, captures, strict=True)]
    for t in writers:
        t.join(10)
    for d in drains:
        d.join(10)
        assert not d.is_alive()
    for i, cap in enumerate(captures):
        out = cap.result()
        assert out.total_bytes == 200_000 and out.head == bytes([i]) * 200_000
    for r, _ in pipes:  # the drain closed its end
        try:
            os.fstat(r)
        except OSError:
            continue
        raise AssertionError(f"fd {r} still open")


def test_a_flood_calls_its_capture_back_and_is_still_read_to_its_end() -> None:
    floods: list[int] = []
    r, w = os.pipe()
    cap = BoundedCapture(1000, lambda: floods.append(1))
    d = drain(r, cap)
    _writer(w, [b"x" * 100_000] * 3).join(10)
    d.join(10)
    assert floods == [1]
    result = cap.result()
    assert result.total_bytes == 300_000 and result.truncated and len(result.head) + len(result.tail) == 1000


def test_join_waits_for_a_pipe_whose_writer_is_still_open() -> None:
    r, w = os.pipe()
    d = drain(r, BoundedCapture(100))
    d.join(0.2)
    assert d.is_alive()
    os.close(w)
    d.join(5)
    assert not d.is_alive()


def test_a_forked_child_gets_a_drain_thread_of_its_own() -> None:
    drain(*_closed_pipe()).join(5)  # the parent's loop runs
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child reports by its exit status)
        r, w = os.pipe()
        cap = BoundedCapture(100)
        d = drain(r, cap)
        os.write(w, b"child")
        os.close(w)
        d.join(5)
        os._exit(0 if cap.result().head == b"child" and not d.is_alive() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _closed_pipe() -> tuple[int, BoundedCapture]:
    r, w = os.pipe()
    os.close(w)
    return r, BoundedCapture(10)
