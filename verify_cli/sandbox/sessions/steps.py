"""How a session's exec waits: its steps run in a thread (:func:`run_steps`, waits by poll) or on
the running event loop (:func:`drive_steps`, waits by the loop's own watch of an epoll set, the
blocking steps in :func:`~verify_cli.sandbox.sessions.base.session_executor`), and the session's
lock that an :meth:`~verify_cli.sandbox.sessions.client.ServerSession.aexec` holds across its
awaits. Split from :mod:`verify_cli.sandbox.sessions.client`, which builds the steps."""

from __future__ import annotations

import contextlib
import functools
import select
import threading
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from verify_cli.sandbox.sessions.base import ExecResult, session_executor

if TYPE_CHECKING:
    import asyncio


def ready(fds: Sequence[int], timeout: float, events: int = select.POLLIN) -> list[int]:
    poller = select.poll()
    for fd in fds:
        poller.register(fd, events | select.POLLHUP | select.POLLERR)
    return [fd for fd, _ in poller.poll(max(0.0, timeout) * 1000)]



class Wait:
    """An exec's step: until one of ``fds`` is readable (or hung up), or ``timeout`` seconds."""

    __slots__ = ("fds", "timeout")

    def __init__(self, fds: list[int], timeout: float) -> None:
        self.fds = fds
        self.timeout = timeout


class Blocking:
    """An exec's step that may block (kill, sweep, end the session): ``fn(*args)``."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.fn = fn
        self.args = args


Step = Wait | Blocking


def run_steps(steps: Generator[Step, Any, ExecResult]) -> ExecResult:
    """An exec's steps in this thread: waits by poll, blocking calls inline."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as stop:
            result: ExecResult = stop.value
            return result
        value, error = None, None
        try:
            value = ready(step.fds, step.timeout) if isinstance(step, Wait) else step.fn(*step.args)
        except BaseException as e:  # raised where the step was taken, as a plain call would
            error = e


async def drive_steps(steps: Generator[Step, Any, ExecResult]) -> ExecResult:
    """An exec's steps on the running event loop: waits by the loop's own watch, blocking calls
    in :func:`session_executor` (the loop never waits on them).

    The descriptors are watched through an epoll set of the exec's own, which the loop watches
    as one descriptor: each wait costs one look at that set (none of the loop's when something
    is ready already), and a descriptor closed meanwhile (the session ended by another thread)
    simply leaves the set, never the loop's table."""
    import asyncio

    loop = asyncio.get_running_loop()
    watch = Watch(loop)
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                step = steps.throw(error) if error is not None else steps.send(value)
            except StopIteration as stop:
                result: ExecResult = stop.value
                return result
            value, error = None, None
            try:
                if isinstance(step, Wait):
                    value = await watch.ready(step.fds, step.timeout)
                else:
                    watch.pause()  # output still pending must not keep waking the loop meanwhile
                    try:
                        value = await loop.run_in_executor(session_executor(),
                                                           functools.partial(step.fn, *step.args))
                    finally:
                        watch.resume()
            except Exception as e:  # raised where the step was taken, as in a thread's exec
                error = e
    finally:
        steps.close()  # cancelled mid-command: its descriptors are closed
        watch.close()


class Watch:
    """The descriptors one exec waits on, in an epoll set that the event loop watches."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.epoll = select.epoll()
        self.known: set[int] = set()
        self.woken: asyncio.Future[None] | None = None
        self.watched = False
        self.resume()

    def resume(self) -> None:
        """The loop watches the set (level-triggered: only while the exec waits or computes)."""
        if not self.watched:
            self.loop.add_reader(self.epoll.fileno(), self._wake)
            self.watched = True

    def pause(self) -> None:
        if self.watched:
            self.loop.remove_reader(self.epoll.fileno())
            self.watched = False

    def _wake(self) -> None:
        if self.woken is not None and not self.woken.done():
            self.woken.set_result(None)

    def _look(self, fds: list[int]) -> list[int]:
        wanted = set(fds)
        return [fd for fd, _ in self.epoll.poll(0) if fd in wanted]

    async def ready(self, fds: list[int], timeout: float) -> list[int]:
        """The descriptors of ``fds`` readable (or hung up), waiting at most ``timeout`` s."""
        wanted = set(fds)
        for fd in self.known - wanted:  # no longer waited on: out, lest it keep waking the loop
            with contextlib.suppress(OSError):  # gone already if it was closed
                self.epoll.unregister(fd)
        for fd in wanted - self.known:
            # level-triggered; a descriptor closed meanwhile leaves the set by itself
            self.epoll.register(fd, select.EPOLLIN)
        self.known = wanted
        ready = self._look(fds)
        if ready or timeout <= 0:
            return ready
        self.woken = self.loop.create_future()
        timer = self.loop.call_later(timeout, self._wake)
        try:
            await self.woken
        finally:
            timer.cancel()
            self.woken = None
        return self._look(fds)

    def close(self) -> None:
        self.pause()
        self.epoll.close()


def watches_descriptors(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether ``loop`` can watch pipes and sockets (asyncio's selector loops, uvloop)."""
    import asyncio

    return isinstance(loop, asyncio.SelectorEventLoop) or type(loop).__module__.startswith("uvloop")


class SessionLock:
    """A session's lock: re-entrant (its calls nest), and held by an :meth:`ServerSession.aexec`
    across its awaits on the event loop's thread. A sync call of that same thread meanwhile
    would re-enter it and talk over the command: it is refused (RuntimeError) instead of
    corrupting the session; from any other thread it waits, as for a thread's exec."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._loop_thread: int | None = None

    def acquire(self, blocking: bool = True) -> bool:
        if not self._lock.acquire(blocking):
            return False
        if self._loop_thread == threading.get_ident():
            self._lock.release()
            if not blocking:  # held by another call, as from another thread
                return False
            raise RuntimeError("a sync call of a session from the thread of the event loop that awaits its "
                               "aexec: await the aexec first (or make the call from another thread)")
        return True

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> SessionLock:
        self.acquire()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def acquire_for_loop(self) -> bool:
        """Take it for an aexec of this thread's loop, without waiting; False when another call
        (of any thread, this loop's other aexecs included) holds it."""
        if self._loop_thread == threading.get_ident() or not self._lock.acquire(blocking=False):
            return False
        self._loop_thread = threading.get_ident()
        return True

    def release_for_loop(self) -> None:
        self._loop_thread = None
        self._lock.release()

    def held_by_loop_here(self) -> bool:
        return self._loop_thread == threading.get_ident()
