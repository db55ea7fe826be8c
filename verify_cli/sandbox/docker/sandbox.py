"""The ``docker`` backend (:class:`DockerSandbox`); this module holds its single-use mode, each run in
a fresh, locked-down container of the task's image (the default node mode: ``nodes.py``).

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
removed in the background while the next run works (see :class:`Reaper`); ``close`` drains.
A timeout or an output flood kills the whole container (its results folder is then lost). The
tmpfs sizes are fractions of the memory limit, because tmpfs pages count against it. Images
need ``sh``, ``tar`` and ``head``; the verify-cli images have them.

Warm pytest runs (:meth:`DockerSandbox.run_warm_job`, used by ``Grader(box, warm=True)``): a
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
import secrets
import struct
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import IO, TYPE_CHECKING, Any, ClassVar

from verify_cli.errors import UsageError

if TYPE_CHECKING:
    from verify_cli.sandbox.sessions.base import Session, SessionLimits, Workspace
from verify_cli.sandbox.base import (
    Availability,
    Limits,
    RunResult,
    RunSpec,
    RuntimeLayer,
    Sandbox,
    Verdict,
    WarmHost,
)
from verify_cli.sandbox.docker.archives import harness_archive, write_workdir_tar
from verify_cli.sandbox.docker.config import MODES, DockerConfig, docker_cache_identity
from verify_cli.sandbox.docker.containers import (
    COLLECT_NUDGE_S,
    COLLECT_TIMEOUT_S,
    COPY_TIMEOUT_S,
    LABEL,
    MAX_RESULTS_ARCHIVE_BYTES,
    OWN_PIDS,
    OWNER_LABEL,
    POOL_LABEL,
    REAP_WAIT_S,
    RUN_ID_LABEL,
    USER,
    WARM_MAX_FAILURES,
    WARM_START_TIMEOUT_S,
    Shape,
    base_environment,
    hardened_container,
    owner,
    tmpfs,
    ulimits,
)
from verify_cli.sandbox.docker.errors import DAEMON_ERRORS, SETUP_HINT, ImageUnfit, daemon_failure, short
from verify_cli.sandbox.docker.execs import DockerExecs
from verify_cli.sandbox.docker.node_pool import default_max_nodes
from verify_cli.sandbox.docker.pool import Prepared, WarmPool
from verify_cli.sandbox.docker.reaper import Reaper, reap_containers
from verify_cli.sandbox.docker.runtimes import RuntimeCheck
from verify_cli.sandbox.docker.scripts import (
    COLLECTOR,
    ENV_NAME,
    RUNNER,
    RUNNER_PROCESSES,
    UNPACK_FAILED,
    WARM_LAUNCHER,
    WARM_READY,
    feed_runner,
    read_at_start,
    runner_script,
    warm_job,
)
from verify_cli.sandbox.docker.streams import (
    Conn,
    ExecOutcome,
    FrameReader,
    Killer,
    ReadyGate,
    read_collector,
)
from verify_cli.sandbox.docker.verdicts import COPY_PREFIX, copy_error, judge_run, parse_counters
from verify_cli.sandbox.docker.warm_host import DockerNodeWarmHost, DockerWarmHost
from verify_cli.sandbox.docker.warm_nodes import WarmNodeEngine, warm_two_process
from verify_cli.sandbox.environment import (
    SANDBOX_HARNESS,
    SANDBOX_RESULTS,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    harness_dir,
    pinned_environment,
)
from verify_cli.sandbox.plumbing.levers import lever_on
from verify_cli.sandbox.plumbing.output import BoundedCapture
from verify_cli.sandbox.registry import register_sandbox

try:  # submodule imports: a top-level `docker/` folder (Dockerfiles) shadows `docker` for mypy
    from docker.client import DockerClient
    from docker.errors import DockerException, ImageNotFound, NotFound

    _SDK_MISSING = ""
except ImportError as _e:  # pragma: no cover - docker is a dependency of verify-cli
    _SDK_MISSING = str(_e)


def run_container(api: Any, shape: Shape, digest: str,
                  labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``create_container``'s arguments for a run's container of ``shape`` made from the image
    ``digest``, its collector waiting: the hardening every container gets. Without ``labels`` it
    is a pool's container."""
    run_labels = {**(labels or {}), LABEL: "1", RUN_ID_LABEL: uuid.uuid4().hex, OWNER_LABEL: owner()}
    if labels is None:
        run_labels[POOL_LABEL] = "1"
    return hardened_container(
        api, digest, ["/bin/sh", "-c", COLLECTOR, "verify-collector"],
        memory_mb=shape.memory_mb, pids_limit=shape.processes + OWN_PIDS, tmpfs=tmpfs(shape),
        ulimits=ulimits(shape), labels=run_labels, working_dir=SANDBOX_WORKDIR,
        environment=base_environment(), stdin_open=True)


@register_sandbox("docker")
class DockerSandbox(DockerExecs, Sandbox):
    """Runs commands in containers of the task's image.

    ``mode="node"`` (the default): runs isolated by bubblewrap inside long-lived containers of
    elastic pools (:mod:`.nodes`); ``max_containers`` caps each shape's pool (default: one per core, or
    ``VERIFY_DOCKER_MAX_CONTAINERS``), ``idle_timeout_s`` removes idle ones, ``max_runs``
    recycles a container after that many runs. ``mode="single-use"``: a fresh container per run;
    ``pool_size`` > 0 keeps containers pre-started (and warm pytest ones).
    """

    isolation: ClassVar[str] = (
        "docker: fresh container per run, no network, read-only root, all capabilities dropped, "
        "no-new-privileges, uid 1000, memory/pids/1-CPU cgroup limits, size-limited tmpfs")
    NODE_ISOLATION = (
        "docker (node): long-lived containers (no network, read-only root, all capabilities "
        "dropped, no-new-privileges, seccomp allowlist, uid 1000, memory/pids/1-CPU cgroup "
        "limits), each run in fresh namespaces (bubblewrap; pytest: a warm parent's fork) "
        "with private tmpfs folders, its own rlimits and its process tree killed at the end")
    MODES = MODES
    config_type = DockerConfig
    runs_in_image = True
    #: Node mode runs two-process (:mod:`.two_process`); single-use mode does not (below).
    two_process: ClassVar[bool] = True
    two_process_gaps: ClassVar[tuple[str, ...]] = ()
    SINGLE_USE_NO_TWO_PROCESS = (
        "docker single-use mode does not run two-process (its containers run the command without "
        "bubblewrap, so the candidate has no sandbox of its own; the default node mode does)")

    SINGLE_USE_REFUSES = (
        "docker single-use mode does not grade candidates: it grades in-process, where the "
        "candidate's code shares the test process and can forge its reward; grade candidates in "
        "the default node mode (--docker-mode node) or on bwrap (single-use still runs "
        "references, starters, mutants and probes)")

    def __init__(self, *, pool_size: int = 0, client: Any = None, mode: str = "node",
                 max_containers: int | None = None, idle_timeout_s: float = 30.0,
                 max_runs: int = DockerConfig.max_runs) -> None:
        if pool_size < 0:
            raise ValueError("pool_size must be >= 0")
        if mode not in self.MODES:
            raise UsageError(f"unknown docker mode {mode!r}", hint="choose node or single-use")
        self._client: Any = client if client is not None else DockerClient.from_env(timeout=120)
        self._api: Any = self._client.api
        self._harness = harness_archive(harness_dir())
        self._reaper = Reaper(self._remove_hard)
        self.mode = mode
        self._pool = (WarmPool(self._prepare_pooled, self._discard, pool_size)
                      if pool_size and mode == "single-use" else None)
        self._warm_failures: dict[Shape, int] = {}
        self.warm_last_error = ""
        self._digests: dict[str, str] = {}
        self._digest_lock = threading.Lock()
        self._runtimes = RuntimeCheck(self._api)
        self._nodes: WarmNodeEngine | None = None
        if mode == "single-use":
            self.two_process = False  # type: ignore[misc]
            self.two_process_gaps = ()  # type: ignore[misc]
            self.two_process_missing = self.SINGLE_USE_NO_TWO_PROCESS  # type: ignore[misc]
            self.refuses_candidates = self.SINGLE_USE_REFUSES  # type: ignore[misc]
        if mode == "node":
            self.isolation = self.NODE_ISOLATION  # type: ignore[misc]
            self._nodes = WarmNodeEngine(
                self._api, self.name, self._harness, self.image_digest, self._remove_node,
                max_nodes=max_containers or default_max_nodes(), idle_s=idle_timeout_s,
                max_runs=max_runs)
            atexit.register(self.close)  # an exiting process leaves no node behind

    def image_digest(self, image: str) -> str:
        """The content digest (``sha256:...``, the image's id) of ``image``; raises ImageNotFound."""
        with self._digest_lock:
            known = self._digests.get(image)
        if known is None:
            known = str(self._api.inspect_image(image)["Id"])
            with self._digest_lock:
                self._digests[image] = known
        return known

    def cache_identity(self, image: str | None) -> str:
        """The backend, its mode and ``image``'s content digest (:func:`.config.docker_cache_identity`)."""
        return docker_cache_identity(self.mode, image, self._digest_or_none)

    def _digest_or_none(self, image: str) -> str | None:
        try:
            return self.image_digest(image)
        except (DockerException, *DAEMON_ERRORS):
            return None

    def container_stats(self) -> dict[str, Any]:
        """How many containers the node pools started, reused (runs on a container that had
        run before), recycled and removed for idling; ``{"mode": "single-use"}`` otherwise."""
        if self._nodes is None:
            return {"mode": self.mode}
        return {"mode": self.mode, **self._nodes.pool.stats.to_dict(),
                "alive": self._nodes.pool.alive()}

    def facts(self) -> dict[str, object]:
        with self._digest_lock:
            images = dict(sorted(self._digests.items()))
        return {"docker_mode": self.mode, "image_digests": images,
                "containers": self.container_stats()}

    def _remove_node(self, container_id: str) -> None:
        self._reaper.put(container_id)
        self._reaper.flush()

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
            return Availability(False, f"the Docker daemon does not answer ({short(e)})",
                                SETUP_HINT)
        return Availability(True)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, images: Sequence[str] = (), limits: Limits | None = None) -> None:
        """Remove containers of crashed verify-cli runs and pre-warm pools for ``images``."""
        with contextlib.suppress(*DAEMON_ERRORS):
            reap_containers(self._api, orphans_only=True)
        if self._pool is not None:
            for image in images:
                self._pool.replenish(Shape.of(image, limits or Limits()))

    def sessions_unavailable(self) -> str | None:
        return None

    def open_session(self, workspace: Workspace = None, limits: SessionLimits | None = None, *,
                     env: Mapping[str, str] | None = None, image: str | None = None,
                     labels: Mapping[str, str] | None = None, layer: RuntimeLayer | None = None) -> Session:
        """A session in a container of ``image`` of its own (:mod:`verify_cli.sandbox.sessions.docker`);
        ``layer`` is not used (a task's built environment is its image here)."""
        from verify_cli.sandbox.sessions.base import SessionLimits as _Limits
        from verify_cli.sandbox.sessions.docker import DockerSessions

        if not image:
            raise UsageError("a docker session needs an image", hint="pass image=...")
        with self._digest_lock:
            sessions = self.__dict__.get("_sessions")
            if sessions is None:
                sessions = self.__dict__["_sessions"] = DockerSessions(self)
        return sessions.open(workspace, limits or _Limits(), env, image, labels)

    def close(self) -> None:
        """Remove the pools' containers and wait for the removal of every used one."""
        sessions = self.__dict__.pop("_sessions", None)
        if sessions is not None:
            sessions.close()
        if self._nodes is not None:
            self._nodes.close()
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
        return self._pool.ready_count(Shape.of(image, limits or Limits()))

    # -- one run ---------------------------------------------------------------------------------

    def run(self, spec: RunSpec) -> RunResult:
        missing = self._runtime_missing(spec)
        if missing is not None:  # the command could not start: never its own failure
            return self._setup_error(missing)
        if self._nodes is not None and spec.image and spec.command and spec.workdir.is_dir():
            return self._nodes.run(spec)
        result = self._run_single_use(spec)
        if spec.image and result.verdict is not Verdict.SETUP_ERROR:
            with contextlib.suppress(*DAEMON_ERRORS):
                result = replace(result, image_digest=self.image_digest(spec.image))
        return result

    def _run_single_use(self, spec: RunSpec) -> RunResult:
        if spec.candidate is not None:
            return self._setup_error(self.SINGLE_USE_NO_TWO_PROCESS)
        if not spec.image:
            return self._setup_error("the docker backend needs an image (the task's environment "
                                     "names none)")
        if not spec.command:
            return self._setup_error("empty command")
        if not spec.workdir.is_dir():
            return self._setup_error(f"work folder {spec.workdir} does not exist")
        shape = Shape.of(spec.image, spec.limits)
        prepared: Prepared | None = None
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
        except (ImageNotFound, ImageUnfit) as e:
            refill = False
            return daemon_failure(self.name, e, spec.image)
        except DAEMON_ERRORS as e:
            if prepared is not None:
                prepared.settled = False
            return daemon_failure(self.name, e, spec.image)
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

    def _runtime_missing(self, spec: RunSpec) -> str | None:
        """Why the run's image cannot start its runtime (:mod:`.runtimes`), or None."""
        if not spec.image or not spec.runtime:
            return None
        try:
            digest = self.image_digest(spec.image)
        except (DockerException, *DAEMON_ERRORS):
            return None  # the run meets the missing image and says so itself
        return self._runtimes.missing(spec.image, digest, spec.runtime)

    def _setup_error(self, message: str) -> RunResult:
        return RunResult(Verdict.SETUP_ERROR, self.name, message=message)

    def _prepare(self, shape: Shape, labels: Mapping[str, str] | None = None) -> Prepared:
        """A started container of ``shape``, harness in place, runner waiting; removed again on
        failure. Without ``labels`` it is a pool's container."""
        env = base_environment()
        container_id: str = self._api.create_container(  # from the digest runs record
            **run_container(self._api, shape, self.image_digest(shape.image), labels))["Id"]
        try:
            self._api.start(container_id)
            ok, said = self._unpack_harness(container_id, self._harness)
            if not ok:
                raise ImageUnfit(shape.image, said)
            nonce = f"verify-run-{secrets.token_hex(12)}"
            if shape.warm is not None:
                return self._start_warm(container_id, shape, env, pooled=labels is None)
            runner_id, runner = self._start_exec(container_id, ["/bin/sh", "-c", RUNNER, nonce],
                                                 user=USER, env=env, workdir=SANDBOX_WORKDIR)
        except BaseException:
            self._remove_now(container_id)
            raise
        return Prepared(container_id, runner_id, runner, nonce, pooled=labels is None)

    def _prepare_pooled(self, shape: Shape) -> Prepared:
        """The pool's maker: counts failed warm-ups per key (see ``run_warm_job``)."""
        try:
            prepared = self._prepare(shape)
        except Exception as e:
            if shape.warm is not None:
                self._warm_failures[shape] = self._warm_failures.get(shape, 0) + 1
                self.warm_last_error = short(e)
            raise
        if shape.warm is not None:
            self._warm_failures.pop(shape, None)
        return prepared

    def _start_warm(self, container_id: str, shape: Shape, env: Mapping[str, str], *,
                    pooled: bool) -> Prepared:
        """Start docker_warm.py as the container's waiting process; returns once it has
        imported pytest and said so (raises when it cannot)."""
        assert shape.warm is not None
        mode, argv0, preload, startup = shape.warm
        exec_env = {**env, **dict(startup)}
        runner_id, runner = self._start_exec(
            container_id, ["/bin/sh", "-c", WARM_LAUNCHER, argv0, mode, ",".join(preload)],
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
                if kind == 2 and data.startswith(WARM_READY):
                    fields = data.split()
                    usec = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
                    break
                said.feed(data)
            runner.sock.settimeout(None)
        except BaseException:
            runner.close()
            raise
        return Prepared(container_id, runner_id, runner, "", pooled=pooled, warm=True,
                         cpu_offset=usec / 1e6)

    # -- warm pytest runs --------------------------------------------------------------------------

    def warm_unavailable(self) -> str | None:
        """Why warm pytest runs cannot go warm here, or None."""
        if self._nodes is not None:
            return None  # warm nodes (warm_nodes.py)
        if self._pool is None:
            return "the docker backend keeps no warm pool (pool size 0)"
        return None

    def warm_host(self, *, workers_per_key: int = 2) -> WarmHost | None:
        """Warm pytest runs in this sandbox's pool (:mod:`verify_cli.sandbox.docker.warm_host`)."""
        if self.warm_unavailable() is not None:
            return None
        if self._nodes is not None and lever_on("docker-warm-runner"):
            return DockerNodeWarmHost(self)
        return DockerWarmHost(self)

    def warm_environment(self, spec: RunSpec) -> dict[str, str]:
        """The variables of a run's command that the host knows (the image adds its own)."""
        return {**base_environment(), **spec.env}

    def warm_candidate_start(self) -> str:
        """How the candidate of this thread's last warm job started ("warm": forked by a warm
        node's candidate parent; "cold"; "" without one, or not on a warm node)."""
        return self._nodes.last_candidate if self._nodes is not None else ""

    def run_warm_job(self, spec: RunSpec, *, mode: str, argv0: str, args: Sequence[str],
                        preload: Sequence[str] = (), program: str = "") -> tuple[RunResult, str]:
        """Run ``spec`` (whose command is ``argv0 -m pytest ARGS``, mode "module", or the
        ``pytest`` script ``argv0 ARGS``, mode "script"; in node mode also a built-in runner,
        ``argv0 -m PROGRAM``, mode "runner") in a pooled container whose waiting
        process has imported pytest (the runner) already. Returns the result and how it ran: "warm", "cold"
        (no warm container was ready, or the run cannot go warm), or "fallback" (the warm
        container died before the command started; the run went cold).

        The container is the isolation boundary (one run each, then destroyed); output, limits,
        results and verdicts are those of :meth:`run`."""
        limits = spec.limits
        if (self._nodes is not None and not spec.stdin and spec.image and spec.workdir.is_dir()
                and (spec.candidate is None or warm_two_process()) and "PATH" not in spec.env
                and (mode in ("module", "script") or (mode == "runner" and program.isidentifier()))
                and argv0 and ("/" not in argv0 or argv0.startswith("/"))):
            ran = self._nodes.run_warm(spec, mode=mode, argv0=argv0, args=args, preload=preload,
                                       program=program)
            self.warm_last_error = self._nodes.warm_last_error or self.warm_last_error
            return ran
        if (self._nodes is not None or self._pool is None or spec.candidate is not None
                or spec.stdin or not spec.image or not spec.workdir.is_dir()
                or limits.processes < RUNNER_PROCESSES or "PATH" in spec.env
                or not all(ENV_NAME.match(name) for name in spec.env)
                or mode not in ("module", "script") or not argv0
                or ("/" in argv0 and not argv0.startswith("/"))):
            return self.run(spec), "cold"
        env = self.warm_environment(spec)
        startup = tuple(sorted((k, v) for k, v in env.items() if read_at_start(k)))
        shape = replace(Shape.of(spec.image, limits),
                        warm=(mode, argv0, tuple(sorted(set(preload))), startup))
        if self._warm_failures.get(shape, 0) >= WARM_MAX_FAILURES:
            return self.run(spec), "cold"
        prepared = self._pool.take(shape)
        self._pool.replenish(shape)
        if prepared is None:
            return self.run(spec), "cold"
        job = warm_job(spec, args)
        reaped = self._reaper.flush()
        try:
            result = self._run_in(prepared, spec, warm_job=job)
        except DAEMON_ERRORS as e:
            prepared.settled = False
            result = daemon_failure(self.name, e, spec.image)
        except BaseException:
            prepared.settled = False
            self._dispose(prepared)
            raise
        self._dispose(prepared)
        self._reaper.wait_done(reaped, REAP_WAIT_S)
        if result is None:  # the warm container died before the command started
            return self.run(spec), "fallback"
        return result, "warm"

    def _run_in(self, prepared: Prepared, spec: RunSpec,
                warm_job: bytes | None = None) -> RunResult | None:
        """The run in a prepared container; None when its runner was gone before the command
        started (the container died). A warm container takes ``warm_job`` (its header)."""
        if warm_job is None and (spec.limits.processes < RUNNER_PROCESSES
                or not all(ENV_NAME.match(name) for name in spec.env)):
            return self._run_by_execs(prepared, spec)  # too few processes to unpack; odd names
        limits = spec.limits
        killer_box: list[Killer] = []
        stdout = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        stderr = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        gate = ReadyGate(stderr)
        with contextlib.ExitStack() as stack:
            archive: IO[bytes] | None = None
            if spec.stdin and warm_job is None:  # the tar's length goes first, so that the runner leaves stdin unread
                archive = stack.enter_context(tempfile.SpooledTemporaryFile(8 * 1024 * 1024))
                write_workdir_tar(archive, spec.workdir)
            script = warm_job if warm_job is not None else runner_script(
                prepared.nonce, spec, None if archive is None else archive.tell())
            outcome = self._drive(prepared.container_id, prepared.runner_id, prepared.runner,
                                  feed=lambda w: feed_runner(w, script, spec, archive),
                                  stdout=stdout, stderr=gate, timeout_s=limits.wall_seconds,
                                  gate=gate, killer_box=killer_box, cancel=spec.cancel)
        if outcome.killed is not None:
            prepared.settled = killer_box[0].confirmed
        if not gate.ready:
            text = gate.setup_text()
            if outcome.killed == "copy":
                return self._setup_error("could not copy the work folder into the container: "
                                         f"timed out after {COPY_TIMEOUT_S:g} s")
            if outcome.exit_code == UNPACK_FAILED and text:
                return self._setup_error(copy_error(text, spec.limits))
            if prepared.pooled and not text and outcome.killed is None:
                return None
            return RunResult(Verdict.INFRA_ERROR, self.name,
                             message=f"the container's runner failed before the command started "
                                     f"(exit {outcome.exit_code}): {text[-500:]}")
        if outcome.killed == "copy":  # the copy deadline fired as the ready byte came
            outcome = ExecOutcome(None, "timeout", outcome.seconds)
        return self._finish(prepared, spec, outcome, stdout, stderr)

    def _run_by_execs(self, prepared: Prepared, spec: RunSpec) -> RunResult:
        """The slow way, for environment names a shell cannot export or a process limit too small
        for the runner's unpacking: tar and the command as execs of their own."""
        prepared.runner.close()  # the runner reads EOF and exits, freeing its process
        self._wait_exit(prepared.runner_id, Killer(self._api, prepared.container_id), 5.0)
        copy_error = self._copy_workdir(prepared.container_id, spec)
        if copy_error is not None:
            return self._setup_error(
                f"could not copy the work folder into the container: {copy_error}")
        limits = spec.limits
        killer_box: list[Killer] = []
        stdout = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        stderr = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer_box[0].kill("output"))
        env = pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                                 harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP, extra=spec.env)
        stdin = spec.stdin
        outcome = self._exec(prepared.container_id, list(spec.command), user=USER, env=env,
                             workdir=SANDBOX_WORKDIR,
                             feed=(lambda w: w.write(stdin)) if stdin else None,
                             stdout=stdout, stderr=stderr, timeout_s=limits.wall_seconds,
                             killer_box=killer_box, cancel=spec.cancel)
        if outcome.killed is not None:
            prepared.settled = killer_box[0].confirmed
        return self._finish(prepared, spec, outcome, stdout, stderr)

    def _finish(self, prepared: Prepared, spec: RunSpec, outcome: ExecOutcome,
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
        verdict, sig, message = judge_run(outcome, exit_code, oom, spec.limits, err)
        cpu = max(0.0, counters.get("cpu_seconds", 0.0) - prepared.cpu_offset)
        return RunResult(verdict, self.name, exit_code=exit_code, signal=sig,
                         wall_seconds=outcome.seconds, cpu_seconds=cpu,
                         stdout=stdout.result(), stderr=err, results=results, message=message)

    def _copy_workdir(self, container_id: str, spec: RunSpec) -> str | None:
        """Stream the work folder into /workspace; None on success, else what went wrong."""
        errors = BoundedCapture(4096)
        outcome = self._exec(container_id, ["tar", "-x", "-f", "-", "-C", SANDBOX_WORKDIR],
                             user=USER, feed=lambda w: write_workdir_tar(w, spec.workdir),
                             stdout=errors, stderr=errors, timeout_s=COPY_TIMEOUT_S)
        if outcome.exit_code == 0:
            return None
        text = errors.result().text.strip()
        if "No space left" in text or "Wrote only" in text:
            return copy_error(text, spec.limits).removeprefix(COPY_PREFIX)
        why = "timed out" if outcome.killed else f"tar exited {outcome.exit_code}"
        return f"{why}: {text[-1000:]}"

    def _collect(self, container_id: str) -> tuple[dict[str, bytes], dict[str, float], bool]:
        """Wake the collector: the files of /results, the cgroup's counters (cpu_seconds,
        oom_kill), and whether nothing of the run is left alive. What the run did to the
        collector can cost it its results, never an error."""
        killer = Killer(self._api, container_id)
        heard = threading.Event()
        timer = threading.Timer(COLLECT_TIMEOUT_S, killer.kill, args=("timeout",))
        nudge = threading.Timer(COLLECT_NUDGE_S, self._nudge, args=(container_id, heard, killer))
        timer.daemon = nudge.daemon = True
        errors = BoundedCapture(4096)
        conn: Conn | None = None
        try:
            conn = self._attach(container_id)
            killer.watch(conn.sock)
            timer.start()
            nudge.start()
            conn.sock.sendall(b"\n")
            stream = FrameReader(conn.reader, errors, MAX_RESULTS_ARCHIVE_BYTES,
                                  on_exceed=lambda: killer.kill("output"), on_data=heard.set)
            results, counters, complete = read_collector(stream)
        except DAEMON_ERRORS:
            return {}, {}, False  # e.g. the collector was made to end early: the container stopped
        finally:
            timer.cancel()
            nudge.cancel()
            if conn is not None:
                conn.close()
        return results, parse_counters(counters), complete or killer.confirmed

    def _nudge(self, container_id: str, heard: threading.Event, killer: Killer) -> None:
        """The wake-up line went unheard (something read the collector's stdin): signal it. A
        container that is no longer running (the run woke its collector early, which then ended
        it) sends nothing more: stop waiting now. (An attach made while it was stopping stayed
        open with no data: the run waited ``COLLECT_TIMEOUT_S``, 60 s, for nothing.)"""
        if heard.is_set():
            return
        try:
            self._api.kill(container_id, "SIGUSR1")
        except DAEMON_ERRORS:
            killer.kill("gone")

    def _dispose(self, prepared: Prepared) -> None:
        """Done with ``prepared``: a settled pool container goes to the reaper; any other is
        removed now, so that nothing of the run outlives ``run``."""
        prepared.runner.close()
        if prepared.pooled and prepared.settled:
            self._reaper.put(prepared.container_id)
        else:
            self._remove_now(prepared.container_id)

    def _discard(self, prepared: Prepared) -> None:
        """An unused pool container (nothing ran in it): removed in the background."""
        prepared.runner.close()
        self._reaper.put(prepared.container_id)

    def _remove_hard(self, container_id: str) -> None:
        """Remove ``container_id``, retrying a failing daemon a few times (the reaper's job).
        What still fails is left to ``reap_containers`` (its owner label names this process)."""
        for attempt in range(4):
            try:
                self._api.remove_container(container_id, force=True)
                return
            except NotFound:
                return
            except DAEMON_ERRORS as e:
                self._reaper.last_error = short(e)
                time.sleep(0.1 * 2 ** attempt)
