"""The ``docker`` backend: each run in a fresh, locked-down container of the task's image.

Layout of a container. The root file system is read-only; ``/workspace``, ``/results``, ``/tmp``
and ``/opt/verify-harness`` are size-limited tmpfs mounts. Docker's archive API cannot write
into a tmpfs (it writes beneath the mount), so files travel through ``tar`` run with the exec API:
the container's main process only waits (``sleep infinity``), and a run is four execs in it:

1. ``tar -x`` as root into ``/opt/verify-harness`` (root-owned, so read-only for the command);
2. ``tar -x`` as uid 1000 into ``/workspace`` (the work folder, streamed from the host);
3. the command itself, as uid 1000, its output streamed through :class:`BoundedCapture`;
4. ``tar -c`` of ``/results`` (plus the cgroup's CPU and OOM counters on stderr).

Steps 1 and the container's creation and start are what the warm pool does ahead of time. A
container serves one run and is then removed; a timeout or an output flood kills the whole
container (its results folder is then lost). The tmpfs sizes are fractions of the memory limit,
because tmpfs pages count against it. Images need ``sh``, ``tar`` and ``sleep``; the verify-cli
images have them.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
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
from dataclasses import dataclass
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
    from docker.errors import APIError, DockerException, ImageNotFound
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
WAITER = ("sleep", "infinity")
#: Processes of ours in the container besides the command's: the waiter. (The helper execs
#: run before and after the command; orphans it leaves at the process limit cost it its results.)
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
#: Largest ``tar`` stream accepted from /results (its tmpfs holds 64 MiB).
MAX_RESULTS_ARCHIVE_BYTES = 80 * 1024 * 1024
#: Distinct (image, limits) pools kept warm at once; the least recently used is drained.
MAX_POOLS = 4
SETUP_HINT = "run scripts/setup_docker.sh (installs and starts the Docker engine)"
BUILD_HINT = "build it with scripts/build_images.sh (or docker pull / docker build it)"

_OOM_MARKERS = re.compile(
    rb"MemoryError|Cannot allocate memory|std::bad_alloc|JavaScript heap out of memory|"
    rb"out of memory|Killed process")
_COLLECT_SCRIPT = (
    "for f in /sys/fs/cgroup/cpuacct/cpuacct.usage /sys/fs/cgroup/cpu.stat "
    "/sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do "
    '[ -r "$f" ] && cat "$f"; done >&2; '
    f"exec tar -c -f - -C {SANDBOX_RESULTS} ."
)


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

    @classmethod
    def of(cls, image: str, limits: Limits) -> _Shape:
        return cls(image, limits.memory_mb, limits.processes, limits.file_bytes, limits.cpu_seconds)


@dataclass
class _ExecOutcome:
    exit_code: int | None
    killed: str | None  # "timeout" | "output" when we killed the container
    seconds: float


class _Killer:
    """Kills a container once, from whichever thread notices first, and remembers why."""

    def __init__(self, api: Any, container_id: str) -> None:
        self._api = api
        self._id = container_id
        self._lock = threading.Lock()
        self.reason: str | None = None
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
        self._pool = _WarmPool(self._prepare, self._remove, pool_size) if pool_size else None

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
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> DockerSandbox:
        self.start()
        return self

    def wait_until_warm(self, timeout_s: float = 60.0) -> bool:
        """Block until every pool is full (True) or ``timeout_s`` passes (False)."""
        return True if self._pool is None else self._pool.wait_full(timeout_s)

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
        container_id: str | None = None
        refill = True  # replace what this run used (or start a pool for its shape)
        try:
            copy_error: str | None = None
            if self._pool is not None:
                container_id = self._pool.take(shape)
            if container_id is not None:
                try:
                    copy_error = self._copy_workdir(container_id, spec)
                except APIError:  # the pooled container died meanwhile: use a fresh one
                    self._remove(container_id)
                    container_id = None
            if container_id is None:
                container_id = self._prepare(shape, spec.labels)
                copy_error = self._copy_workdir(container_id, spec)
            if copy_error is not None:
                return self._setup_error(
                    f"could not copy the work folder into the container: {copy_error}")
            return self._run_command(container_id, spec)
        except ImageNotFound:
            refill = False
            return self._setup_error(f"Docker image {spec.image!r} is not present; {BUILD_HINT}")
        except _ImageUnfit as e:
            refill = False
            return self._setup_error(str(e))
        except (DockerException, RequestException, OSError) as e:
            return RunResult(Verdict.INFRA_ERROR, self.name,
                             message=f"the Docker daemon failed during the run ({_short(e)}); "
                                     f"check `docker info`, or {SETUP_HINT}")
        finally:
            if container_id is not None:
                self._remove(container_id)
            if self._pool is not None and refill:
                self._pool.replenish(shape)

    def _setup_error(self, message: str) -> RunResult:
        return RunResult(Verdict.SETUP_ERROR, self.name, message=message)

    def _prepare(self, shape: _Shape, labels: Mapping[str, str] | None = None) -> str:
        """A started container of ``shape`` with the harness in place; removed again on failure."""
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
        env = pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                                 harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP)
        container_id: str = self._api.create_container(
            shape.image, list(WAITER), user=USER, working_dir=SANDBOX_WORKDIR, environment=env,
            labels=run_labels, host_config=host_config, network_disabled=True)["Id"]
        try:
            self._api.start(container_id)
            stderr = BoundedCapture(4096)
            outcome = self._exec(container_id, ["tar", "-x", "-f", "-", "--no-same-owner", "-C",
                                                SANDBOX_HARNESS], user=ROOT,
                                 feed=lambda w: w.write(self._harness), stdout=stderr,
                                 stderr=stderr, timeout_s=COPY_TIMEOUT_S)
            if outcome.exit_code != 0:
                raise _ImageUnfit(shape.image, stderr.result().text)
        except BaseException:
            self._remove(container_id)
            raise
        return container_id

    def _copy_workdir(self, container_id: str, spec: RunSpec) -> str | None:
        """Stream the work folder into /workspace; None on success, else what went wrong."""
        errors = BoundedCapture(4096)
        outcome = self._exec(container_id, ["tar", "-x", "-f", "-", "-C", SANDBOX_WORKDIR],
                             user=USER, feed=lambda w: _write_workdir_tar(w, spec.workdir),
                             stdout=errors, stderr=errors, timeout_s=COPY_TIMEOUT_S)
        if outcome.exit_code == 0:
            return None
        text = errors.result().text.strip()
        if "No space left" in text:
            room = _tmpfs_mib(SANDBOX_WORKDIR, spec.limits.memory_mb)
            return (f"the work folder does not fit in /workspace ({room} MiB: a quarter of the "
                    f"memory limit, since it lives in memory); raise the memory limit")
        why = "timed out" if outcome.killed else f"tar exited {outcome.exit_code}"
        return f"{why}: {text[-1000:]}"

    def _run_command(self, container_id: str, spec: RunSpec) -> RunResult:
        limits = spec.limits
        killer_box: list[_Killer] = []
        stdout = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        stderr = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        env = pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                                 harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP, extra=spec.env)
        stdin = spec.stdin
        outcome = self._exec(container_id, list(spec.command), user=USER, env=env,
                             workdir=SANDBOX_WORKDIR,
                             feed=(lambda w: w.write(stdin)) if stdin else None,
                             stdout=stdout, stderr=stderr, timeout_s=limits.wall_seconds,
                             killer_box=killer_box)
        results: dict[str, bytes] = {}
        counters: dict[str, float] = {}
        if outcome.killed is None:
            results, counters = self._collect(container_id)
        exit_code = outcome.exit_code
        oom = counters.get("oom_kill", 0) > 0
        if exit_code not in (0, None) and "oom_kill" not in counters:
            oom = self._oom_reported(container_id)
        err = stderr.result()
        verdict, sig, message = _verdict(outcome, exit_code, oom, limits, err)
        return RunResult(verdict, self.name, exit_code=exit_code, signal=sig,
                         wall_seconds=outcome.seconds, cpu_seconds=counters.get("cpu_seconds", 0.0),
                         stdout=stdout.result(), stderr=err, results=results, message=message)

    def _collect(self, container_id: str) -> tuple[dict[str, bytes], dict[str, float]]:
        """The files of /results and the cgroup's counters (cpu_seconds, oom_kill)."""
        counters_text = BoundedCapture(16384)
        with tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024) as spool:
            archive = _SpoolCapture(spool, MAX_RESULTS_ARCHIVE_BYTES)
            box: list[_Killer] = []
            archive.on_exceed = lambda: box[0].kill("output")
            self._exec(container_id, ["sh", "-c", _COLLECT_SCRIPT], user=USER, feed=None,
                       stdout=archive, stderr=counters_text, timeout_s=COLLECT_TIMEOUT_S,
                       killer_box=box)
            spool.seek(0)
            results = _read_results(spool)
        return results, _parse_counters(counters_text.result().text)

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

    def _remove(self, container_id: str) -> None:
        with contextlib.suppress(DockerException, RequestException, OSError):
            self._api.remove_container(container_id, force=True)

    # -- exec plumbing ---------------------------------------------------------------------------

    def _exec(self, container_id: str, argv: list[str], *, user: str,
              feed: Callable[[_SocketWriter], object] | None, stdout: Any, stderr: Any,
              timeout_s: float, env: Mapping[str, str] | None = None,
              workdir: str | None = None, killer_box: list[_Killer] | None = None) -> _ExecOutcome:
        """Run ``argv`` in the container, streaming its output into ``stdout``/``stderr`` (objects
        with ``feed(bytes)``) as it is produced. At ``timeout_s`` the container is killed."""
        killer = _Killer(self._api, container_id)
        if killer_box is not None:
            killer_box.append(killer)
        exec_id = self._api.exec_create(container_id, argv, stdin=True, stdout=True, stderr=True,
                                        user=user, environment=dict(env) if env else None,
                                        workdir=workdir)["Id"]
        response = self._api._post_json(  # the public exec_start(socket=True) drops buffered bytes
            self._api._url("/exec/{0}/start", exec_id),
            headers={"Connection": "Upgrade", "Upgrade": "tcp"},
            data={"Tty": False, "Detach": False}, stream=True)
        raw = self._api._get_raw_response_socket(response)
        sock = getattr(raw, "_sock", raw)
        reader: IO[bytes] = response.raw._fp.fp
        sock.settimeout(None)
        killer.watch(sock)
        started = time.monotonic()
        timer = threading.Timer(timeout_s, killer.kill, args=("timeout",))
        timer.daemon = True
        timer.start()
        writer = threading.Thread(target=_feed_stdin, args=(sock, feed), daemon=True,
                                  name="verify-docker-stdin")
        writer.start()
        exit_code: int | None = None
        try:
            _pump_frames(reader, stdout, stderr, stop=lambda: killer.reason is not None)
            if killer.reason is None:  # output closed; the process may still run (to the timer)
                exit_code = self._wait_exit(exec_id, killer)
        finally:
            timer.cancel()
            seconds = time.monotonic() - started
            # As docker-py's CancellableStream: end the hijacked connection at the socket and
            # never hand it back to the HTTP connection pool (response.close() would).
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # also wakes the stdin writer
            with contextlib.suppress(OSError):
                sock.close()
        writer.join(timeout=5)
        if killer.reason is not None:
            return _ExecOutcome(None, killer.reason, seconds)
        return _ExecOutcome(exit_code, None, seconds)

    def _wait_exit(self, exec_id: str, killer: _Killer) -> int | None:
        pause = 0.001
        while killer.reason is None:
            info = self._api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                return None if code is None else int(code)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return None


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


class _SpoolCapture:
    """Sink for a stream into a file, killing the producer past ``limit`` bytes."""

    def __init__(self, file: IO[bytes], limit: int) -> None:
        self._file = file
        self._limit = limit
        self.total = 0
        self.on_exceed: Callable[[], None] | None = None

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        if self.total > self._limit:
            if self.on_exceed is not None:
                self.on_exceed()
            return
        self._file.write(data)


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
        limits.append(Ulimit(name="cpu", soft=secs, hard=secs + 1))
    return limits


def _verdict(outcome: _ExecOutcome, exit_code: int | None, oom: bool, limits: Limits,
             stderr: CapturedOutput) -> tuple[Verdict, int | None, str]:
    """The verdict, the signal (Docker reports a death by signal n as status 128+n) and a note."""
    if outcome.killed == "timeout":
        return Verdict.TIMEOUT, None, f"exceeded the wall-clock limit of {limits.wall_seconds:g} s"
    if outcome.killed == "output":
        return (Verdict.OUTPUT_LIMIT, None,
                f"exceeded the output limit of {limits.output_bytes} bytes; the run was stopped")
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


def _read_results(archive: IO[bytes]) -> dict[str, bytes]:
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


def _write_workdir_tar(out: _SocketWriter, workdir: Path) -> None:
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

    A container taken from the pool is never returned to it: runs remove it, and the pool makes
    a replacement.
    """

    def __init__(self, make: Callable[[_Shape], str], discard: Callable[[str], None],
                 size: int) -> None:
        self._make = make
        self._discard = discard
        self._size = size
        self._cond = threading.Condition()
        self._ready: OrderedDict[_Shape, deque[str]] = OrderedDict()
        self._pending: dict[_Shape, int] = {}
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._jobs: deque[_Shape] = deque()
        self.last_error = ""

    def take(self, shape: _Shape) -> str | None:
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
        evicted: list[str] = []
        with self._cond:
            if self._closed:
                return
            queue = self._ready.setdefault(shape, deque())
            self._ready.move_to_end(shape)
            while len(self._ready) > MAX_POOLS:
                _old, old_queue = self._ready.popitem(last=False)
                evicted.extend(old_queue)
            missing = self._size - len(queue) - self._pending.get(shape, 0)
            if missing > 0:
                self._pending[shape] = self._pending.get(shape, 0) + missing
                self._jobs.extend([shape] * missing)
                self._threads = [t for t in self._threads if t.is_alive()]
                if not self._threads:  # one filler at a time: the daemon serialises most work
                    t = threading.Thread(target=self._fill_loop, daemon=True,
                                         name="verify-docker-pool")
                    self._threads.append(t)
                    t.start()
        for container_id in evicted:
            self._discard(container_id)

    def _fill_loop(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    me = threading.current_thread()
                    self._threads = [t for t in self._threads if t is not me]
                    return
                shape = self._jobs.popleft()
                closed = self._closed
            container_id: str | None = None
            if not closed:
                try:
                    container_id = self._make(shape)
                except Exception as e:  # e.g. the image is missing: runs report it themselves
                    self.last_error = _short(e)
            with self._cond:
                self._pending[shape] = max(0, self._pending.get(shape, 0) - 1)
                if container_id is not None and not self._closed and shape in self._ready:
                    self._ready[shape].append(container_id)
                    container_id = None
                self._cond.notify_all()
            if container_id is not None:
                self._discard(container_id)

    def wait_full(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while any(self._pending.get(s, 0) for s in self._ready):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return all(len(q) >= self._size for q in self._ready.values())

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._jobs.clear()
            ready = [cid for queue in self._ready.values() for cid in queue]
            self._ready.clear()
            threads = list(self._threads)
        for t in threads:
            t.join(timeout=60)
        for container_id in ready:
            self._discard(container_id)
