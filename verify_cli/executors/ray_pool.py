"""The sandbox-pool actor: one per node, holding that node's sandbox backend, warm workers and
unpacked task folders, running at most ``slots`` sandboxes at once, and the sessions opened on
this node (:class:`~verify_cli.executors.ray_sessions.SessionHost`).

A plain class here (importing this module does not import Ray); :mod:`verify_cli.executors.
ray_executor` makes it an actor with ``ray.remote`` and pins one to each node.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from verify_cli._version import __version__
from verify_cli.executors.ray_sessions import SessionHost
from verify_cli.executors.shipping import TaskBundle, TaskDepot
from verify_cli.grading.grader import Grader, GradeRequest, GradeResult
from verify_cli.sandbox.registry import AUTO, SandboxSpec, create_sandbox, sandbox_spec


class SandboxPool(SessionHost):
    """Grades requests on this node in one backend, ``slots`` at a time (more calls wait here).
    ``spec`` is the driver's, unchanged; an ``auto`` in it is resolved here."""

    def __init__(self, spec: SandboxSpec, slots: int, node: str, *, warm: bool = True) -> None:
        self.node = node
        self.slots = max(1, slots)
        if spec.backend == AUTO:
            spec = sandbox_spec(AUTO, spec.config.as_kwargs())
        self.warning = spec.warning
        self.box = create_sandbox(spec)
        self.backend = self.box.name
        self.box.start()
        self.grader = Grader(self.box, warm=warm)
        self.grader.reserve(self.slots)  # the warm workers serve ``slots`` runs at once
        self.threads = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="sandbox-slot")
        self.depot = TaskDepot(Path(tempfile.mkdtemp(prefix="verify-cli-tasks-")))
        self._slots: asyncio.Semaphore | None = None
        self.running = 0
        self.waiting = 0
        self.done = 0
        self.peak = 0  # the most sandboxes this actor ever ran at once
        self.sessions = {}

    def cache_identity(self, image: str | None) -> str:
        return self.box.cache_identity(image)

    def describe(self) -> dict[str, Any]:
        return {"node": self.node, "host": socket.gethostname(), "pid": os.getpid(), "version": __version__,
                "backend": self.backend, "isolation": self.box.isolation, "slots": self.slots,
                "warning": self.warning or ""}

    def stats(self) -> dict[str, Any]:
        return {"node": self.node, "backend": self.backend, "slots": self.slots, "running": self.running,
                "waiting": self.waiting, "done": self.done, "peak": self.peak, "sessions": len(self.sessions)}

    async def grade(self, request: GradeRequest, content_hash: str, bundle: list[Any]) -> GradeResult:
        """Grade ``request`` here. ``bundle`` is ``[ObjectRef of the TaskBundle]``, fetched only
        the first time this node sees ``content_hash``."""
        if not self.depot.has(content_hash):
            task_bundle: TaskBundle = await bundle[0]
            await asyncio.to_thread(self.depot.add, task_bundle)
        local = replace(request, task=self.depot.localise(request.task, content_hash))
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.slots)
        self.waiting += 1
        async with self._slots:
            self.waiting -= 1
            self.running += 1
            self.peak = max(self.peak, self.running)
            try:
                result = await asyncio.get_running_loop().run_in_executor(self.threads, self.grader.grade, local)
            finally:
                self.running -= 1
                self.done += 1
        return replace(result, node=self.node)

    def shutdown(self) -> None:
        self.close_sessions()
        self.grader.close()
        self.box.close()
        self.threads.shutdown(wait=False)
        self.depot.close()
