"""The docker backend's options, and what its cached verdicts depend on (no Docker SDK here)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from verify_cli.backend_config import BackendConfig

MODES = ("node", "single-use")


@dataclass(frozen=True)
class DockerConfig(BackendConfig):
    """``mode`` node (the default: runs isolated by bubblewrap inside long-lived containers) or
    single-use (a fresh container per run); ``pool_size``: single-use containers kept started
    per image and limits; ``max_containers``, ``idle_timeout_s``, ``max_runs``: node pools."""

    pool_size: int = field(default=0, metadata={"help": "single-use containers kept started"})
    mode: str = field(default="node", metadata={"help": "node or single-use"})
    max_containers: int | None = None
    idle_timeout_s: float = 30.0
    #: Runs a node serves before it is recycled. Every run is isolated in fresh namespaces and
    #: folders and killed whole, so a node carries nothing from one run to the next; recycling
    #: is defence in depth, and costs a node start (a container, its harness, a warm parent's
    #: imports, the candidate parent: about a second of one job's time, 10 ms a run at 100).
    max_runs: int = 1000

    def check(self) -> str | None:
        if self.mode not in MODES:
            return f"unknown docker mode {self.mode!r} (choose node or single-use)"
        if self.pool_size < 0:
            return f"pool_size must be >= 0, got {self.pool_size}"
        if self.max_containers is not None and self.max_containers < 1:
            return f"max_containers must be >= 1, got {self.max_containers}"
        if self.idle_timeout_s < 0:
            return f"idle_timeout_s must be >= 0, got {self.idle_timeout_s}"
        if self.max_runs < 1:
            return f"max_runs must be >= 1, got {self.max_runs}"
        return None


#: What a cached verdict names for an image the daemon does not have (no digest to name).
ABSENT = "absent"


def docker_cache_identity(mode: str, image: str | None, digest_of: Callable[[str], str | None]) -> str:
    """The cache identity of a docker run in ``mode`` on ``image``: the backend, its mode (only
    node mode grades two-process) and the image's content digest from ``digest_of`` (None: the
    daemon does not have it), so a rebuilt image is checked again."""
    if not image:
        return f"docker {mode}"
    return f"docker {mode} {image}@{digest_of(image) or ABSENT}"


__all__ = ["ABSENT", "MODES", "DockerConfig", "docker_cache_identity"]
