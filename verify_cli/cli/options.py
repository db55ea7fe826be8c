"""Options shared by several commands."""

from __future__ import annotations

import os
from typing import Annotated

import typer

SandboxOpt = Annotated[str, typer.Option("--sandbox", "-s", help="Sandbox backend: auto, bwrap, docker, process.")]
PoolOpt = Annotated[int, typer.Option("--pool-size", min=0, help=(
    "docker --docker-mode single-use: warm containers kept per image and limits. (Node mode sizes "
    "its pools itself: up to one container per core per shape, VERIFY_DOCKER_MAX_CONTAINERS to change.)"))]
DockerModeOpt = Annotated[str, typer.Option(
    "--docker-mode", help="docker backend: node (runs isolated inside long-lived containers) or single-use "
                          "(a fresh container per run).")]
JobsOpt = Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Sandboxed runs at once (default: cores).")]


def default_jobs() -> int:
    return os.cpu_count() or 1

ExecutorOpt = Annotated[str, typer.Option(
    "--executor", help="Where sandboxed runs happen: local (this machine) or ray (a Ray cluster).")]
RayAddressOpt = Annotated[str, typer.Option(
    "--ray-address", help="With --executor ray: the cluster's address (HOST:PORT), or auto for the one "
                          "started on this machine.")]
