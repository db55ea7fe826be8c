"""The session contract: a sandbox that lives for an episode, driven one command at a time.

A :class:`Session` is opened by :meth:`Sandbox.open_session
<verify_cli.sandbox.base.Sandbox.open_session>` over a starting workspace and
:class:`SessionLimits`. Its state (files, installed packages, built artefacts) persists from one
call to the next and never reaches another session. Every call on one session is serialized (a
session is safe to share between threads, and its asyncio forms run the sync ones in a thread).

What a command does to its own session is the command's fault: a session whose exec server died
(the command killed it, ran it out of memory, or its sandbox went away) is *dead*, and every call
after that reports :attr:`ExecVerdict.SESSION_DEAD` (``exec``) or raises
:class:`SessionDeadError` (the file calls). Only a failure of the machinery itself (the sandbox
could not be built, the host ran out of descriptors, the daemon failed) is an infrastructure
failure: :attr:`ExecVerdict.INFRA_ERROR` or :class:`SessionInfraError`, never to be scored.

Exec results are observations for the agent, not evidence for grading: the exec server runs on
the candidate's side and could lie about its own commands. Grading takes :meth:`Session.snapshot`
(plain bytes, bounded, by value) to the trusted grader.
"""

from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

from verify_cli.errors import ExitCode, UsageError, VerifyError
from verify_cli.sandbox.plumbing.captured import CapturedOutput


class ExecVerdict(StrEnum):
    """How one command of a session ended.

    ``session_dead``: the session died (before or during the command) because of what ran in it;
    a graded failure, never infrastructure. ``infra_error``: the machinery failed; never scored.
    """

    OK = "ok"
    NONZERO_EXIT = "nonzero_exit"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    SIGNAL = "signal"
    SESSION_DEAD = "session_dead"
    INFRA_ERROR = "infra_error"

    @property
    def is_infrastructure(self) -> bool:
        return self is ExecVerdict.INFRA_ERROR


class SessionState(StrEnum):
    """Where a session is in its life."""

    OPEN = "open"
    DEAD = "dead"  # its exec server died because of what ran in it
    RECLAIMED = "reclaimed"  # past its idle or total wall limit: closed by the machinery
    BROKEN = "broken"  # the machinery failed under it (infrastructure)
    CLOSED = "closed"  # closed by its owner


@dataclass(frozen=True)
class SessionLimits:
    """Limits of a session and the defaults of its commands.

    Per session: ``memory_mb`` and ``processes`` (a cgroup where one is writable, else rlimits
    per command), ``disk_bytes`` (the work folder's and ``/tmp``'s size, each a tmpfs, on the
    isolating backends), ``wall_seconds`` (its whole life) and ``idle_seconds`` (how long it may
    sit without a call before it is reclaimed). Per command: ``command_seconds`` (wall),
    ``cpu_seconds`` (None: the command's wall limit; set on the command as it starts, so what
    it forks in its very first moments may miss it: the wall limit, enforced from outside,
    still ends them), ``output_bytes`` (each of stdout and stderr
    is kept as a head and a tail of half that, the cut marked), ``max_output_bytes`` (more on
    either stream stops the command as ``output_limit``) and ``file_bytes`` (the largest file a
    command may write). ``network``: share the host's network (off: loopback only, the
    session's own). tmpfs pages count against the session's memory: a disk filled past the
    memory limit ends in the OOM killer, and may kill the session.
    """

    memory_mb: int = 1024
    processes: int = 128
    disk_bytes: int = 512 * 1024 * 1024
    wall_seconds: float = 3600.0
    idle_seconds: float = 600.0
    command_seconds: float = 60.0
    cpu_seconds: float | None = None
    output_bytes: int = 64 * 1024
    max_output_bytes: int = 16 * 1024 * 1024
    file_bytes: int = 256 * 1024 * 1024
    network: bool = False

    def __post_init__(self) -> None:
        floors = {"memory_mb": 16, "processes": 1, "disk_bytes": 1 << 20, "output_bytes": 2,
                  "max_output_bytes": 2, "file_bytes": 1}
        for name, floor in floors.items():
            if getattr(self, name) < floor:
                raise UsageError(f"session limit {name} is {getattr(self, name)}, below {floor}",
                                 hint=f"give {name} >= {floor}")
        for name in ("wall_seconds", "idle_seconds", "command_seconds", "cpu_seconds"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise UsageError(f"session limit {name} is {value}; it must be above 0",
                                 hint=f"give {name} > 0")


@dataclass(frozen=True)
class ExecResult:
    """What one command of a session did. ``stdout``/``stderr`` are bounded (head and tail);
    :meth:`CapturedOutput.text` shows the cut with a marker saying how many bytes were left out."""

    verdict: ExecVerdict
    exit_code: int | None = None
    signal: int | None = None
    stdout: CapturedOutput = field(default_factory=CapturedOutput)
    stderr: CapturedOutput = field(default_factory=CapturedOutput)
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict is ExecVerdict.OK

    def to_dict(self) -> dict[str, object]:
        return {"verdict": self.verdict.value, "exit_code": self.exit_code, "signal": self.signal,
                "stdout": self.stdout.to_dict(), "stderr": self.stderr.to_dict(),
                "wall_seconds": round(self.wall_seconds, 4),
                "cpu_seconds": round(self.cpu_seconds, 4), "message": self.message}


@dataclass(frozen=True)
class FileEntry:
    """A file or folder of a session (``path`` relative to the work folder)."""

    path: str
    kind: str  # "file", "dir", "link", "other"
    size: int


class Snapshot(dict[str, bytes]):
    """What :meth:`Session.snapshot` took: regular files by relative path (a plain ``dict``),
    and ``skipped``: the files the globs matched that could not be taken as they are, each with
    why (a name that is not valid UTF-8 cannot be carried to a grader as text). Something an
    agent did to its files is never an infrastructure error: it is left out, and said so."""

    def __init__(self, files: Mapping[str, bytes] | None = None, skipped: Sequence[str] = ()) -> None:
        super().__init__(files or {})
        self.skipped: tuple[str, ...] = tuple(skipped)

    def __reduce__(self) -> tuple[Any, ...]:  # by value across processes (Ray), ``skipped`` too
        return (Snapshot, (dict(self), self.skipped))

    def note(self) -> str:
        """A line telling the agent what was left out ("" when nothing was)."""
        if not self.skipped:
            return ""
        shown = ", ".join(self.skipped[:5]) + (f" and {len(self.skipped) - 5} more" if len(self.skipped) > 5 else "")
        return f"left out (not graded): {shown}"


def encode_text(data: str) -> bytes:
    """A str as the UTF-8 bytes of a file: a lone surrogate that stands for a byte
    (``surrogateescape``) is that byte, any other is replaced; never raises."""
    try:
        return data.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return data.encode("utf-8", "replace")


class SessionError(VerifyError):
    """A session call could not be done."""

    exit_code = ExitCode.INFRA


class SessionDeadError(SessionError):
    """The session is dead (its exec server died because of what ran in it), reclaimed or closed:
    the episode's failure, never infrastructure."""

    def __init__(self, message: str, *, state: SessionState) -> None:
        super().__init__(message)
        self.state = state


class SessionInfraError(SessionError):
    """The machinery failed (the sandbox could not be built, the host ran out of resources):
    never scored."""


class SessionFileError(SessionError):
    """A file call failed inside a live session (no such file, not a regular file, too large):
    an observation for the agent, not a fault of the session."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, *, path: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno


class SessionsUnsupportedError(SessionError):
    """The backend cannot open sessions."""

    exit_code = ExitCode.USAGE


#: What a workspace may be: a host folder (copied in), files by relative path, or nothing.
Workspace = Path | Mapping[str, bytes] | None


#: Threads the asyncio forms run the sync calls in (made as needed): enough for every session
#: in flight on a node to wait on its command at once, unlike asyncio's default executor.
ASYNC_THREADS = 1024
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()
T = TypeVar("T")


def session_executor() -> ThreadPoolExecutor:
    """The executor of the asyncio forms (shared by every session of the process)."""
    global _executor
    from concurrent.futures import ThreadPoolExecutor

    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=ASYNC_THREADS, thread_name_prefix="session-async")
        return _executor


async def in_session_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a sync session call in :func:`session_executor` from a coroutine."""
    import asyncio  # here: importing the sandbox layer does not pay for asyncio

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(session_executor(), functools.partial(fn, *args, **kwargs))


class Session(ABC):
    """One live session. Use it as a context manager, or call :meth:`close`."""

    #: The backend's name.
    backend: str = ""
    #: The work folder as commands see it (their working folder and ``$HOME``).
    workdir: str = "/workspace"
    #: The cluster node the session lives on (``ip/node id``); empty: this machine.
    node: str = ""

    @property
    @abstractmethod
    def state(self) -> SessionState:
        """Where the session is in its life."""

    @property
    def alive(self) -> bool:
        return self.state is SessionState.OPEN

    @abstractmethod
    def exec(self, command: str | Sequence[str], *, timeout: float | None = None,
             stdin: bytes | None = None, env: Mapping[str, str] | None = None,
             cwd: str | None = None, output_bytes: int | None = None) -> ExecResult:
        """Run ``command`` (a string: through ``bash -c``, else ``sh -c``; a list: as argv) in
        the session and wait for it. ``timeout`` (seconds) and ``output_bytes`` (kept of each
        stream) default to the session's limits; ``env`` is added to the session's environment;
        ``cwd`` defaults to the work folder. Never raises for the command's faults nor for a dead
        session (``session_dead``). Processes the command leaves behind are killed when it ends:
        nothing runs between calls."""

    @abstractmethod
    def read_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        """A file's bytes (``path`` relative to the work folder, or absolute inside the
        session). SessionFileError when it cannot be read or holds more than ``max_bytes``."""

    @abstractmethod
    def write_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        """Write a file (its folders made as needed), replacing what was there."""

    @abstractmethod
    def list_files(self, path: str = ".", *, recursive: bool = True,
                   max_entries: int = 10000) -> list[FileEntry]:
        """The files and folders under ``path`` (links not followed), sorted by path."""

    @abstractmethod
    def snapshot(self, globs: Sequence[str] = ("**",), *,
                 max_bytes: int = 64 * 1024 * 1024) -> dict[str, bytes]:
        """Regular files of the work folder whose relative path matches one of ``globs``
        (``*``, ``?``, ``**`` across folders), by relative path. Links and special files are
        never taken; nor are files whose names are not valid UTF-8 (a :class:`Snapshot` says
        which in ``skipped``). SessionFileError when they hold more than ``max_bytes``."""

    @abstractmethod
    def close(self) -> None:
        """End the session and everything in it; idempotent, never raises."""

    # --- asyncio forms: the sync calls, in a thread of session_executor() --------------------
    async def aexec(self, command: str | Sequence[str], *, timeout: float | None = None,
                    stdin: bytes | None = None, env: Mapping[str, str] | None = None,
                    cwd: str | None = None, output_bytes: int | None = None) -> ExecResult:
        return await in_session_thread(self.exec, command, timeout=timeout, stdin=stdin, env=env,
                                       cwd=cwd, output_bytes=output_bytes)

    async def aread_file(self, path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        return await in_session_thread(self.read_file, path, max_bytes=max_bytes)

    async def awrite_file(self, path: str, data: bytes | str, *, mode: int = 0o644) -> None:
        await in_session_thread(self.write_file, path, data, mode=mode)

    async def alist_files(self, path: str = ".", *, recursive: bool = True,
                          max_entries: int = 10000) -> list[FileEntry]:
        return await in_session_thread(self.list_files, path, recursive=recursive,
                                       max_entries=max_entries)

    async def asnapshot(self, globs: Sequence[str] = ("**",), *,
                        max_bytes: int = 64 * 1024 * 1024) -> dict[str, bytes]:
        return await in_session_thread(self.snapshot, globs, max_bytes=max_bytes)

    async def aclose(self) -> None:
        await in_session_thread(self.close)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()


__all__ = ["ExecResult", "ExecVerdict", "FileEntry", "Session", "SessionDeadError", "SessionError",
           "SessionFileError", "SessionInfraError", "SessionLimits", "SessionState",
           "SessionsUnsupportedError", "Snapshot", "Workspace", "encode_text"]
