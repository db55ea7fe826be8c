"""What grading code needs from whatever runs its requests: a stream of results.

:class:`~verify_cli.grading.Grader` is one (threads in this process); the executors of
:mod:`verify_cli.executors` are others (the same Grader, or a Ray cluster). Checks take a
:class:`BatchGrader` so that the same check runs on any of them unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from verify_cli.grading.grader import GradeRequest, GradeResult


class BatchGrader(Protocol):
    def grade_many(self, requests: Iterable[GradeRequest], *, jobs: int = 2,
                   on_result: Callable[[GradeResult], None] | None = None) -> Iterator[GradeResult]:
        """Grade ``requests``, yielding each result as it completes (in completion order), with
        bounded work in flight; ``on_result`` sees each result before it is yielded."""
        ...

    def grade(self, request: GradeRequest) -> GradeResult:
        """Grade one request and wait for its result."""
        ...

    def reserve(self, jobs: int) -> None:
        """Get ready to grade ``jobs`` requests at once (warm pools sized ahead)."""
        ...

    async def agrade(self, request: GradeRequest) -> GradeResult:
        """Grade one request without blocking the event loop."""
        ...
