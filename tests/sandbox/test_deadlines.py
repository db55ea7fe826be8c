"""The process's one deadline thread (verify_cli/sandbox/plumbing/deadlines.py), which keeps a
docker run's copy, wall and collect limits instead of a ``threading.Timer`` each."""

from __future__ import annotations

import os
import threading
import time

from verify_cli.sandbox.plumbing.deadlines import schedule


def test_deadlines_fire_in_time_order_whatever_the_order_they_were_set() -> None:
    fired: list[str] = []
    done = threading.Event()
    lock = threading.Lock()

    def note(name: str) -> None:
        with lock:
            fired.append(name)
            if len(fired) == 3:
                done.set()

    start = time.monotonic()
    schedule(0.30, note, "third")
    schedule(0.10, note, "first")
    schedule(0.20, note, "second")
    assert done.wait(5)
    assert fired == ["first", "second", "third"]
    assert time.monotonic() - start >= 0.30


def test_a_cancelled_deadline_never_fires_and_the_others_still_do() -> None:
    fired: list[str] = []
    later = threading.Event()
    schedule(0.05, fired.append, "cancelled").cancel()
    schedule(0.15, lambda: (fired.append("kept"), later.set()))
    assert later.wait(5)
    time.sleep(0.1)
    assert fired == ["kept"]


def test_a_slow_callback_delays_no_other_deadline() -> None:
    # A kill that blocks on the daemon runs on a thread of its own.
    release = threading.Event()
    quick = threading.Event()
    schedule(0.01, release.wait, 5)
    start = time.monotonic()
    schedule(0.1, quick.set)
    assert quick.wait(5)
    assert time.monotonic() - start < 2
    release.set()


def test_thousands_of_cancelled_deadlines_do_not_pile_up() -> None:
    from verify_cli.sandbox.plumbing import deadlines
    for _ in range(10_000):
        schedule(3600, print).cancel()
    assert len(deadlines._KEEPER._heap) <= 4096 + 16


def test_a_forked_child_keeps_deadlines_of_its_own_never_its_parents() -> None:
    fired: list[str] = []
    pending = schedule(0.3, fired.append, "parent's")  # the parent's keeper thread runs
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child reports by its exit status)
        mine = threading.Event()
        schedule(0.05, mine.set)
        ok = mine.wait(5)
        time.sleep(0.4)  # past the parent's deadline
        os._exit(0 if ok and fired == [] else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    pending.cancel()
