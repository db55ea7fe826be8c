"""The ``docker`` backend: each run in a fresh, locked-down container of the task's image.

Layout of a container. The root file system is read-only; ``/workspace``, ``/results``, ``/tmp``
and ``/opt/verify-harness`` are size-limited tmpfs mounts. Docker's archive API cannot write
into a tmpfs (it writes beneath the mount), so files travel as ``tar`` streams. The container's
main process (pid 1, uid 1000) is the *collector*: a shell that waits on its stdin. Preparing a
container (what the warm pool does ahead of time) is:

1. create and start it;
2. ``tar -x`` as root into ``/opt/verify-harness`` (root-owned, so read-only for the command);
3. start the *runner*: an exec, as uid 1000, of a shell that waits for its orders on stdin.

A run then costs no ``docker exec`` of its own (each costs ~50 ms in runc):

4. the host writes the runner a short script (the run's environment and argv, shell-quoted)
   followed by the work folder as a tar stream; the runner unpacks it into ``/workspace``, prints
   one marker byte on stderr (the wall clock starts there), and ``exec``-s the command, whose
   output streams through :class:`BoundedCapture` and whose exit status is the exec's;
5. the host attaches to the collector and wakes it: it SIGKILLs every other process in the
   container (``kill -9 -1``; whatever the command left behind dies before ``run`` returns),
   prints the cgroup's CPU and OOM counters, then ``exec``-s ``tar -c`` of ``/results``; the host
   stops reading at the archive's end.

A container serves one run. One that carries the run's labels (made for it) is removed before
``run`` returns; a pooled one (no run labels) is already dead by then (step 5, or a kill) and is
removed in the background while the next run works (see :class:`_Reaper`); ``close`` drains.
A timeout or an output flood kills the whole container (its results folder is then lost). The
tmpfs sizes are fractions of the memory limit, because tmpfs pages count against it. Images
need ``sh``, ``tar`` and ``head``; the verify-cli images have them.

Warm pytest runs (:meth:`DockerSandbox.run_warm_pytest`, used by ``Grader(box, warm=True)``): a
container serves one run, so the container itself is the isolation boundary. A *warm* pooled
container's waiting process is ``docker_warm.py`` under the interpreter the command names, which has
imported pytest, its plugins and the task's preloads before the job comes; it takes the same
stdin (a short header, then the work folder's tar), unpacks with ``tar``, prints the same ready
byte, sets the environment a cold command sees and runs pytest in-process. Output, limits,
collection and verdicts are the cold path's. Warm pools are keyed, besides image and limits, by
the interpreter word, preload set and the variables read at interpreter start
(``PYTHONHASHSEED``...); a run whose key has no container ready runs cold and fills that pool.

Processes of the run run as uid 1000 like the collector, so they can signal it, write to its
stdin or stdout, or read its stdin (through ``/proc/1/fd``): that can only end their own run
early, spoil their own results (which they can write anyway), or delay the collection, which then
falls back to SIGUSR1 and, past ``COLLECT_TIMEOUT_S``, to killing the container.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import re
import secrets
import shlex
import signal
import socket
import struct
import tarfile
import tempfile
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import IO, Any, ClassVar

from verify_cli.sandbox.base import (
    MAX_RESULT_FILE_BYTES,
    Availability,
    CapturedOutput,
    Limits,
    RunResult,
    RunSpec,
    Sandbox,
    Verdict,
)
from verify_cli.sandbox.environment import (
    HARNESS_DIR,
    SANDBOX_HARNESS,
    SANDBOX_RESULTS,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    pinned_environment,
)
from verify_cli.sandbox.output import BoundedCapture
from verify_cli.sandbox.registry import register_sandbox

try:  # submodule imports: a top-level `docker/` folder (Dockerfiles) shadows `docker` for mypy
    from docker.client import DockerClient
    from docker.errors import APIError, DockerException, ImageNotFound, NotFound
    from docker.types import LogConfig, Ulimit
    from requests.exceptions import RequestException

    _SDK_MISSING = ""
except ImportError as _e:  # pragma: no cover - docker is a dependency of verify-cli
    _SDK_MISSING = str(_e)

#: Label on every container this backend creates; ``reap_containers`` removes by it.
LABEL = "verify-cli"
RUN_ID_LABEL = "verify-cli.run-id"
OWNER_LABEL = "verify-cli.owner"  # "<hostname>/<pid>" of the creating process
POOL_LABEL = "verify-cli.pool"

USER = "1000:1000"
ROOT = "0:0"
#: Processes of ours in the container besides the command's: the collector (pid 1). The runner
#: becomes the command; the collector needs no new process (it ``exec``-s tar).
OWN_PIDS = 1
NANO_CPUS = 1_000_000_000  # one CPU
#: The writable places, as fractions of the memory limit: tmpfs pages count against the memory
#: cgroup, so a disk fill must meet ENOSPC well before the OOM killer.
TMPFS_SHARES: dict[str, tuple[int, int, int, str]] = {
    # path: (divisor of memory_mb, floor MiB, ceiling MiB, options)
    SANDBOX_WORKDIR: (4, 64, 4096, "uid=1000,gid=1000,mode=0755,exec"),
    SANDBOX_TMP: (8, 32, 2048, "mode=1777,exec"),
    SANDBOX_RESULTS: (16, 16, 64, "uid=1000,gid=1000,mode=0755"),
    SANDBOX_HARNESS: (1 << 30, 8, 8, "mode=0755"),
}
COPY_TIMEOUT_S = 120.0
COLLECT_TIMEOUT_S = 60.0
#: When the collector has said nothing this long after its wake-up line, it is sent SIGUSR1.
COLLECT_NUDGE_S = 2.0
#: How long a run waits, before it returns, for the removal of earlier runs' containers.
REAP_WAIT_S = 10.0
#: Largest ``tar`` stream accepted from /results (its tmpfs holds 64 MiB).
MAX_RESULTS_ARCHIVE_BYTES = 80 * 1024 * 1024
#: Distinct (image, limits) pools kept warm at once; the least recently used is drained.
MAX_POOLS = 8
#: Threads preparing pool containers at once.
POOL_FILLERS = 2
#: Warm pytest containers: how long the warm-up may take, the CPU seconds it may use on top of a
#: run's CPU limit, and how many failed warm-ups of one key stop warm runs of it.
WARM_START_TIMEOUT_S = 120.0
WARM_CPU_SLACK_S = 30
WARM_MAX_FAILURES = 3
#: Ready containers kept per warm key (keys multiply: one per hash seed, preload set, limits).
WARM_POOL_SIZE = 1
WARM_SCRIPT = f"{SANDBOX_HARNESS}/docker_warm.py"
#: Starts docker_warm.py under the interpreter the command's first word names, found as the
#: command's shell finds it: ``$0`` is that word, ``$1`` the mode, ``$2`` the preload list.
_WARM_LAUNCHER = (
    'case "$1" in '
    f'module) exec "$0" {WARM_SCRIPT} module "$0" "$2" ;; '
    'script) s=$(command -v "$0") || exit 97; IFS= read -r l < "$s" || exit 97; '
    'case "$l" in "#!/"*) ;; *) exit 97 ;; esac; i=${l#??}; '
    'case "$i" in *" "*|*"	"*) exit 97 ;; esac; '
    f'exec "$i" {WARM_SCRIPT} script "$s" "$2" ;; '
    'esac; exit 97')
_WARM_READY = b"\x03ready"
SETUP_HINT = "run scripts/setup_docker.sh (installs and starts the Docker engine)"
BUILD_HINT = "build it with scripts/build_images.sh (or docker pull / docker build it)"

_OOM_MARKERS = re.compile(
    rb"MemoryError|Cannot allocate memory|std::bad_alloc|JavaScript heap out of memory|"
    rb"out of memory|Killed process")
_COUNTER_FILES = ("/sys/fs/cgroup/cpuacct/cpuacct.usage /sys/fs/cgroup/cpu.stat "
                  "/sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events")
_COUNTERS_MARK = b"verify-counters\n"
_RESULTS_MARK = b"\nverify-results\n"
#: pid 1 of every container. Woken by a line on stdin (or SIGUSR1), it kills every other process,
#: prints the counters with shell builtins only (no fork: the process limit may be spent) and
#: becomes ``tar -c`` of the results folder.
_COLLECTOR = (
    "c() { trap '' USR1; kill -9 -1 2>/dev/null; printf 'verify-counters\\n'; "
    f"for f in {_COUNTER_FILES}; do "
    '[ -r "$f" ] && while IFS= read -r l || [ -n "$l" ]; do printf \'%s\\n\' "$l"; done < "$f"; '
    "done; printf '\\nverify-results\\n'; "
    f"exec tar -c -f - -C {SANDBOX_RESULTS} .; }}; trap c USR1; read -r _; c"
)
#: The runner: reads a script up to a line equal to its ``$0`` (a per-container nonce), then
#: evaluates it. ``read`` takes stdin a byte at a time, so the tar stream after it stays unread.
_RUNNER = ('s=; while IFS= read -r l; do [ "$l" = "$0" ] && break; s="$s$l\n"; done; '
           '[ "$l" = "$0" ] || exit 0; eval "$s"')
#: First byte the runner writes on stderr: 1 once the work folder is in place, 2 before tar's
#: complaint when it is not (then it exits 125). Nothing of the run has started before either.
_READY = b"\x01"
_UNPACK_FAILED = 125
#: Processes the runner's unpacking takes at most (sh, subshell, head, tar).
_RUNNER_PROCESSES = 4
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _owner() -> str:
    return f"{socket.gethostname()}/{os.getpid()}"


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
            if owner_host != host or not pid.isdigit() or _process_alive(int(pid)):
                continue
        with contextlib.suppress(APIError):
            api.remove_container(info["Id"], force=True)
            removed.append(info["Id"])
    return removed


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class _Shape:
    """What is fixed when a container is created: its image and limits (the pool's key)."""

    image: str
    memory_mb: int
    processes: int
    file_bytes: int
    cpu_seconds: float | None
    #: A warm pytest container's key: (mode, argv0, preload, startup environment); None: cold.
    warm: tuple[Any, ...] | None = None

    @classmethod
    def of(cls, image: str, limits: Limits) -> _Shape:
        return cls(image, limits.memory_mb, limits.processes, limits.file_bytes, limits.cpu_seconds)


@dataclass
class _ExecOutcome:
    exit_code: int | None
    killed: str | None  # "timeout" | "output" | "copy" when we killed the container
    seconds: float


class _Killer:
    """Kills a container once, from whichever thread notices first, and remembers why."""

    def __init__(self, api: Any, container_id: str) -> None:
        self._api = api
        self._id = container_id
        self._lock = threading.Lock()
        self.reason: str | None = None
        self.confirmed = False  # the daemon acknowledged the kill (it waits for the stop)
        self._sockets: list[Any] = []

    def watch(self, sock: Any) -> None:
        with self._lock:
            self._sockets.append(sock)

    def kill(self, reason: str) -> None:
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            socks = list(self._sockets)
        # Close the streams first: the daemon does not finish a kill while it is blocked
        # writing output nobody reads, and readers must not wait for a stream that stays open.
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(APIError, RequestException, OSError):
            self._api.kill(self._id)
            self.confirmed = True


class _Clock:
    """The kill timer of one exec. Gated (the runner), it allows ``COPY_TIMEOUT_S`` for the work
    folder to land, then, from the ready byte on, the wall-clock limit: the run's time starts
    there."""

    def __init__(self, killer: _Killer, wall_s: float, gated: bool) -> None:
        self._killer = killer
        self._wall_s = wall_s
        self._lock = threading.Lock()
        self._stopped = False
        self.started = time.monotonic()
        self._timer = self._arm(COPY_TIMEOUT_S, "copy") if gated else self._arm(wall_s, "timeout")

    def _arm(self, seconds: float, reason: str) -> threading.Timer:
        timer = threading.Timer(seconds, self._killer.kill, args=(reason,))
        timer.daemon = True
        timer.start()
        return timer

    def ready(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._timer.cancel()
            self.started = time.monotonic()
            self._timer = self._arm(self._wall_s, "timeout")

    def stop(self) -> float:
        with self._lock:
            self._stopped = True
            self._timer.cancel()
            return time.monotonic() - self.started


class _Conn:
    """A hijacked connection to an exec or an attach: its socket and a reader over it."""

    def __init__(self, sock: Any, reader: IO[bytes]) -> None:
        self.sock = sock
        self.reader = reader

    def close(self) -> None:
        # As docker-py's CancellableStream: end the hijacked connection at the socket and
        # never hand it back to the HTTP connection pool (response.close() would).
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()


@dataclass
class _Prepared:
    """A started container, harness in place, its runner waiting for orders; used once."""

    container_id: str
    runner_id: str
    runner: _Conn
    nonce: str  # the line that ends the runner's script
    pooled: bool  # made ahead of time: carries no run's labels, so it may be removed later
    warm: bool = False  # its waiting process is docker_warm.py (pytest imported), not the runner
    cpu_offset: float = 0.0  # the cgroup's CPU seconds spent before the run (the warm-up)
    #: Nothing of a run can be alive in it any more: the collector killed it all, or the daemon
    #: confirmed a kill. Only such a container is left to the background reaper.
    settled: bool = True


@register_sandbox("docker")
class DockerSandbox(Sandbox):
    """Runs each command in a fresh container; ``pool_size`` > 0 keeps containers pre-started."""

    isolation: ClassVar[str] = (
        "docker: fresh container per run, no network, read-only root, all capabilities dropped, "
        "no-new-privileges, uid 1000, memory/pids/1-CPU cgroup limits, size-limited tmpfs")

    def __init__(self, *, pool_size: int = 0, client: Any = None) -> None:
        if pool_size < 0:
            raise ValueError("pool_size must be >= 0")
        self._client: Any = client if client is not None else DockerClient.from_env(timeout=120)
        self._api: Any = self._client.api
        self._harness = _harness_archive(HARNESS_DIR)
        self._reaper = _Reaper(self._remove_hard)
        self._pool = (_WarmPool(self._prepare_pooled, self._discard, pool_size)
                      if pool_size else None)
        self._warm_failures: dict[_Shape, int] = {}
        self.warm_last_error = ""

    @classmethod
    def availability(cls) -> Availability:
        if _SDK_MISSING:
            return Availability(False, f"the docker Python SDK is missing ({_SDK_MISSING})",
                                "pip install 'docker>=7'")
        try:
            client = DockerClient.from_env(timeout=5)
            try:
                client.ping()
            finally:
                client.close()
        except Exception as e:
            return Availability(False, f"the Docker daemon does not answer ({_short(e)})",
                                SETUP_HINT)
        return Availability(True)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, images: Sequence[str] = (), limits: Limits | None = None) -> None:
        """Remove containers of crashed verify-cli runs and pre-warm pools for ``images``."""
        with contextlib.suppress(DockerException, RequestException, OSError):
            reap_containers(self._api, orphans_only=True)
        if self._pool is not None:
            for image in images:
                self._pool.replenish(_Shape.of(image, limits or Limits()))

    def close(self) -> None:
        """Remove the pool's containers and wait for the removal of every used one."""
        if self._pool is not None:
            self._pool.close()
        self._reaper.drain(COLLECT_TIMEOUT_S)

    def __enter__(self) -> DockerSandbox:
        self.start()
        return self

    def wait_until_warm(self, timeout_s: float = 60.0) -> bool:
        """Block until every pool is full and no removal is in flight (True), or ``timeout_s``
        passes (False). Containers of finished runs wait for the next run (or ``close``)."""
        deadline = time.monotonic() + timeout_s
        full = True if self._pool is None else self._pool.wait_full(timeout_s)
        return self._reaper.wait_idle(max(0.0, deadline - time.monotonic())) and full

    def warm_count(self, image: str, limits: Limits | None = None) -> int:
        """Containers ready in the pool of ``image`` with ``limits`` (default limits if None)."""
        if self._pool is None:
            return 0
        return self._pool.ready_count(_Shape.of(image, limits or Limits()))

    # -- one run ---------------------------------------------------------------------------------

    def run(self, spec: RunSpec) -> RunResult:
        if not spec.image:
            return self._setup_error("the docker backend needs an image (the task's environment "
                                     "names none)")
        if not spec.command:
            return self._setup_error("empty command")
        if not spec.workdir.is_dir():
            return self._setup_error(f"work folder {spec.workdir} does not exist")
        shape = _Shape.of(spec.image, spec.limits)
        prepared: _Prepared | None = None
        refill = True  # replace what this run used (or start a pool for its shape)
        reaped = self._reaper.flush()  # earlier runs' containers go while this one runs
        try:
            if self._pool is not None:
                prepared = self._pool.take(shape)
            if prepared is not None:
                result = self._run_in(prepared, spec)
                if result is not None:
                    return result
                self._dispose(prepared)  # the pooled container died meanwhile: use a fresh one
                prepared = None
            prepared = self._prepare(shape, spec.labels)
            result = self._run_in(prepared, spec)
            if result is None:
                return RunResult(Verdict.INFRA_ERROR, self.name,
                                 message="the container ended before the command started; "
                                         "check `docker info`")
            return result
        except ImageNotFound:
            refill = False
            return self._setup_error(f"Docker image {spec.image!r} is not present; {BUILD_HINT}")
        except _ImageUnfit as e:
            refill = False
            return self._setup_error(str(e))
        except (DockerException, RequestException, OSError) as e:
            if prepared is not None:
                prepared.settled = False
            return RunResult(Verdict.INFRA_ERROR, self.name,
                             message=f"the Docker daemon failed during the run ({_short(e)}); "
                                     f"check `docker info`, or {SETUP_HINT}")
        except BaseException:
            if prepared is not None:
                prepared.settled = False
            raise
        finally:
            if prepared is not None:
                self._dispose(prepared)
            if self._pool is not None and refill:
                self._pool.replenish(shape)
            self._reaper.wait_done(reaped, REAP_WAIT_S)

    def _setup_error(self, message: str) -> RunResult:
        return RunResult(Verdict.SETUP_ERROR, self.name, message=message)

    def _prepare(self, shape: _Shape, labels: Mapping[str, str] | None = None) -> _Prepared:
        """A started container of ``shape``, harness in place, runner waiting; removed again on
        failure. Without ``labels`` it is a pool's container."""
        host_config = self._api.create_host_config(
            network_mode="none",
            mem_limit=f"{shape.memory_mb}m",
            memswap_limit=f"{shape.memory_mb}m",
            pids_limit=shape.processes + OWN_PIDS,
            nano_cpus=NANO_CPUS,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            read_only=True,
            tmpfs=_tmpfs(shape),
            ulimits=_ulimits(shape),
            log_config=LogConfig(type="none"),
        )
        run_labels = {**(labels or {}), LABEL: "1", RUN_ID_LABEL: uuid.uuid4().hex,
                      OWNER_LABEL: _owner()}
        if labels is None:
            run_labels[POOL_LABEL] = "1"
        env = _base_environment()
        container_id: str = self._api.create_container(
            shape.image, ["/bin/sh", "-c", _COLLECTOR, "verify-collector"], user=USER,
            working_dir=SANDBOX_WORKDIR, environment=env, labels=run_labels,
            host_config=host_config, network_disabled=True, stdin_open=True)["Id"]
        try:
            self._api.start(container_id)
            stderr = BoundedCapture(4096)
            outcome = self._exec(container_id, ["tar", "-x", "-f", "-", "--no-same-owner", "-C",
                                                SANDBOX_HARNESS], user=ROOT,
                                 feed=lambda w: w.write(self._harness), stdout=stderr,
                                 stderr=stderr, timeout_s=COPY_TIMEOUT_S)
            if outcome.exit_code != 0:
                raise _ImageUnfit(shape.image, stderr.result().text)
            nonce = f"verify-run-{secrets.token_hex(12)}"
            if shape.warm is not None:
                return self._start_warm(container_id, shape, env, pooled=labels is None)
            runner_id, runner = self._start_exec(container_id, ["/bin/sh", "-c", _RUNNER, nonce],
                                                 user=USER, env=env, workdir=SANDBOX_WORKDIR)
        except BaseException:
            self._remove_now(container_id)
            raise
        return _Prepared(container_id, runner_id, runner, nonce, pooled=labels is None)

    def _prepare_pooled(self, shape: _Shape) -> _Prepared:
        """The pool's maker: counts failed warm-ups per key (see ``run_warm_pytest``)."""
        try:
            prepared = self._prepare(shape)
        except Exception as e:
            if shape.warm is not None:
                self._warm_failures[shape] = self._warm_failures.get(shape, 0) + 1
                self.warm_last_error = _short(e)
            raise
        if shape.warm is not None:
            self._warm_failures.pop(shape, None)
        return prepared

    def _start_warm(self, container_id: str, shape: _Shape, env: Mapping[str, str], *,
                    pooled: bool) -> _Prepared:
        """Start docker_warm.py as the container's waiting process; returns once it has
        imported pytest and said so (raises when it cannot)."""
        assert shape.warm is not None
        mode, argv0, preload, startup = shape.warm
        exec_env = {**env, **dict(startup)}
        runner_id, runner = self._start_exec(
            container_id, ["/bin/sh", "-c", _WARM_LAUNCHER, argv0, mode, ",".join(preload)],
            user=USER, env=exec_env, workdir=SANDBOX_WORKDIR)
        said = BoundedCapture(4096)
        try:
            runner.sock.settimeout(WARM_START_TIMEOUT_S)
            while True:
                header = runner.reader.read(8)
                if len(header) < 8:
                    raise DockerException("the warm pytest runner ended while warming up: "
                                          + said.result().text[-500:])
                kind, size = struct.unpack(">BxxxL", header)
                data = runner.reader.read(size)
                if kind == 2 and data.startswith(_WARM_READY):
                    fields = data.split()
                    usec = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
                    break
                said.feed(data)
            runner.sock.settimeout(None)
        except BaseException:
            runner.close()
            raise
        return _Prepared(container_id, runner_id, runner, "", pooled=pooled, warm=True,
                         cpu_offset=usec / 1e6)

    # -- warm pytest runs --------------------------------------------------------------------------

    def warm_unavailable(self) -> str | None:
        """Why warm pytest runs cannot go warm here, or None."""
        if self._pool is None:
            return "the docker backend keeps no warm pool (pool size 0)"
        return None

    def warm_environment(self, spec: RunSpec) -> dict[str, str]:
        """The variables of a run's command that the host knows (the image adds its own)."""
        return {**_base_environment(), **spec.env}

    def run_warm_pytest(self, spec: RunSpec, *, mode: str, argv0: str, args: Sequence[str],
                        preload: Sequence[str] = ()) -> tuple[RunResult, str]:
        """Run ``spec`` (whose command is ``argv0 -m pytest ARGS``, mode "module", or the
        ``pytest`` script ``argv0 ARGS``, mode "script") in a pooled container whose waiting
        process has imported pytest already. Returns the result and how it ran: "warm", "cold"
        (no warm container was ready, or the run cannot go warm), or "fallback" (the warm
        container died before the command started; the run went cold).

        The container is the isolation boundary (one run each, then destroyed); output, limits,
        results and verdicts are those of :meth:`run`."""
        limits = spec.limits
        if (self._pool is None or spec.stdin or not spec.image or not spec.workdir.is_dir()
                or limits.processes < _RUNNER_PROCESSES or "PATH" in spec.env
                or not all(_ENV_NAME.match(name) for name in spec.env)
                or mode not in ("module", "script") or not argv0
                or ("/" in argv0 and not argv0.startswith("/"))):
            return self.run(spec), "cold"
        env = self.warm_environment(spec)
        startup = tuple(sorted((k, v) for k, v in env.items() if _read_at_start(k)))
        shape = replace(_Shape.of(spec.image, limits),
                        warm=(mode, argv0, tuple(sorted(set(preload))), startup))
        if self._warm_failures.get(shape, 0) >= WARM_MAX_FAILURES:
            return self.run(spec), "cold"
        prepared = self._pool.take(shape)
        self._pool.replenish(shape)
        if prepared is None:
            return self.run(spec), "cold"
        job = _warm_job(spec, args)
        reaped = self._reaper.flush()
        try:
            result = self._run_in(prepared, spec, warm_job=job)
        except (DockerException, RequestException, OSError) as e:
            prepared.settled = False
            result = RunResult(Verdict.INFRA_ERROR, self.name,
                               message=f"the Docker daemon failed during the run ({_short(e)}); "
                                       f"check `docker info`, or {SETUP_HINT}")
        except BaseException:
            prepared.settled = False
            self._dispose(prepared)
            raise
        self._dispose(prepared)
        self._reaper.wait_done(reaped, REAP_WAIT_S)
        if result is None:  # the warm container died before the command started
            return self.run(spec), "fallback"
        return result, "warm"

    def _run_in(self, prepared: _Prepared, spec: RunSpec,
                warm_job: bytes | None = None) -> RunResult | None:
        """The run in a prepared container; None when its runner was gone before the command
        started (the container died). A warm container takes ``warm_job`` (its header)."""
        if warm_job is None and (spec.limits.processes < _RUNNER_PROCESSES
                or not all(_ENV_NAME.match(name) for name in spec.env)):
            return self._run_by_execs(prepared, spec)  # too few processes to unpack; odd names
        limits = spec.limits
        killer_box: list[_Killer] = []
        stdout = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        stderr = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        gate = _ReadyGate(stderr)
        with contextlib.ExitStack() as stack:
            archive: IO[bytes] | None = None
            if spec.stdin and warm_job is None:  # the tar's length goes first, so that the runner leaves stdin unread
                archive = stack.enter_context(tempfile.SpooledTemporaryFile(8 * 1024 * 1024))
                _write_workdir_tar(archive, spec.workdir)
            script = warm_job if warm_job is not None else _runner_script(
                prepared.nonce, spec, None if archive is None else archive.tell())
            outcome = self._drive(prepared.container_id, prepared.runner_id, prepared.runner,
                                  feed=lambda w: _feed_runner(w, script, spec, archive),
                                  stdout=stdout, stderr=gate, timeout_s=limits.wall_seconds,
                                  gate=gate, killer_box=killer_box)
        if outcome.killed is not None:
            prepared.settled = killer_box[0].confirmed
        if not gate.ready:
            text = gate.setup_text()
            if outcome.killed == "copy":
                return self._setup_error("could not copy the work folder into the container: "
                                         f"timed out after {COPY_TIMEOUT_S:g} s")
            if outcome.exit_code == _UNPACK_FAILED and text:
                return self._setup_error(_copy_error(text, spec.limits))
            if prepared.pooled and not text and outcome.killed is None:
                return None
            return RunResult(Verdict.INFRA_ERROR, self.name,
                             message=f"the container's runner failed before the command started "
                                     f"(exit {outcome.exit_code}): {text[-500:]}")
        if outcome.killed == "copy":  # the copy deadline fired as the ready byte came
            outcome = _ExecOutcome(None, "timeout", outcome.seconds)
        return self._finish(prepared, spec, outcome, stdout, stderr)

    def _run_by_execs(self, prepared: _Prepared, spec: RunSpec) -> RunResult:
        """The slow way, for environment names a shell cannot export or a process limit too small
        for the runner's unpacking: tar and the command as execs of their own."""
        prepared.runner.close()  # the runner reads EOF and exits, freeing its process
        self._wait_exit(prepared.runner_id, _Killer(self._api, prepared.container_id), 5.0)
        copy_error = self._copy_workdir(prepared.container_id, spec)
        if copy_error is not None:
            return self._setup_error(
                f"could not copy the work folder into the container: {copy_error}")
        limits = spec.limits
        killer_box: list[_Killer] = []
        stdout = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        stderr = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        env = pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                                 harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP, extra=spec.env)
        stdin = spec.stdin
        outcome = self._exec(prepared.container_id, list(spec.command), user=USER, env=env,
                             workdir=SANDBOX_WORKDIR,
                             feed=(lambda w: w.write(stdin)) if stdin else None,
                             stdout=stdout, stderr=stderr, timeout_s=limits.wall_seconds,
                             killer_box=killer_box)
        if outcome.killed is not None:
            prepared.settled = killer_box[0].confirmed
        return self._finish(prepared, spec, outcome, stdout, stderr)

    def _finish(self, prepared: _Prepared, spec: RunSpec, outcome: _ExecOutcome,
                stdout: BoundedCapture, stderr: BoundedCapture) -> RunResult:
        results: dict[str, bytes] = {}
        counters: dict[str, float] = {}
        if outcome.killed is None:
            results, counters, prepared.settled = self._collect(prepared.container_id)
        exit_code = outcome.exit_code
        oom = counters.get("oom_kill", 0) > 0
        if exit_code not in (0, None) and "oom_kill" not in counters:
            oom = self._oom_reported(prepared.container_id)
        err = stderr.result()
        verdict, sig, message = _verdict(outcome, exit_code, oom, spec.limits, err)
        cpu = max(0.0, counters.get("cpu_seconds", 0.0) - prepared.cpu_offset)
        return RunResult(verdict, self.name, exit_code=exit_code, signal=sig,
                         wall_seconds=outcome.seconds, cpu_seconds=cpu,
                         stdout=stdout.result(), stderr=err, results=results, message=message)

    def _copy_workdir(self, container_id: str, spec: RunSpec) -> str | None:
        """Stream the work folder into /workspace; None on success, else what went wrong."""
        errors = BoundedCapture(4096)
        outcome = self._exec(container_id, ["tar", "-x", "-f", "-", "-C", SANDBOX_WORKDIR],
                             user=USER, feed=lambda w: _write_workdir_tar(w, spec.workdir),
                             stdout=errors, stderr=errors, timeout_s=COPY_TIMEOUT_S)
        if outcome.exit_code == 0:
            return None
        text = errors.result().text.strip()
        if "No space left" in text or "Wrote only" in text:
            return _copy_error(text, spec.limits).removeprefix(_COPY_PREFIX)
        why = "timed out" if outcome.killed else f"tar exited {outcome.exit_code}"
        return f"{why}: {text[-1000:]}"

    def _collect(self, container_id: str) -> tuple[dict[str, bytes], dict[str, float], bool]:
        """Wake the collector: the files of /results, the cgroup's counters (cpu_seconds,
        oom_kill), and whether nothing of the run is left alive. What the run did to the
        collector can cost it its results, never an error."""
        killer = _Killer(self._api, container_id)
        heard = threading.Event()
        timer = threading.Timer(COLLECT_TIMEOUT_S, killer.kill, args=("timeout",))
        nudge = threading.Timer(COLLECT_NUDGE_S, self._nudge, args=(container_id, heard))
        timer.daemon = nudge.daemon = True
        errors = BoundedCapture(4096)
        conn: _Conn | None = None
        try:
            conn = self._attach(container_id)
            killer.watch(conn.sock)
            timer.start()
            nudge.start()
            conn.sock.sendall(b"\n")
            stream = _FrameReader(conn.reader, errors, MAX_RESULTS_ARCHIVE_BYTES,
                                  on_exceed=lambda: killer.kill("output"), on_data=heard.set)
            results, counters, complete = _read_collector(stream)
        except (DockerException, RequestException, OSError):
            return {}, {}, False  # e.g. the collector was made to end early: the container stopped
        finally:
            timer.cancel()
            nudge.cancel()
            if conn is not None:
                conn.close()
        return results, _parse_counters(counters), complete or killer.confirmed

    def _nudge(self, container_id: str, heard: threading.Event) -> None:
        """The wake-up line went unheard (something read the collector's stdin): signal it."""
        if not heard.is_set():
            with contextlib.suppress(DockerException, RequestException, OSError):
                self._api.kill(container_id, "SIGUSR1")

    def _oom_reported(self, container_id: str) -> bool:
        """Whether the daemon saw an OOM kill in the container (its counters were unreadable)."""
        with contextlib.suppress(DockerException, RequestException, OSError):
            info = self._api.inspect_container(container_id)
            if info.get("State", {}).get("OOMKilled"):
                return True
            since = _parse_docker_time(info.get("Created", "")) or (time.time() - 3600)
            events = self._api.events(since=int(since) - 1, until=f"{time.time():.6f}",
                                      filters={"container": container_id, "event": "oom"},
                                      decode=True)
            return any(True for _ in events)
        return False

    def _dispose(self, prepared: _Prepared) -> None:
        """Done with ``prepared``: a settled pool container goes to the reaper; any other is
        removed now, so that nothing of the run outlives ``run``."""
        prepared.runner.close()
        if prepared.pooled and prepared.settled:
            self._reaper.put(prepared.container_id)
        else:
            self._remove_now(prepared.container_id)

    def _discard(self, prepared: _Prepared) -> None:
        """An unused pool container (nothing ran in it): removed in the background."""
        prepared.runner.close()
        self._reaper.put(prepared.container_id)

    def _remove_now(self, container_id: str) -> None:
        with contextlib.suppress(DockerException, RequestException, OSError):
            self._api.remove_container(container_id, force=True)

    def _remove_hard(self, container_id: str) -> None:
        """Remove ``container_id``, retrying a failing daemon a few times (the reaper's job).
        What still fails is left to ``reap_containers`` (its owner label names this process)."""
        for attempt in range(4):
            try:
                self._api.remove_container(container_id, force=True)
                return
            except NotFound:
                return
            except (DockerException, RequestException, OSError) as e:
                self._reaper.last_error = _short(e)
                time.sleep(0.1 * 2 ** attempt)

    # -- exec plumbing ---------------------------------------------------------------------------

    def _hijack(self, response: Any) -> _Conn:
        raw = self._api._get_raw_response_socket(response)  # raises for an error status
        sock = getattr(raw, "_sock", raw)
        sock.settimeout(None)
        return _Conn(sock, response.raw._fp.fp)

    def _start_exec(self, container_id: str, argv: list[str], *, user: str,
                    env: Mapping[str, str] | None = None,
                    workdir: str | None = None) -> tuple[str, _Conn]:
        """Create and start an exec of ``argv``; its id and its connection (stdin, output)."""
        exec_id: str = self._api.exec_create(
            container_id, argv, stdin=True, stdout=True, stderr=True, user=user,
            environment=dict(env) if env else None, workdir=workdir)["Id"]
        response = self._api._post_json(  # the public exec_start(socket=True) drops buffered bytes
            self._api._url("/exec/{0}/start", exec_id),
            headers={"Connection": "Upgrade", "Upgrade": "tcp"},
            data={"Tty": False, "Detach": False}, stream=True)
        return exec_id, self._hijack(response)

    def _attach(self, container_id: str) -> _Conn:
        """A connection to the main process's stdin and (from now on) its output."""
        response = self._api._post(
            self._api._url("/containers/{0}/attach", container_id),
            params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1},
            headers={"Connection": "Upgrade", "Upgrade": "tcp"}, stream=True)
        return self._hijack(response)

    def _exec(self, container_id: str, argv: list[str], *, user: str,
              feed: Callable[[_SocketWriter], object] | None, stdout: Any, stderr: Any,
              timeout_s: float, env: Mapping[str, str] | None = None,
              workdir: str | None = None, killer_box: list[_Killer] | None = None) -> _ExecOutcome:
        """Run ``argv`` in the container, streaming its output into ``stdout``/``stderr`` (objects
        with ``feed(bytes)``) as it is produced. At ``timeout_s`` the container is killed."""
        exec_id, conn = self._start_exec(container_id, argv, user=user, env=env, workdir=workdir)
        return self._drive(container_id, exec_id, conn, feed=feed, stdout=stdout, stderr=stderr,
                           timeout_s=timeout_s, killer_box=killer_box)

    def _drive(self, container_id: str, exec_id: str, conn: _Conn, *,
               feed: Callable[[_SocketWriter], object] | None, stdout: Any, stderr: Any,
               timeout_s: float, gate: _ReadyGate | None = None,
               killer_box: list[_Killer] | None = None) -> _ExecOutcome:
        """Feed a started exec its stdin and pump its output until it ends or is killed."""
        killer = _Killer(self._api, container_id)
        if killer_box is not None:
            killer_box.append(killer)
        killer.watch(conn.sock)
        clock = _Clock(killer, timeout_s, gated=gate is not None)
        if gate is not None:
            gate.on_ready = clock.ready
        writer = threading.Thread(target=_feed_stdin, args=(conn.sock, feed), daemon=True,
                                  name="verify-docker-stdin")
        writer.start()
        exit_code: int | None = None
        try:
            _pump_frames(conn.reader, stdout, stderr, stop=lambda: killer.reason is not None)
            if killer.reason is None:  # output closed; the process may still run (to the timer)
                exit_code = self._wait_exit(exec_id, killer)
        finally:
            seconds = clock.stop()
            conn.close()  # also wakes the stdin writer
        writer.join(timeout=5)
        if killer.reason is not None:
            return _ExecOutcome(None, killer.reason, seconds)
        return _ExecOutcome(exit_code, None, seconds)

    def _wait_exit(self, exec_id: str, killer: _Killer,
                   timeout_s: float | None = None) -> int | None:
        pause = 0.001
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while killer.reason is None and (deadline is None or time.monotonic() < deadline):
            info = self._api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                return None if code is None else int(code)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return None


_COPY_PREFIX = "could not copy the work folder into the container: "


def _copy_error(text: str, limits: Limits) -> str:
    text = text.strip()
    if "No space left" in text or "Wrote only" in text:
        room = _tmpfs_mib(SANDBOX_WORKDIR, limits.memory_mb)
        return (f"{_COPY_PREFIX}the work folder does not fit in /workspace ({room} MiB: a quarter "
                f"of the memory limit, since it lives in memory); raise the memory limit")
    return f"{_COPY_PREFIX}tar failed: {text[-1000:]}"


def _base_environment() -> dict[str, str]:
    return pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                              harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP)


def _runner_script(nonce: str, spec: RunSpec, archive_bytes: int | None) -> bytes:
    """What the runner evaluates: unpack the work folder from stdin (only ``archive_bytes`` of it
    when the run's stdin follows), set the run's environment, mark ready, become the command.
    Every value is shell-quoted; the runner's own variables are not exported."""
    source = "" if archive_bytes is None else f"head -c {archive_bytes} | "
    lines = [
        f"e=$({source}TAR_OPTIONS= tar -x -f - -C {SANDBOX_WORKDIR} 2>&1) || "
        f"{{ printf '\\002%s\\n' \"$e\" >&2; exit {_UNPACK_FAILED}; }}",
        "unset PWD OLDPWD",  # the shell's own; a direct exec has neither
        *(f"export {name}={shlex.quote(value)}" for name, value in spec.env.items()),
        "printf '\\001' >&2",
        "exec " + " ".join(shlex.quote(arg) for arg in spec.command),
        nonce,
    ]
    return ("\n".join(lines) + "\n").encode()


def _read_at_start(name: str) -> bool:
    """Whether the interpreter or pytest reads ``name`` once, at start (a warm pool's key)."""
    return name.startswith(("PYTHON", "PYTEST_", "LC_")) or name in ("LANG", "HOME")


def _warm_job(spec: RunSpec, args: Sequence[str]) -> bytes:
    """What docker_warm.py reads before the work folder: a length line, then the JSON header."""
    cpu = spec.limits.cpu_seconds
    header = json.dumps({
        "env": dict(spec.env), "args": list(args),
        "cpu_seconds": None if cpu is None else max(1, int(cpu + 0.999)),
    }).encode()
    return f"{len(header)}\n".encode() + header


def _feed_runner(out: _SocketWriter, script: bytes, spec: RunSpec,
                 archive: IO[bytes] | None) -> None:
    out.write(script)
    if archive is None:
        _write_workdir_tar(out, spec.workdir)
        return
    archive.seek(0)
    while chunk := archive.read(1 << 16):
        out.write(chunk)
    if spec.stdin:
        out.write(spec.stdin)


class _ReadyGate:
    """The runner's stderr: its first byte says whether the command starts (``_READY``, then the
    command's stderr follows, forwarded to ``sink``) or the unpacking failed (tar's complaint)."""

    def __init__(self, sink: BoundedCapture) -> None:
        self._sink = sink
        self._first = True
        self.ready = False
        self.on_ready: Callable[[], None] | None = None
        self._setup = BoundedCapture(4096)

    def feed(self, data: bytes) -> None:
        if self.ready:
            self._sink.feed(data)
            return
        if self._first and data:
            self._first = False
            if data[:1] == _READY:
                self.ready = True
                if self.on_ready is not None:
                    self.on_ready()
                if len(data) > 1:
                    self._sink.feed(data[1:])
                return
        self._setup.feed(data)

    def setup_text(self) -> str:
        return self._setup.result().text.lstrip("\x02").strip()


class _FrameReader(io.RawIOBase):
    """The stdout of a multiplexed Docker stream as a file; stderr goes to ``errors``. Reads
    block only for bytes a frame header announced, and end (after ``on_exceed``) past ``limit``."""

    def __init__(self, reader: IO[bytes], errors: BoundedCapture, limit: int,
                 on_exceed: Callable[[], None], on_data: Callable[[], None]) -> None:
        super().__init__()
        self._reader = reader
        self._errors = errors
        self._left = 0  # bytes of the current stdout frame still unread
        self._limit = limit
        self._total = 0
        self._on_exceed = on_exceed
        self._on_data = on_data

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            while self._left == 0:
                header = self._reader.read(8)
                if len(header) < 8:
                    return 0
                self._on_data()
                kind, size = struct.unpack(">BxxxL", header)
                if kind == 1:
                    self._left = size
                    continue
                while size:
                    data = self._reader.read(min(size, 65536))
                    if not data:
                        return 0
                    size -= len(data)
                    self._errors.feed(data)
            data = self._reader.read(min(len(buffer), self._left))
        except (OSError, ValueError):
            return 0  # the connection was shut down by a kill
        if not data:
            return 0
        self._left -= len(data)
        self._total += len(data)
        if self._total > self._limit:
            self._on_exceed()
            return 0
        buffer[:len(data)] = data
        return len(data)


class _Prefixed(io.RawIOBase):
    """``head`` then the rest of ``stream``."""

    def __init__(self, head: bytes, stream: io.RawIOBase) -> None:
        super().__init__()
        self._head = head
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return self._stream.readinto(buffer) or 0


def _read_collector(stream: _FrameReader) -> tuple[dict[str, bytes], str, bool]:
    """The collector's output: counters text, then the results as tar. Reading stops at the
    archive's end (the container's own end comes later). Also: whether the collector spoke
    (it had killed everything else first)."""
    head = b""
    while _RESULTS_MARK not in head:
        chunk = stream.read(65536)
        if not chunk or len(head) > 1024 * 1024:
            return {}, "", False
        head += chunk
    before, _, rest = head.partition(_RESULTS_MARK)
    counters = before.rpartition(_COUNTERS_MARK)[2].decode("utf-8", "replace")
    return _read_results(_Prefixed(rest, stream)), counters, True


class _Reaper:
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
                self.last_error = _short(e)
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


class _ImageUnfit(DockerException):
    """The image lacks what the backend needs (tar, sleep, sh)."""

    def __init__(self, image: str, detail: str) -> None:
        super().__init__(f"image {image!r} cannot host verify-cli runs (it needs sh, tar and "
                         f"sleep): {detail.strip()[-500:]}")


class _SocketWriter(io.RawIOBase):
    """A write-only file over a socket, for ``tarfile`` in stream mode."""

    def __init__(self, sock: Any) -> None:
        super().__init__()
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


def _feed_stdin(sock: Any, feed: Callable[[_SocketWriter], object] | None) -> None:
    try:
        if feed is not None:
            feed(_SocketWriter(sock))
        sock.shutdown(socket.SHUT_WR)  # EOF on the process's stdin
    except OSError:
        pass  # the process exited or was killed without reading everything


def _pump_frames(reader: IO[bytes], stdout: Any, stderr: Any, stop: Callable[[], bool]) -> None:
    """Demultiplex Docker's stream (8-byte header: stream id, size) until EOF or ``stop()``."""
    sinks = {1: stdout, 2: stderr}
    try:
        while not stop():
            header = reader.read(8)
            if len(header) < 8:
                return
            kind, size = struct.unpack(">BxxxL", header)
            while size and not stop():
                data = reader.read(min(size, 65536))
                if not data:
                    return
                size -= len(data)
                sink = sinks.get(kind)
                if sink is not None:
                    sink.feed(data)
    except (OSError, ValueError):
        return  # the socket was shut down by a kill


def _tmpfs_mib(path: str, memory_mb: int) -> int:
    divisor, floor, ceiling, _ = TMPFS_SHARES[path]
    return max(floor, min(ceiling, memory_mb // divisor))


def _tmpfs(shape: _Shape) -> dict[str, str]:
    return {path: f"size={_tmpfs_mib(path, shape.memory_mb)}m,{opts}"
            for path, (_, _, _, opts) in TMPFS_SHARES.items()}


def _ulimits(shape: _Shape) -> list[Any]:
    limits = [Ulimit(name="fsize", soft=shape.file_bytes, hard=shape.file_bytes),
              Ulimit(name="core", soft=0, hard=0)]
    if shape.cpu_seconds is not None:
        secs = max(1, int(shape.cpu_seconds + 0.999))
        if shape.warm is not None:  # the warm runner lowers it to the run's own, after warm-up
            secs += WARM_CPU_SLACK_S
        limits.append(Ulimit(name="cpu", soft=secs, hard=secs + 1))
    return limits


def _verdict(outcome: _ExecOutcome, exit_code: int | None, oom: bool, limits: Limits,
             stderr: CapturedOutput) -> tuple[Verdict, int | None, str]:
    """The verdict, the signal (Docker reports a death by signal n as status 128+n) and a note."""
    if outcome.killed == "output":
        return (Verdict.OUTPUT_LIMIT, None,
                f"exceeded the output limit of {limits.output_bytes} bytes; the run was stopped")
    if outcome.killed is not None:  # "timeout"
        return Verdict.TIMEOUT, None, f"exceeded the wall-clock limit of {limits.wall_seconds:g} s"
    if exit_code is None:
        return Verdict.INFRA_ERROR, None, "lost track of the command's exit status"
    sig = exit_code - 128 if 128 < exit_code < 128 + 65 else None
    if exit_code != 0 and (oom or _OOM_MARKERS.search(stderr.head + stderr.tail)):
        return (Verdict.MEMORY_LIMIT, sig,
                f"ran out of memory under the limit of {limits.memory_mb} MiB")
    if sig == signal.SIGXCPU:
        return Verdict.TIMEOUT, sig, "exceeded the CPU-time limit"
    if sig == signal.SIGXFSZ:
        return Verdict.OUTPUT_LIMIT, sig, "exceeded the file-size limit"
    if sig is not None:
        return Verdict.SIGNAL, sig, f"killed by signal {sig} ({_signame(sig)})"
    if exit_code != 0:
        return Verdict.NONZERO_EXIT, None, ""
    return Verdict.OK, None, ""


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "unknown"


def _parse_counters(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    for parts in lines:
        if len(parts) == 1 and parts[0].isdigit():  # cgroup v1 cpuacct.usage, nanoseconds
            out["cpu_seconds"] = int(parts[0]) / 1e9
        elif len(parts) == 2 and parts[0] == "usage_usec":  # cgroup v2 cpu.stat
            out["cpu_seconds"] = int(parts[1]) / 1e6
        elif len(parts) == 2 and parts[0] == "oom_kill":  # v1 oom_control, v2 memory.events
            out["oom_kill"] = out.get("oom_kill", 0) + int(parts[1])
    return out


def _read_results(archive: Any) -> dict[str, bytes]:
    results: dict[str, bytes] = {}
    try:
        with tarfile.open(fileobj=archive, mode="r|") as tar:
            for member in tar:
                if not member.isfile() or member.size > MAX_RESULT_FILE_BYTES:
                    continue
                name = member.name.removeprefix("./")
                handle = tar.extractfile(member)
                if name and handle is not None:
                    results[name] = handle.read()
    except tarfile.TarError:
        pass  # a truncated archive (results written while collected): keep what was read
    return results


def _write_workdir_tar(out: Any, workdir: Path) -> None:
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path in _walk(workdir):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(workdir).as_posix())
            if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
                continue  # sockets, fifos, devices
            info.uid = info.gid = 1000
            info.uname = info.gname = "sandbox"
            if info.isfile():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)


def _walk(root: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in dirnames:
            yield base / name
        for name in sorted(filenames):
            yield base / name


def _harness_archive(folder: Path) -> bytes:
    """The harness helpers as a tar owned by root, readable by everyone."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if folder.is_dir():
            for path in _walk(folder):
                rel = path.relative_to(folder)
                if "__pycache__" in rel.parts or path.suffix == ".pyc":
                    continue
                info = tar.gettarinfo(str(path), arcname=rel.as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mode = 0o755 if info.isdir() else 0o644
                if info.isfile():
                    with path.open("rb") as f:
                        tar.addfile(info, f)
                elif info.isdir():
                    tar.addfile(info)
    return buf.getvalue()


def _parse_docker_time(text: str) -> float | None:
    match = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)", text or "")
    if not match:
        return None
    return datetime.fromisoformat(match.group(1) + "+00:00").timestamp()


def _short(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text if len(text) <= 300 else text[:300] + "..."


class _WarmPool:
    """Per-shape queues of prepared containers, refilled in the background; thread-safe.

    A container taken from the pool is never returned to it: runs dispose of it, and the pool
    makes a replacement.
    """

    def __init__(self, make: Callable[[_Shape], _Prepared], discard: Callable[[_Prepared], None],
                 size: int) -> None:
        self._make = make
        self._discard = discard
        self._size = size
        self._cond = threading.Condition()
        self._ready: OrderedDict[_Shape, deque[_Prepared]] = OrderedDict()
        self._pending: dict[_Shape, int] = {}
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._jobs: deque[_Shape] = deque()
        self.last_error = ""

    def take(self, shape: _Shape) -> _Prepared | None:
        with self._cond:
            queue = self._ready.get(shape)
            if queue:
                self._ready.move_to_end(shape)
                return queue.popleft()
            return None

    def ready_count(self, shape: _Shape) -> int:
        with self._cond:
            return len(self._ready.get(shape, ()))

    def replenish(self, shape: _Shape) -> None:
        evicted: list[_Prepared] = []
        with self._cond:
            if self._closed:
                return
            queue = self._ready.setdefault(shape, deque())
            self._ready.move_to_end(shape)
            while len(self._ready) > MAX_POOLS:
                _old, old_queue = self._ready.popitem(last=False)
                evicted.extend(old_queue)
            missing = self._target(shape) - len(queue) - self._pending.get(shape, 0)
            if missing > 0:
                self._pending[shape] = self._pending.get(shape, 0) + missing
                self._jobs.extend([shape] * missing)
                self._threads = [t for t in self._threads if t.is_alive()]
                # Few fillers at a time: the daemon serialises much of the work, but a warm
                # container's warm-up (an interpreter importing pytest) overlaps another's start.
                while len(self._threads) < min(POOL_FILLERS, len(self._jobs)):
                    t = threading.Thread(target=self._fill_loop, daemon=True,
                                         name="verify-docker-pool")
                    self._threads.append(t)
                    t.start()
        for prepared in evicted:
            self._discard(prepared)

    def _fill_loop(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    me = threading.current_thread()
                    self._threads = [t for t in self._threads if t is not me]
                    return
                shape = self._jobs.popleft()
                closed = self._closed
            prepared: _Prepared | None = None
            if not closed:
                try:
                    prepared = self._make(shape)
                except Exception as e:  # e.g. the image is missing: runs report it themselves
                    self.last_error = _short(e)
            with self._cond:
                self._pending[shape] = max(0, self._pending.get(shape, 0) - 1)
                if prepared is not None and not self._closed and shape in self._ready:
                    self._ready[shape].append(prepared)
                    prepared = None
                self._cond.notify_all()
            if prepared is not None:
                self._discard(prepared)

    def wait_full(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while any(self._pending.get(s, 0) for s in self._ready):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return all(len(q) >= self._target(s) for s, q in self._ready.items())

    def _target(self, shape: _Shape) -> int:
        return self._size if shape.warm is None else min(self._size, WARM_POOL_SIZE)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._jobs.clear()
            ready = [p for queue in self._ready.values() for p in queue]
            self._ready.clear()
            threads = list(self._threads)
        for t in threads:
            t.join(timeout=60)
        for prepared in ready:
            self._discard(prepared)
