"""The one generation -> grading loop: each completion is graded as soon as the backend yields it.

Generation runs in the caller's thread, pulling completions from the backend's stream
(:meth:`~verify_cli.models.base.ModelBackend.generate_stream`, or several chained); every
completion goes straight to a pool of ``jobs`` grading threads, so the sandboxes work while the
model keeps generating. ``backlog`` bounds the gradings in flight (a slow sandbox then slows
generation down rather than piling up work); None lets generation run ahead of grading.
What is left of grading after the last completion is the round's grading tail.

Every graded item is handed back in the caller's thread (``on_graded``), so the caller's
bookkeeping needs no lock. When the backend fails, what is already in flight is still graded and
handed back before the error propagates (an interrupted run keeps what it paid for); when a
grading raises, generation stops and the error propagates.
"""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TypeVar

from verify_cli.models.base import Completion

Key = TypeVar("Key")
Item = TypeVar("Item")
Graded = TypeVar("Graded")


@dataclass
class StreamTiming:
    """Where one round of generation and grading spent its time."""

    generation_s: float = 0.0  # inside the backend
    grading_tail_s: float = 0.0  # waiting for grading after the last completion
    completions: int = 0


def generate_and_grade(completions: Iterable[tuple[Key, Completion]], *,
                       arrive: Callable[[Key, Completion, float], Item], grade: Callable[[Item], Graded],
                       jobs: int, on_graded: Callable[[Item, Graded], None] | None = None,
                       backlog: int | None = None, name: str = "grade") -> StreamTiming:
    """Pull ``(key, completion)`` pairs from ``completions`` (a backend's stream: generation
    happens as it is read) and grade each as it arrives.

    ``arrive(key, completion, seconds the backend took for it)`` makes the work item
    (in the caller's thread, in generation order); ``grade(item)`` runs on a grading thread;
    ``on_graded(item, graded)`` runs in the caller's thread, in completion order.
    """
    timing = StreamTiming()
    jobs = max(1, jobs)
    pending: dict[Future[Graded], Item] = {}
    # Gradings that finished, in the order they finished (no scan of everything in flight).
    finished: queue.SimpleQueue[Future[Graded]] = queue.SimpleQueue()

    def hand_back(done: Iterable[Future[Graded]]) -> None:
        for fut in list(done):
            item = pending.pop(fut)
            graded = fut.result()  # a grading that raised stops the round here
            if on_graded is not None:
                on_graded(item, graded)

    def hand_back_finished(*, block: bool) -> None:
        done = [finished.get()] if block else []
        with contextlib.suppress(queue.Empty):
            while True:
                done.append(finished.get_nowait())
        hand_back(done)

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix=name)
    try:
        stream = iter(completions)
        try:
            while True:
                t0 = time.monotonic()
                try:
                    key, completion = next(stream)
                except StopIteration:
                    timing.generation_s += time.monotonic() - t0
                    break
                dt = time.monotonic() - t0
                timing.generation_s += dt
                timing.completions += 1
                item = arrive(key, completion, dt)
                hand_back_finished(block=False)
                while backlog is not None and len(pending) >= backlog:
                    hand_back_finished(block=True)
                fut = pool.submit(grade, item)
                pending[fut] = item
                fut.add_done_callback(finished.put)
        except Exception:
            # The backend (or a grading) failed: keep what is graded, then let the error go on.
            wait(pending)
            with contextlib.suppress(Exception):
                hand_back(f for f in pending if f.exception() is None)
            raise
        tail_start = time.monotonic()
        while pending:
            hand_back_finished(block=True)
        timing.grading_tail_s = time.monotonic() - tail_start
    finally:
        # Ctrl-C or an error: gradings not yet begun are dropped, those running are waited for.
        pool.shutdown(wait=True, cancel_futures=True)
    return timing
