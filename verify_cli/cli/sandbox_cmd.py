"""``verify-cli sandbox ...``: inspect and maintain sandbox backends."""

from __future__ import annotations

from typing import Annotated

import typer

from verify_cli.cli import console
from verify_cli.cli.options import DockerModeOpt, sandbox_options
from verify_cli.errors import ExitCode, SandboxUnavailableError
from verify_cli.report.files import write_json
from verify_cli.sandbox.registry import sandbox_class, sandbox_names

#: Warm containers the doctor's single-use docker keeps (as check-tasks does by default).
DOCTOR_POOL = 2

sandbox_app = typer.Typer(help="Inspect and maintain sandbox backends.", no_args_is_help=True)


@sandbox_app.command("list")
def list_command() -> None:
    """Which backends exist, which are available here, and what each isolates."""
    rows = []
    for name in sandbox_names():
        cls = sandbox_class(name)
        a = cls.availability()
        rows.append({"backend": name, "available": "yes" if a.available else "no",
                     "isolation": cls.isolation, "hint": "" if a.available else f"{a.reason}. {a.install_hint}"})
    console.sandbox_table(rows)


@sandbox_app.command("doctor")
def doctor_command(
    backend: Annotated[list[str] | None, typer.Option(
        "--sandbox", "-s", "--backend", help="Check only these sandbox backends (repeatable).")] = None,
    full: Annotated[bool, typer.Option("--full", help="Run every hostile program, slow ones included.")] = False,
    json_out: Annotated[str | None, typer.Option("--json", help="Write the diagnosis as JSON (- for stdout).")] = None,
    docker_mode: DockerModeOpt = None,
) -> None:
    """Prove which backends contain hostile programs here (fails closed), with start-up latency."""
    from verify_cli.sandbox.doctor import diagnose

    if json_out == "-":
        console.use_stderr()
    names = backend or None
    if names:
        for n in names:
            sandbox_class(n)  # unknown names are usage errors before anything runs
    # The one backend with options here: a warm single-use pool, so that its latency is a warm start's.
    options = {"docker": sandbox_options(docker_mode=docker_mode or "node", pool_size=DOCTOR_POOL)}
    with console.progress_bar("sandbox doctor", 0) as advance:
        diagnoses = diagnose(names, fast=not full, progress=lambda m: advance(m), options=options)
    console.doctor_report(diagnoses)
    if json_out:
        write_json(json_out, {"tool": "verify-cli", "command": "sandbox doctor",
                              "backends": [d.to_dict() for d in diagnoses]})
    if not any(d.proven_safe for d in diagnoses):
        raise typer.Exit(ExitCode.DEFECTIVE)


@sandbox_app.command("cleanup")
def cleanup_command(
    all_containers: Annotated[
        bool, typer.Option("--all", help="Also remove containers of live verify-cli runs.")] = False,
) -> None:
    """Remove containers that crashed verify-cli runs left behind (label verify-cli=1)."""
    try:
        from docker.client import DockerClient

        from verify_cli.sandbox.docker import reap_containers

        client = DockerClient.from_env()
        client.ping()
    except Exception as e:
        raise SandboxUnavailableError(f"the Docker daemon does not answer: {e}",
                                      hint="run scripts/setup_docker.sh, or start dockerd") from None
    removed = reap_containers(client, orphans_only=not all_containers)
    console.info(f"removed {len(removed)} container(s)")


@sandbox_app.command("build-images")
def build_images_command(
    names: Annotated[list[str] | None, typer.Argument(help="Images to build (default: all).")] = None,
    offline: Annotated[bool | None, typer.Option("--offline/--online",
                                                 help="Force the debootstrap build, or the Dockerfiles.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild images that exist.")] = False,
) -> None:
    """Build the sandbox images the sample tasks name (offline with debootstrap when no registry answers)."""
    from verify_cli.sandbox.images import build_images

    reports = build_images(names or None, offline=offline, force=force, progress=console.info)
    for r in reports:
        console.info(f"{r.tag}: {r.action} ({r.seconds:.1f}s) {r.detail}")
