"""What a container of the docker backend is made of: labels, its shape (image and limits,
the key of every pool), limits, tmpfs mounts, the environment of its processes, and the hardening
that every container holding untrusted code gets (:func:`hardened_container`, written once)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from docker.types import LogConfig, Ulimit

from verify_cli.sandbox.base import (
    Limits,
)
from verify_cli.sandbox.environment import (
    SANDBOX_HARNESS,
    SANDBOX_RESULTS,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    pinned_environment,
)

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


def owner() -> str:
    return f"{socket.gethostname()}/{os.getpid()}"


@dataclass(frozen=True)
class Shape:
    """What is fixed when a container is created: its image and limits (the pool's key)."""

    image: str
    memory_mb: int
    processes: int
    file_bytes: int
    cpu_seconds: float | None
    #: A warm pytest container's key: (mode, argv0, preload, startup environment); None: cold.
    warm: tuple[Any, ...] | None = None

    @classmethod
    def of(cls, image: str, limits: Limits) -> Shape:
        return cls(image, limits.memory_mb, limits.processes, limits.file_bytes, limits.cpu_seconds)

    def container(self) -> Shape:
        """What the container itself is made of (image and limits): shapes equal here differ
        only in the supervisor that waits in the container."""
        return replace(self, warm=None)


def base_environment() -> dict[str, str]:
    return pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                              harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP)


def tmpfs_mib(path: str, memory_mb: int) -> int:
    divisor, floor, ceiling, _ = TMPFS_SHARES[path]
    return max(floor, min(ceiling, memory_mb // divisor))


def tmpfs(shape: Shape) -> dict[str, str]:
    return {path: f"size={tmpfs_mib(path, shape.memory_mb)}m,{opts}"
            for path, (_, _, _, opts) in TMPFS_SHARES.items()}


def ulimits(shape: Shape) -> list[Any]:
    limits = [Ulimit(name="fsize", soft=shape.file_bytes, hard=shape.file_bytes),
              Ulimit(name="core", soft=0, hard=0)]
    if shape.cpu_seconds is not None:
        secs = max(1, int(shape.cpu_seconds + 0.999))
        if shape.warm is not None:  # the warm runner lowers it to the run's own, after warm-up
            secs += WARM_CPU_SLACK_S
        limits.append(Ulimit(name="cpu", soft=secs, hard=secs + 1))
    return limits


def hardened_container(api: Any, image: str, command: Sequence[str], *, memory_mb: int,
                       pids_limit: int, tmpfs: Mapping[str, str], ulimits: Sequence[Any],
                       labels: Mapping[str, str], working_dir: str,
                       environment: Mapping[str, str] | None = None,
                       seccomp_profile: str | None = None, unmask_system_paths: bool = False,
                       stdin_open: bool = False) -> dict[str, Any]:
    """The keyword arguments of ``api.create_container`` for a container that runs untrusted
    code, whatever its kind (a run's container, a node): no network, every capability dropped, no
    new privileges, a read-only root with writable tmpfs mounts only, the non-root user, memory
    with no swap on top, one CPU, a pids limit, no logs kept by the engine.

    The callers choose only what differs by kind: the pids limit, the tmpfs mounts, the ulimits,
    a seccomp profile in place of Docker's default (nodes: bubblewrap needs user namespaces), and
    ``unmask_system_paths`` (as ``--security-opt systempaths=unconfined``: nodes, whose
    bubblewrap mounts a fresh /proc, which the kernel refuses under Docker's masks)."""
    security_opt = ["no-new-privileges"]
    if seccomp_profile is not None:
        security_opt.append(f"seccomp={seccomp_profile}")
    host_config = api.create_host_config(
        network_mode="none",
        mem_limit=f"{memory_mb}m",
        memswap_limit=f"{memory_mb}m",
        pids_limit=pids_limit,
        nano_cpus=NANO_CPUS,
        cap_drop=["ALL"],
        security_opt=security_opt,
        read_only=True,
        tmpfs=dict(tmpfs),
        ulimits=list(ulimits),
        log_config=LogConfig(type="none"),
    )
    if unmask_system_paths:
        host_config["MaskedPaths"] = []
        host_config["ReadonlyPaths"] = []
    kwargs: dict[str, Any] = {
        "image": image, "command": list(command), "user": USER, "working_dir": working_dir,
        "labels": dict(labels), "host_config": host_config,
        # network_mode "none" above: loopback only. Not network_disabled as well: with it the
        # engine writes an empty /etc/hosts, and localhost resolves nowhere (issue 39).
    }
    if environment is not None:
        kwargs["environment"] = dict(environment)
    if stdin_open:
        kwargs["stdin_open"] = True
    return kwargs
