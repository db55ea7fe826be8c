"""Removing containers: of this process (in the background, off the runs' clock) and orphans of
crashed verify-cli processes (by label)."""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from docker.errors import APIError

from verify_cli.sandbox.docker.containers import LABEL, OWNER_LABEL
from verify_cli.sandbox.docker.errors import short


def reap_containers(client: Any, *, older_than_s: float = 0.0,
                    orphans_only: bool = False) -> list[str]:
    """Remove containers labelled ``verify-cli=1`` created at least ``older_than_s`` ago.

    With ``orphans_only``, only those whose creating process (on this host) is gone: what a crashed
    run left behind, never another live verify-cli's containers. Returns the removed ids.
    """
    api = getattr(client, "api", client)
    now = time.time()
    host = socket.gethostname()
    removed: list[str] = []
    for info in api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        if now - float(info.get("Created", 0)) < older_than_s:
            continue
        if orphans_only:
            owner_host, _, pid = (info.get("Labels") or {}).get(OWNER_LABEL, "").partition("/")
            if owner_host != host or not pid.isdigit() or process_alive(int(pid)):
                continue
        with contextlib.suppress(APIError):
            api.remove_container(info["Id"], force=True)
            removed.append(info["Id"])
    return removed


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Reaper:
    """Removes used containers (already dead) on a background thread, off the runs' clock.

    A used container is *deferred*; the next ``run`` hands the deferred ones to the thread as it
    starts and waits for them before it returns (they overlap its own work), so between runs no
    removal of ours is in flight for a tool listing containers to trip over. Deferred containers
    of an idle sandbox go after ``LINGER_S``. ``drain`` (``close``, interpreter exit) removes
    everything; a container that still cannot be removed keeps its owner label, which
    ``reap_containers(orphans_only=True)`` finds once this process is gone.
    """

    LINGER_S = 5.0

    def __init__(self, remove: Callable[[str], None]) -> None:
        self._remove = remove
        self._cond = threading.Condition()
        self._deferred: deque[tuple[str, float]] = deque()
        self._queue: deque[str] = deque()
        self._queued = 0  # containers ever handed to the thread
        self._done = 0  # of those, the ones it has finished with (in order)
        self._thread: threading.Thread | None = None
        self._hooked = False
        self.last_error = ""

    def put(self, container_id: str) -> None:
        with self._cond:
            self._deferred.append((container_id, time.monotonic()))
            if not self._hooked:
                atexit.register(self._at_exit)
                self._hooked = True
            self._wake()

    def flush(self) -> int:
        """Hand every deferred container to the thread; a ticket for :meth:`wait_done`."""
        with self._cond:
            self._release(len(self._deferred))
            return self._queued

    def _release(self, count: int) -> None:
        for _ in range(count):
            self._queue.append(self._deferred.popleft()[0])
            self._queued += 1
        self._wake()

    def _wake(self) -> None:
        if self._thread is None and (self._queue or self._deferred):
            self._thread = threading.Thread(target=self._loop, daemon=True,
                                            name="verify-docker-reaper")
            self._thread.start()
        self._cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    now = time.monotonic()
                    ripe = sum(1 for _, t in self._deferred if now - t >= self.LINGER_S)
                    if ripe:
                        self._release(ripe)
                        continue
                    if not self._deferred:
                        self._thread = None
                        self._cond.notify_all()
                        return
                    self._cond.wait(self.LINGER_S - (now - self._deferred[0][1]))
                container_id = self._queue.popleft()
            try:
                self._remove(container_id)
            except Exception as e:  # never let one failure stop the removals behind it
                self.last_error = short(e)
            finally:
                with self._cond:
                    self._done += 1
                    self._cond.notify_all()

    def wait_done(self, ticket: int, timeout_s: float) -> bool:
        """Wait until the containers handed over up to ``ticket`` are dealt with."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._done < ticket:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nothing handed over is left to remove (deferred ones may remain)."""
        with self._cond:
            ticket = self._queued
        return self.wait_done(ticket, timeout_s)

    def drain(self, timeout_s: float) -> None:
        self.wait_done(self.flush(), timeout_s)
        with self._cond:
            left = list(self._queue) + [cid for cid, _ in self._deferred]
            self._queue.clear()
            self._deferred.clear()
            if self._hooked:
                atexit.unregister(self._at_exit)
                self._hooked = False
        for container_id in left:  # the thread is stuck: remove them here
            with contextlib.suppress(Exception):
                self._remove(container_id)

    def _at_exit(self) -> None:
        self.drain(30.0)
