"""Warm runs (pytest, the built-in runners) in the docker backend's node mode.

A *warm node* is a node (:mod:`.nodes`: a long-lived container with the run's resource envelope)
whose supervisor is ``docker_node_warm.py`` under the interpreter the task's command names: it
has imported pytest, its plugins and the task's preloads before the first job, and forks each
run into fresh user, mount, pid, network, IPC and UTS namespaces with fresh tmpfs
``/workspace``, ``/tmp``, ``/results`` and ``/dev/shm``, the run's CPU and file-size rlimits and
the container's memory and process limits (the container is the run's shape; cgroups are not
writable inside it). The run's pid namespace dies with it, so nothing of one run reaches the
next. Output framing, results, verdicts, recycling (damage, ``max_runs``) and the elastic pool
are the node engine's.

Warm nodes are pooled apart from cold ones: their shape also holds the warm key (mode, the
interpreter word, the preload set, and the variables the interpreter and pytest read at start,
``PYTHONHASHSEED`` above all), and the supervisor starts under exactly those variables
(``env -i``). A run that cannot go warm runs cold; a warm node that cannot start (no interpreter,
no pytest) or fails to set a run up is recycled and the run re-runs cold ("fallback"), never
scored; after ``WARM_MAX_FAILURES`` failed starts a key runs cold.

Two-process runs (a RunSpec with ``candidate``) go warm too: the job's header carries the
layout and the candidate's sandbox of the cold node run (:func:`.two_process.warm_candidate`),
which the forked run builds before pytest starts in it. The candidate's process starts cold (a
nested bubblewrap and its interpreter), as in the cold run, unless it is the Python candidate
server: then the node's candidate parent forks it (``harness/warm/docker_node_candidate.py``,
lever ``docker-warm-candidate``). ``VERIFY_DOCKER_WARM_TWO_PROCESS=0`` sends two-process runs cold.

Warm nodes also run the built-in runners (mode ``runner``: ``python -m verify_calls`` /
``verify_stdio``, lever ``docker-warm-runner``), keyed by the runner module: the node imports it
(and its stand-in and wire modules) instead of pytest.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import replace

from docker.errors import ImageNotFound

from verify_cli.sandbox.base import RunResult, RunSpec, Verdict
from verify_cli.sandbox.docker.containers import WARM_MAX_FAILURES, Shape, base_environment, tmpfs_mib
from verify_cli.sandbox.docker.errors import DAEMON_ERRORS, ImageUnfit, daemon_failure, short
from verify_cli.sandbox.docker.nodes import NodeEngine
from verify_cli.sandbox.docker.scripts import read_at_start
from verify_cli.sandbox.docker.two_process import two_process_env, warm_candidate
from verify_cli.sandbox.environment import SANDBOX_HARNESS, SANDBOX_RESULTS, SANDBOX_TMP, SANDBOX_WORKDIR
from verify_cli.sandbox.plumbing.levers import lever_on

WARM_NODE_SCRIPT = f"{SANDBOX_HARNESS}/docker_node_warm.py"
_MIB = 1024 * 1024
#: The warm supervisor (root has unpacked the harness before it starts): becomes
#: docker_node_warm.py under the interpreter the command's first word (``$0``) names, as the
#: command's shell finds it (a ``pytest`` script: its ``#!`` interpreter). ``$1`` the mode,
#: ``$2`` the preload list, ``$3`` the node's job nonce, ``$4`` the runner module (mode
#: ``runner``: ``python -m verify_calls``, the interpreter found as the shell finds it).
_WARM_SUPERVISOR = (
    'case "$1" in '
    f'module) exec "$0" -s {WARM_NODE_SCRIPT} module "$0" "$2" "$3" ;; '
    f'runner) exec "$0" -s {WARM_NODE_SCRIPT} runner "$0" "$2" "$3" "$4" ;; '
    'script) s=$(command -v "$0") || exit 97; IFS= read -r l < "$s" || exit 97; '
    'case "$l" in "#!/"*) ;; *) exit 97 ;; esac; i=${l#??}; '
    'case "$i" in *" "*|*"	"*) exit 97 ;; esac; '
    f'exec "$i" -s {WARM_NODE_SCRIPT} script "$s" "$2" "$3" ;; '
    'esac; exit 97\n')


def warm_job(spec: RunSpec, nonce: str, marker: str, tar_bytes: int,
             args: Sequence[str]) -> tuple[bytes, bytes]:
    """What goes before the work folder (the job line and header) and after it (the marker,
    which the warm parent reads only once the run's processes are forked)."""
    limits = spec.limits
    mem = limits.memory_mb
    cpu = limits.cpu_seconds
    two = spec.candidate is not None
    header = json.dumps({
        "env": {**base_environment(), **spec.env, **(two_process_env(spec.env) if two else {})},
        "args": list(args), "candidate": warm_candidate(spec) if two else None,
        "cpu_seconds": None if cpu is None else max(1, int(cpu + 0.999)),
        "file_bytes": max(1, limits.file_bytes // 512) * 512,  # as the cold run's ulimit -f
        "tmp_bytes": tmpfs_mib(SANDBOX_TMP, mem) * _MIB,
        "work_bytes": tmpfs_mib(SANDBOX_WORKDIR, mem) * _MIB,
        "results_bytes": tmpfs_mib(SANDBOX_RESULTS, mem) * _MIB,
        "unpack_here": lever_on("docker-unpack-here"),
    }).encode()
    return f"{nonce} {len(header)} {tar_bytes}\n".encode() + header, f"{marker}\n".encode()


def warm_two_process() -> bool:
    """Whether two-process runs may go warm in warm nodes (``VERIFY_DOCKER_WARM_TWO_PROCESS=0``
    sends them cold, as before: for comparisons and as an off switch)."""
    return os.environ.get("VERIFY_DOCKER_WARM_TWO_PROCESS", "1") != "0"


class WarmNodeEngine(NodeEngine):
    """The node engine plus warm pytest nodes (:meth:`run_warm`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._warm_failures: dict[Shape, int] = {}
        self._warm_lock = threading.Lock()
        self.warm_last_error = ""
        self._local = threading.local()

    @property
    def last_candidate(self) -> str:
        """How the candidate of this thread's last warm run started ("warm", "cold", "")."""
        return str(getattr(self._local, "candidate", ""))

    def _supervisor(self, shape: Shape, nonce: str) -> tuple[list[str], dict[str, str]]:
        if shape.warm is None:
            return super()._supervisor(shape, nonce)
        mode, argv0, preload, startup, program = shape.warm
        env = {"PATH": base_environment()["PATH"], **dict(startup)}
        argv = ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "/bin/sh", "-c",
                _WARM_SUPERVISOR, argv0, mode, ",".join(preload), nonce, program]
        return argv, {"PATH": "/usr/local/bin:/usr/bin:/bin"}

    def _failed_start(self, shape: Shape, error: BaseException) -> None:
        with self._warm_lock:
            self._warm_failures[shape] = self._warm_failures.get(shape, 0) + 1
            self.warm_last_error = short(error)

    def run_warm(self, spec: RunSpec, *, mode: str, argv0: str, args: Sequence[str],
                 preload: Sequence[str] = (), program: str = "") -> tuple[RunResult, str]:
        """Run ``spec`` (``argv0 -m pytest ARGS``, the ``pytest`` script ``argv0 ARGS``, or
        the built-in runner ``argv0 -m PROGRAM``: mode "runner") on a warm node; returns the
        result and how it ran ("warm", "cold" or "fallback")."""
        assert spec.image is not None
        # A two-process run's warm parent starts with the trusted side's HOME, as its forks run.
        env = {**base_environment(), **spec.env, **(two_process_env(spec.env) if spec.candidate else {})}
        startup = tuple(sorted((k, v) for k, v in env.items() if read_at_start(k)))
        shape = replace(Shape.of(spec.image, spec.limits),
                        warm=(mode, argv0, tuple(sorted(set(preload))), startup,
                              program if mode == "runner" else ""))
        with self._warm_lock:
            if self._warm_failures.get(shape, 0) >= WARM_MAX_FAILURES:
                return self.run(spec), "cold"
        try:
            node = self.pool.acquire(shape)
        except (ImageNotFound, ImageUnfit, *DAEMON_ERRORS) as e:
            self._failed_start(shape, e)
            return self.run(spec), "cold"
        with self._warm_lock:
            self._warm_failures.pop(shape, None)
        healthy = False
        self._local.candidate = ""
        try:
            result, healthy = self._run_on(
                node, spec, job=lambda marker, size: warm_job(spec, node.nonce, marker, size, args))
        except DAEMON_ERRORS as e:
            result = daemon_failure(self._backend, e, spec.image)
        finally:
            node.runs += 1
            self._local.candidate = node.last_candidate
            self.pool.release(node, healthy=healthy)
        if result.verdict is Verdict.INFRA_ERROR:  # the warm node's fault, never the code's
            with self._warm_lock:
                self.warm_last_error = result.message
            return self.run(spec), "fallback"
        return replace(result, image_digest=node.digest), "warm"


__all__ = ["WarmNodeEngine", "warm_job", "warm_two_process"]
