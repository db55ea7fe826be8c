"""The ``local`` executor: today's pool, threads over one sandbox backend on this machine."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping

from verify_cli.executors.base import Executor, ResultCallback
from verify_cli.grading.grader import Grader, GradeRequest, GradeResult
from verify_cli.sandbox.base import RuntimeLayer, Sandbox
from verify_cli.sandbox.registry import SandboxSpec, create_sandbox, sandbox_spec
from verify_cli.sandbox.sessions.base import Session, SessionLimits, Workspace


class LocalExecutor(Executor):
    """Grades on ``jobs`` threads here, through :meth:`Grader.grade_many` (streaming, at most
    ``2 * jobs`` requests in flight). Owns the sandbox it creates from ``spec`` (a backend name,
    or a :class:`SandboxSpec` with its options) and the Grader's warm workers; or grades in
    ``sandbox``, which stays the caller's."""

    name = "local"

    def __init__(self, spec: SandboxSpec | str = "auto", *, warm: bool = True,
                 sandbox: Sandbox | None = None) -> None:
        if sandbox is not None:
            self.spec = SandboxSpec(sandbox.name)
            self.sandbox = sandbox
        else:
            self.spec = sandbox_spec(spec) if isinstance(spec, str) else spec
            self.sandbox = create_sandbox(self.spec)
        self._owns_sandbox = sandbox is None
        if self._owns_sandbox:
            self.sandbox.start()
        self.grader = Grader(self.sandbox, warm=warm)

    @property
    def backend(self) -> str:
        return self.sandbox.name

    @property
    def warnings(self) -> list[str]:
        return [self.spec.warning] if self.spec.warning else []

    def cache_identity(self, image: str | None) -> str:
        return self.sandbox.cache_identity(image)

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

    def open_session(self, workspace: Workspace = None, limits: SessionLimits | None = None, *,
                     env: Mapping[str, str] | None = None, image: str | None = None,
                     labels: Mapping[str, str] | None = None, avoid: Collection[str] = (),
                     layer: RuntimeLayer | None = None) -> Session:
        """A session of this executor's sandbox (one machine: ``avoid`` changes nothing)."""
        return self.sandbox.open_session(workspace, limits, env=env, image=image, labels=labels, layer=layer)

    def close(self) -> None:
        self.grader.close()
        if self._owns_sandbox:
            self.sandbox.close()
