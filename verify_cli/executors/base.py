"""The executor interface: where a stream of grade requests runs (this machine, a Ray cluster)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING

from verify_cli.errors import ExitCode, VerifyError
from verify_cli.grading.grader import GradeRequest, GradeResult

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from verify_cli.sandbox.base import RuntimeLayer
    from verify_cli.sandbox.sessions.base import Session, SessionLimits, Workspace

ResultCallback = Callable[[GradeResult], None]

DISTRIBUTED_HINT = "pip install 'verify-cli[distributed]' (on the driver and on every node)"


class ExecutorUnavailableError(VerifyError):
    """An executor was asked for that cannot run here (Ray not installed, no cluster answers)."""

    exit_code = ExitCode.INFRA


class ClusterError(VerifyError):
    """The cluster failed while grading (every node drained): nothing more can be concluded."""

    exit_code = ExitCode.INFRA


def import_ray() -> ModuleType:
    """Ray, imported on first use; a clear error when the ``distributed`` extra is missing."""
    try:
        import ray
    except ImportError as e:
        raise ExecutorUnavailableError(f"the ray executor needs Ray, which is not installed ({e})",
                                       hint=DISTRIBUTED_HINT) from None
    return ray


@dataclass
class ExecutorStats:
    """What happened on a cluster so far: runs per node, re-queued runs, drained nodes."""

    completed: int = 0
    requeued: int = 0
    lost: int = 0
    actor_restarts: int = 0
    per_node: Counter[str] = field(default_factory=Counter)
    drained: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)


class Executor(ABC):
    """Runs grade requests and streams their results back; a :class:`~verify_cli.grading.batch.
    BatchGrader`, so every check takes one in place of a Grader.

    ``backend`` and ``isolation`` describe the sandboxes the runs use (for reports);
    :meth:`facts`, :attr:`warnings`, :attr:`stats` and :meth:`cache_identity` what a command
    reports and caches about them, whatever the executor.
    Use as a context manager, or call :meth:`close`.
    """

    name: str = ""

    @property
    @abstractmethod
    def backend(self) -> str: ...

    @property
    @abstractmethod
    def isolation(self) -> str: ...

    def facts(self) -> dict[str, object]:
        """What a report records about the sandboxes beyond backend and isolation (image digests,
        containers); default: nothing."""
        return {}

    @property
    def warnings(self) -> list[str]:
        """What the user should know about how this executor grades (``auto`` fell back to
        ``process``, a node was left out, a local Ray instance was started); default: nothing."""
        return []

    @property
    def stats(self) -> ExecutorStats | None:
        """Where the runs went and what was re-queued or drained (a cluster); None: one machine."""
        return None

    @abstractmethod
    def cache_identity(self, image: str | None) -> str:
        """What a cached verdict of a run here on ``image`` depends on beyond the task's content
        (:meth:`verify_cli.sandbox.base.Sandbox.cache_identity` of the sandboxes that run it)."""

    @abstractmethod
    def grade_many(self, requests: Iterable[GradeRequest], *, jobs: int = 2,
                   on_result: ResultCallback | None = None) -> Iterator[GradeResult]:
        """Grade ``requests``, yielding results in completion order with bounded work in flight
        (the request iterable is drained only as capacity frees: backpressure). Safe to call
        from several threads at once."""

    def grade(self, request: GradeRequest) -> GradeResult:
        """Grade one request and wait for its result."""
        return next(iter(self.grade_many([request], jobs=1)))

    def reserve(self, jobs: int) -> None:  # noqa: B027 - optional hook, deliberately a no-op
        """Get ready to grade ``jobs`` requests at once. Default: nothing (the executor sizes
        itself)."""

    async def agrade(self, request: GradeRequest) -> GradeResult:
        """:meth:`grade` for asyncio callers (the waiting happens in a worker thread)."""
        return await asyncio.to_thread(self.grade, request)

    async def agrade_many(self, requests: Iterable[GradeRequest], *, jobs: int = 2) -> AsyncIterator[GradeResult]:
        """:meth:`grade_many` for asyncio callers: results arrive as they complete."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[GradeResult | None, BaseException | None]] = asyncio.Queue()
        stop = threading.Event()

        def pump() -> None:
            try:
                for result in self.grade_many(requests, jobs=jobs):
                    loop.call_soon_threadsafe(queue.put_nowait, (result, None))
                    if stop.is_set():
                        break
            except BaseException as e:  # handed to the consumer, re-raised there
                loop.call_soon_threadsafe(queue.put_nowait, (None, e))
            else:
                loop.call_soon_threadsafe(queue.put_nowait, (None, None))

        worker = asyncio.ensure_future(asyncio.to_thread(pump))
        try:
            while True:
                result, error = await queue.get()
                if error is not None:
                    raise error
                if result is None:
                    break
                yield result
        finally:
            stop.set()
            with contextlib.suppress(BaseException):
                await worker

    def open_session(self, workspace: Workspace = None, limits: SessionLimits | None = None, *,
                     env: Mapping[str, str] | None = None, image: str | None = None,
                     labels: Mapping[str, str] | None = None, avoid: Collection[str] = (),
                     layer: RuntimeLayer | None = None) -> Session:
        """A session (:mod:`verify_cli.sandbox.sessions`) in this executor's sandboxes, as
        :meth:`Sandbox.open_session <verify_cli.sandbox.base.Sandbox.open_session>` opens one;
        the caller closes it. Where the executor has several nodes the session lives on one
        (:attr:`Session.node` names it, least loaded first, ``avoid`` naming nodes to pass over
        where another can take it). Default: SessionsUnsupportedError."""
        from verify_cli.sandbox.sessions.base import SessionsUnsupportedError

        raise SessionsUnsupportedError(f"the {self.name or type(self).__name__} executor cannot open sessions",
                                       hint="use --executor local or ray")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the executor holds (sandboxes, warm workers, cluster actors)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
