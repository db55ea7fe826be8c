"""Options shared by several commands."""

from __future__ import annotations

import json
import os
from typing import Annotated, Any

import typer

from verify_cli.errors import UsageError

SandboxOpt = Annotated[str, typer.Option("--sandbox", "-s", help="Sandbox backend: auto, bwrap, docker, process.")]
PoolOpt = Annotated[int | None, typer.Option("--pool-size", min=0, show_default=False, help=(
    "docker --docker-mode single-use: warm containers kept per image and limits (default 2). (Node mode "
    "sizes its pools itself: up to one container per core per shape, VERIFY_DOCKER_MAX_CONTAINERS to "
    "change.) Only the docker backend takes it."))]
DockerModeOpt = Annotated[str | None, typer.Option(
    "--docker-mode", show_default=False,
    help="docker backend: node (the default: runs isolated inside long-lived containers) or single-use "
         "(a fresh container per run). Only the docker backend takes it.")]
JobsOpt = Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Sandboxed runs at once (default: cores).")]


#: ``--pool-size`` when not given with ``--docker-mode single-use``.
SINGLE_USE_POOL = 2


def sandbox_options(*, pool_size: int | None = None, docker_mode: str | None = None) -> dict[str, Any]:
    """The sandbox options given on the command line (left out: not given), by config field; the
    backend's config checks them (an option the chosen backend does not take is an error)."""
    if docker_mode == "single-use" and pool_size is None:
        pool_size = SINGLE_USE_POOL  # the flag's default where it means something
    given = {"mode": docker_mode, "pool_size": pool_size}  # an explicit mode is checked first
    return {k: v for k, v in given.items() if v is not None}


BackendOptionOpt = Annotated[list[str] | None, typer.Option(
    "--backend-option", help="KEY=VALUE passed to the model backend (repeatable), e.g. dtype=bfloat16.")]


def backend_options(pairs: list[str] | None) -> dict[str, Any]:
    """``--backend-option KEY=VALUE`` pairs by config field (a value is read as JSON where it
    parses: numbers, true/false; else kept as text)."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--backend-option {pair!r} is not KEY=VALUE", hint="e.g. --backend-option dtype=bfloat16")
        try:
            out[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[key.replace("-", "_")] = value
    return out


def default_jobs() -> int:
    return os.cpu_count() or 1

ExecutorOpt = Annotated[str, typer.Option(
    "--executor", help="Where sandboxed runs happen: local (this machine) or ray (a Ray cluster).")]
RayAddressOpt = Annotated[str, typer.Option(
    "--ray-address", help="With --executor ray: the cluster's address (HOST:PORT), or auto for the one "
                          "started on this machine.")]


#: The option groups of a long ``--help`` (typer's ``rich_help_panel``), by option name, so that
#: an option sits in the same group on every command; the command's own options stay under
#: "Options". Only a command with at least ``GROUPED_FROM`` options is grouped.
OPTION_GROUPS: dict[str, tuple[str, ...]] = {
    "Model": ("--backend", "--model", "--base-url", "--chat", "--device", "--concurrency", "--max-retries",
              "--request-timeout", "--tensor-parallel-size", "--gpu-memory-utilization", "--backend-option"),
    "Sampling": ("--samples", "--temperature", "--top-p", "--max-tokens", "--adaptive", "--round-size",
                 "--no-tests-in-prompt", "--no-visible-tests", "--no-system-prompt"),
    "Sandbox": ("--sandbox", "--pool-size", "--docker-mode", "--jobs", "--grade-jobs", "--cold", "--executor",
                "--ray-address"),
    "Agent": ("--agent", "--max-turns", "--token-budget", "--wall-seconds", "--observation-chars"),
    "Output": ("--json", "--junit", "--display-chars", "--show", "--plot", "--cache-dir", "--no-cache",
               "--write-back", "--keep", "--drop-extremes", "--log-level"),
}
GROUPED_FROM = 12
