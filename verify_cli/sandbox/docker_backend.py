"""Where the docker backend used to live; it is the :mod:`verify_cli.sandbox.docker` package now.
Kept so that existing imports (``from verify_cli.sandbox.docker_backend import DockerSandbox``)
keep working."""

from __future__ import annotations

from verify_cli.sandbox.docker import DockerSandbox, reap_containers

__all__ = ["DockerSandbox", "reap_containers"]
