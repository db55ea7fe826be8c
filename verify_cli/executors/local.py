"""The ``local`` executor: today's pool, threads over one sandbox backend on this machine."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from verify_cli.executors.base import Executor, ResultCallback
from verify_cli.grading.grader import Grader, GradeRequest, GradeResult
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.registry import create_sandbox


class LocalExecutor(Executor):
    """Grades on ``jobs`` threads here, through :meth:`Grader.grade_many` (streaming, at most
    ``2 * jobs`` requests in flight). Owns the sandbox it creates and the Grader's warm workers."""

    name = "local"

    def __init__(self, backend: str, *, pool_size: int = 2, warm: bool = True,
                 sandbox: Sandbox | None = None, docker_mode: str = "node") -> None:
        self._backend = backend
        self.sandbox = (sandbox if sandbox is not None
                        else create_sandbox(backend, pool_size=pool_size, mode=docker_mode))
        self._owns_sandbox = sandbox is None
        if self._owns_sandbox:
            self.sandbox.start()
        self.grader = Grader(self.sandbox, warm=warm)

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def isolation(self) -> str:
        return self.sandbox.isolation

    def facts(self) -> dict[str, object]:
        return self.sandbox.facts()

    def grade_many(self, requests: Iterable[GradeRequest], *, jobs: int = 2,
                   on_result: ResultCallback | None = None) -> Iterator[GradeResult]:
        return self.grader.grade_many(requests, jobs=jobs, on_result=on_result)

    def grade(self, request: GradeRequest) -> GradeResult:
        return self.grader.grade(request)

    def reserve(self, jobs: int) -> None:
        self.grader.reserve(jobs)

    def close(self) -> None:
        self.grader.close()
        if self._owns_sandbox:
            self.sandbox.close()
