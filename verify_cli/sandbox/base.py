"""The sandbox contract: run a command over a folder of files under limits, return a typed verdict.

A backend knows nothing about tasks. It receives a host folder (the work folder), a command and
limits; it names a fresh results folder inside the sandbox through ``$VERIFY_RESULTS_DIR`` and
hands back what the command wrote there. Every backend must be safe to call from many threads.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Literal

from verify_cli.backend_config import BackendConfig
from verify_cli.sandbox.plumbing.captured import CapturedOutput  # re-exported: part of the contract

if TYPE_CHECKING:
    from verify_cli.sandbox.sessions.base import Session, SessionLimits, Workspace

RESULTS_ENV = "VERIFY_RESULTS_DIR"
MAX_RESULT_FILE_BYTES = 16 * 1024 * 1024


class Verdict(StrEnum):
    """How a sandboxed run ended. ``setup_error`` and ``infra_error`` are never the code's fault."""

    OK = "ok"
    NONZERO_EXIT = "nonzero_exit"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    SIGNAL = "signal"
    SETUP_ERROR = "setup_error"
    INFRA_ERROR = "infra_error"

    @property
    def is_infrastructure(self) -> bool:
        return self in (Verdict.SETUP_ERROR, Verdict.INFRA_ERROR)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run."""

    wall_seconds: float = 60.0
    memory_mb: int = 1024
    processes: int = 128
    output_bytes: int = 1024 * 1024
    cpu_seconds: float | None = None  # defaults to the wall limit
    file_bytes: int = 256 * 1024 * 1024  # largest file the run may write


#: The message of a run stopped by its :class:`Cancellation` (an ``infra_error``: never the code's fault).
CANCELLED_MESSAGE = "cancelled: the run was stopped because its caller no longer waits for it"


class Cancellation:
    """A way to stop a run before it ends, from any thread (its caller has gone: a service's
    client hung up). A backend running a :class:`RunSpec` whose ``cancel`` is set kills the
    run's processes at once, frees what the run held and returns ``infra_error`` with
    :data:`CANCELLED_MESSAGE`. Set before the run starts, the run is stopped as it starts.
    Has ``set``/``is_set`` as :class:`threading.Event` has."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._callbacks: list[Callable[[], object]] = []

    def set(self) -> None:
        """Stop the run (the callbacks run on this thread, once)."""
        with self._lock:
            if self._set:
                return
            self._set = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def is_set(self) -> bool:
        return self._set

    def subscribe(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` when the run is cancelled (at once when it is already); returns
        the function that unsubscribes it (call it when the run is over)."""
        with self._lock:
            if not self._set:
                self._callbacks.append(callback)
                return lambda: self._unsubscribe(callback)
        callback()
        return lambda: None

    def _unsubscribe(self, callback: Callable[[], object]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


@dataclass(frozen=True)
class CandidateProcess:
    """A second process of a run, in a sandbox of its own (two-process grading).

    It starts before the run's command, in the work folder with ``hidden`` (work-folder paths:
    the tests, the hidden tests) absent from its view, without the results folder, the harness
    or any variable of the run's command: its environment is the pinned one plus ``env``. Both
    processes get ``VERIFY_CHANNEL``, a socket path in a folder only they share; the run's
    command also gets ``VERIFY_CANDIDATE_EXEC``, the command prefix that runs a program in the
    candidate's sandbox. ``$VERIFY_CANDIDATE_HARNESS`` in the candidate's environment names the
    folder of the candidate-side harness (the servers).
    """

    command: Sequence[str]
    hidden: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    #: Work-folder files holding the candidate's code: where the backend can, the run's
    #: command sees them empty (it reaches the code only through the channel).
    private: tuple[str, ...] = ()
    #: Work-folder files the task ships outside its editable globs and test folders (data the
    #: tests may read): read-only in the candidate's view, each folder above them a mount point
    #: there (so it cannot be renamed away and replaced), so the candidate's processes can
    #: neither rewrite nor swap what the tests read; they can still create files beside them.
    protected: tuple[str, ...] = ()


#: At most this many shipped files are protected (one mount each); a larger tree goes without.
MAX_PROTECTED_FILES = 2048


def protected_mounts(protected: Sequence[str]) -> tuple[list[str], list[str]]:
    """The folders (parents first) and files of :attr:`CandidateProcess.protected` to bind in
    the candidate's view: folders onto themselves, files onto themselves read-only."""
    files = sorted(protected) if len(protected) <= MAX_PROTECTED_FILES else []
    folders = sorted({"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)},
                     key=lambda d: (d.count("/"), d))
    return folders, files


def protected_bind_args(protected: Sequence[str], source: str, dest: str) -> list[str]:
    """bubblewrap's arguments for :func:`protected_mounts`: each folder bound onto itself, then
    each file read-only, from ``source`` (the work folder as the launching process sees it) to
    ``dest`` (the work folder in the candidate's view)."""
    folders, files = protected_mounts(protected)
    args: list[str] = []
    for rel in folders:
        args += ["--bind", f"{source}/{rel}", f"{dest}/{rel}"]
    for rel in files:
        args += ["--ro-bind", f"{source}/{rel}", f"{dest}/{rel}"]
    return args


@dataclass(frozen=True)
class RuntimeLayer:
    """A built environment a local backend shows a run in place of its own interpreter: host
    folders bound read-only at their own paths (``binds``: the environment's prefix and the base
    interpreter it was made over) and the folders put first on the run's PATH (``path``), so
    ``python`` is the environment's. Built by :mod:`verify_cli.environments`; ``identity`` is
    its content address.

    ``root`` (a host folder) is a whole root file system instead: an image's, exported once;
    the run sees its system (``/usr``, ``/etc``, ``/opt``...) in place of the host's and runs its
    interpreter; only backends whose ``runs_over_root`` is true can run over one."""

    identity: str
    binds: tuple[str, ...]
    path: tuple[str, ...]
    root: str | None = None

    def search_path(self, default: str) -> str:
        """The run's PATH: the layer's folders, then ``default`` (the system's)."""
        return ":".join((*self.path, default))


@dataclass(frozen=True)
class RunSpec:
    """One command to run over ``workdir``'s files.

    ``workdir`` is a host folder the caller owns; the sandbox exposes a private, writable view of
    it as the command's working folder (changes may or may not reach the host copy).
    ``image`` names the Docker image; ``runtime`` the local runtime (``python``, ``node``, ``shell``).
    """

    command: Sequence[str]
    workdir: Path
    limits: Limits = field(default_factory=Limits)
    env: Mapping[str, str] = field(default_factory=dict)
    image: str | None = None
    runtime: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    #: Run a candidate process beside the command (two-process grading); only on backends
    #: whose ``two_process`` is true.
    candidate: CandidateProcess | None = None
    #: The task's built environment on a local backend (docker runs ``image``, which is then
    #: the environment's own); None: the backend's own interpreter.
    layer: RuntimeLayer | None = None
    #: Set from another thread to stop the run early (:class:`Cancellation`); None: it runs
    #: to its end or its limits.
    cancel: Cancellation | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RunResult:
    """Evidence of one run: verdict, exit status, timing, output, and the results folder's files."""

    verdict: Verdict
    backend: str
    exit_code: int | None = None
    signal: int | None = None
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    stdout: CapturedOutput = field(default_factory=CapturedOutput)
    stderr: CapturedOutput = field(default_factory=CapturedOutput)
    results: Mapping[str, bytes] = field(default_factory=dict)
    message: str = ""
    #: The content digest (``sha256:...``) of the image the run ran in; None off Docker.
    image_digest: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "verdict": self.verdict.value, "backend": self.backend, "exit_code": self.exit_code,
            "signal": self.signal, "wall_seconds": round(self.wall_seconds, 4),
            "cpu_seconds": round(self.cpu_seconds, 4), "stdout": self.stdout.to_dict(),
            "stderr": self.stderr.to_dict(), "results": sorted(self.results), "message": self.message,
            **({"image_digest": self.image_digest} if self.image_digest else {}),
        }


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here; when not, why and what to install."""

    available: bool
    reason: str = ""
    install_hint: str = ""


@dataclass(frozen=True)
class WarmInvocation:
    """A task command recognised as one job a :class:`WarmHost` can run in a warm interpreter.

    The sandbox does not read it: it hands it to its warm workers, whose harness knows the modes
    (a task kind builds it: :meth:`verify_cli.kinds.base.Kind.warm_invocation`).
    """

    mode: str  # how the worker runs it: "module" (python -m M ARGS), "script", "runner"
    #: The python that runs it, as found on the run's PATH (becomes sys.executable); "" on a
    #: host whose programs are not this machine's (``WarmHost.programs_on_host`` false).
    interpreter: str
    program: str  # the script (mode "script", found on the run's PATH) or module ("runner"), else ""
    argv0: str  # the first word as written
    args: tuple[str, ...]


@dataclass
class WarmStats:
    """Counters of a warm host (read them for reports and tests)."""

    warm_runs: int = 0
    cold_runs: int = 0  # the run could not go warm, or no warm worker could be had
    fallbacks: int = 0  # a worker failed mid-job: re-run cold
    workers_started: int = 0
    workers_replaced: int = 0
    last_error: str = ""
    #: Two-process runs whose candidate a warm candidate parent forked, and those started cold.
    warm_candidates: int = 0
    cold_candidates: int = 0
    #: Of the warm candidates, those a spare served (forked once the run before was over).
    spare_candidates: int = 0


WarmHow = Literal["warm", "cold", "fallback"]


@dataclass(frozen=True)
class WarmOutcome:
    """A run offered to a warm host: its result, how it ran ("warm"; "cold": it could not go
    warm; "fallback": the warm worker failed and the run was re-run cold) and the third-party
    modules it imported (when asked for and the host can tell)."""

    result: RunResult
    how: WarmHow
    imports: tuple[str, ...] = ()


class WarmHost(ABC):
    """A backend's capability to run a job warm: in interpreters that have imported the job's
    runner (the test framework, a harness module) before the run starts, with the verdicts of a
    cold :meth:`Sandbox.run`.

    Opened by :meth:`Sandbox.warm_host` (the caller closes it); safe to call from many threads.
    Whatever goes wrong on the warm path is the host's to absorb: it re-runs the job cold, and
    a worker's fault is never the code's verdict.
    """

    #: Whether the run's programs are this machine's: the caller resolves the command
    #: on the run's PATH here (:attr:`WarmInvocation.interpreter` set). When false they are
    #: found where the run runs and ``interpreter``/``program`` are "".
    programs_on_host: ClassVar[bool] = True
    #: Whether :meth:`run_warm` also takes harness modules (``python -m verify_calls``:
    #: :attr:`WarmInvocation.mode` "runner", ``program`` the module), run from a worker that
    #: has imported the module.
    runs_harness_modules: ClassVar[bool] = False

    @property
    @abstractmethod
    def stats(self) -> WarmStats:
        """The host's counters."""

    @abstractmethod
    def environment(self, spec: RunSpec) -> dict[str, str]:
        """The variables of ``spec``'s command that the host knows (to read the command with)."""

    def programs_here(self, spec: RunSpec) -> bool:
        """:attr:`programs_on_host` for ``spec``: false also where its run runs over a root file
        system of its own (:attr:`RuntimeLayer.root`), whose programs the host finds itself."""
        return self.programs_on_host and (spec.layer is None or spec.layer.root is None)

    @abstractmethod
    def run_warm(self, spec: RunSpec, invocation: WarmInvocation, *,
                   preload: Sequence[str] = (), report_imports: bool = False) -> WarmOutcome:
        """Run ``spec``, whose command is ``invocation``, warm where the host can (else cold)."""

    def reserve(self, jobs: int) -> None:  # noqa: B027 - optional hook, deliberately a no-op
        """Let up to ``jobs`` runs go warm at once. Default: nothing."""

    def close(self) -> None:  # noqa: B027 - optional hook, deliberately a no-op
        """Release what the host holds; later runs go cold. Default: nothing."""


class Sandbox(ABC):
    """A backend. Subclasses register with :func:`verify_cli.sandbox.registry.register_sandbox`."""

    name: ClassVar[str] = ""
    #: One line on what the backend isolates, shown in every report.
    isolation: ClassVar[str] = ""
    #: Whether the backend runs a RunSpec's ``candidate`` process in a sandbox of its own, and
    #: which guarantees of two-process grading do not hold on it (shown in every report).
    two_process: ClassVar[bool] = False
    two_process_gaps: ClassVar[tuple[str, ...]] = ()
    #: Why ``two_process`` is false, where the backend can say more than "not yet" (shown in
    #: every in-process result's notes).
    two_process_missing: ClassVar[str] = ""
    #: Where set, the backend refuses to grade a candidate (``Phase.CANDIDATE``) of a task that
    #: would grade two-process elsewhere: the candidate's code would share the test process, so
    #: a reward could be forged (DESIGN.md, "Trust"). References, starters, mutants and probes
    #: still run. The text says which mode or backend to use instead.
    refuses_candidates: ClassVar[str] = ""
    #: The backend's typed options (:mod:`verify_cli.backend_config`); default: none.
    config_type: ClassVar[type[BackendConfig]] = BackendConfig
    #: Whether each run runs in the task's image (a container), not in the host's runtime.
    runs_in_image: ClassVar[bool] = False
    #: Whether runs can run over a root file system of their own (:attr:`RuntimeLayer.root`:
    #: an image's, exported), not the host's system.
    runs_over_root: ClassVar[bool] = False

    @classmethod
    def from_config(cls, config: BackendConfig) -> Sandbox:
        """An instance configured by ``config`` (checked already: :func:`~verify_cli.sandbox.
        registry.sandbox_spec`). Default: the config's fields as constructor keywords."""
        return cls(**config.as_kwargs())

    def cache_identity(self, image: str | None) -> str:
        """What a cached verdict of a run here depends on beyond the task's own content (the
        backend, how it is configured where that changes verdicts, the content digest of the
        image a run would use): equal strings, interchangeable verdicts. Default: the name."""
        return self.name

    @classmethod
    def availability(cls) -> Availability:
        return Availability(True)

    @abstractmethod
    def run(self, spec: RunSpec) -> RunResult:
        """Run ``spec`` to completion and return its verdict. Never raises for the command's faults;
        infrastructure faults come back as ``infra_error``/``setup_error`` verdicts."""

    def facts(self) -> dict[str, object]:
        """What a report should record about this sandbox beyond its name and isolation (the
        docker backend: its mode, the images' content digests, its containers). Default: none."""
        return {}

    def warm_unavailable(self) -> str | None:
        """Why this backend cannot run jobs warm here, or None when :meth:`warm_host` can."""
        return f"the {self.name or type(self).__name__} backend cannot host a warm worker"

    def warm_host(self, *, workers_per_key: int = 2) -> WarmHost | None:
        """Open this backend's warm runs (the caller closes the host), or None when it
        has none here (:meth:`warm_unavailable` says why). ``workers_per_key``: how many warm
        runs of one kind may run at once. Default: None."""
        return None

    def sessions_unavailable(self) -> str | None:
        """Why this backend cannot open sessions here, or None when :meth:`open_session` can."""
        return f"the {self.name or type(self).__name__} backend cannot open sessions"

    def open_session(self, workspace: Workspace = None, limits: SessionLimits | None = None, *,
                     env: Mapping[str, str] | None = None, image: str | None = None,
                     labels: Mapping[str, str] | None = None, layer: RuntimeLayer | None = None) -> Session:
        """Open a session (:mod:`verify_cli.sandbox.sessions`) over ``workspace`` (a host
        folder, copied in; files by relative path; or nothing) under ``limits``; ``env`` is
        added to every command's environment, ``image`` names the Docker image, ``layer`` a
        task's built environment its commands run in on a local backend. The caller closes it.
        Default: SessionsUnsupportedError, saying why."""
        from verify_cli.sandbox.sessions.base import SessionsUnsupportedError

        raise SessionsUnsupportedError(self.sessions_unavailable() or "sessions are not supported",
                                       hint="use --sandbox bwrap, docker or process")

    def start(self) -> None:  # noqa: B027 - optional hook, deliberately a no-op
        """Prepare (warm pools, images). Default: nothing."""

    def close(self) -> None:  # noqa: B027 - optional hook, deliberately a no-op
        """Release everything the backend holds. Default: nothing."""

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
