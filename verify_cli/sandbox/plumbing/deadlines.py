"""One thread that keeps every pending deadline of the process, instead of a thread per timer.

``threading.Timer`` starts a thread for every deadline it keeps. A docker run arms two or three
(the copy limit, the wall limit, the time to collect its results), and starting a thread costs
its caller about a quarter of a millisecond of CPU on a busy machine, most of it waiting for the
new thread to be scheduled: on a warm ``calls`` run that is a few percent of the run.
:func:`schedule` keeps the deadline in a heap served by one daemon thread, started the first
time it is needed. A deadline that fires runs its callback on a thread of its own (a kill may
block on the daemon), so that one slow callback never delays another deadline.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from verify_cli.sandbox.plumbing.levers import lever_on


class Deadline:
    """One scheduled callback; :meth:`cancel` before it fires and it never runs."""

    __slots__ = ("_args", "_fn", "cancelled", "when")

    def __init__(self, when: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.when = when
        self._fn = fn
        self._args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        if not self.cancelled:
            threading.Thread(target=self._fn, args=self._args, daemon=True,
                             name="verify-deadline").start()


class _Keeper:
    def __init__(self) -> None:
        self._order = itertools.count()
        self._reset()

    def _reset(self) -> None:
        """A fresh keeper's state (also a forked child's: its parent's lock may have been held
        by another thread at the fork, and its parent's deadlines, like a ``Timer``'s thread,
        are not the child's)."""
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Deadline]] = []
        self._thread: threading.Thread | None = None
        self._pushed = 0

    def schedule(self, seconds: float, fn: Callable[..., Any], args: tuple[Any, ...]) -> Deadline:
        deadline = Deadline(time.monotonic() + seconds, fn, args)
        with self._cond:
            heapq.heappush(self._heap, (deadline.when, next(self._order), deadline))
            self._pushed += 1
            if self._pushed % 4096 == 0:  # cancelled deadlines far off would pile up: drop them
                self._heap = [item for item in self._heap if not item[2].cancelled]
                heapq.heapify(self._heap)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True, name="verify-deadlines")
                self._thread.start()
            elif self._heap and self._heap[0][2] is deadline:
                self._cond.notify()  # a new earliest deadline
        return deadline

    def _serve(self) -> None:
        while True:
            due: list[Deadline] = []
            with self._cond:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    due.append(heapq.heappop(self._heap)[2])
                if not due:
                    self._cond.wait(self._heap[0][0] - now)
                    continue
            for deadline in due:
                deadline.fire()


_KEEPER = _Keeper()
os.register_at_fork(after_in_child=_KEEPER._reset)


def schedule(seconds: float, fn: Callable[..., Any], *args: Any) -> Deadline:
    """Run ``fn(*args)`` in ``seconds`` (on a thread of its own) unless cancelled first."""
    return _KEEPER.schedule(seconds, fn, args)


def arm(seconds: float, fn: Callable[..., Any], *args: Any) -> Deadline | threading.Timer:
    """:func:`schedule`, or a started ``threading.Timer`` with the lever ``docker-host-threads``
    off (the docker host's deadlines before it)."""
    if lever_on("docker-host-threads"):
        return schedule(seconds, fn, *args)
    timer = threading.Timer(seconds, fn, args=args)
    timer.daemon = True
    timer.start()
    return timer


__all__ = ["Deadline", "arm", "schedule"]
