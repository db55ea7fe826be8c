"""``verify-cli serve``: parse options, run verify_cli.service until SIGTERM."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from verify_cli.cli import console
from verify_cli.cli.options import (
    DockerModeOpt,
    ExecutorOpt,
    JobsOpt,
    PoolOpt,
    RayAddressOpt,
    SandboxOpt,
    default_jobs,
    sandbox_options,
)
from verify_cli.errors import UsageError

TOKEN_ENV = "VERIFY_SERVE_TOKEN"


def _read_token(token_file: Path | None) -> str | None:
    if token_file is not None:
        try:
            token = token_file.read_text(encoding="utf-8").strip()
        except OSError as e:
            raise UsageError(f"{token_file}: cannot read the token file: {e.strerror}") from None
        if not token:
            raise UsageError(f"{token_file}: the token file is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def default_journal() -> Path:
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "verify-cli" / "serve-journal.jsonl"


def serve_command(
    paths: Annotated[list[Path], typer.Argument(help="Task folders, or folders searched recursively for tasks.")],
    host: Annotated[str, typer.Option("--host", help="Address to listen on (not loopback: a token is required).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="Port (0: any free port).")] = 8000,
    token_file: Annotated[Path | None, typer.Option(
        "--token-file", help=f"A file holding the bearer token clients must send (else ${TOKEN_ENV}).")] = None,
    sandbox: SandboxOpt = "auto",
    pool_size: PoolOpt = None,
    docker_mode: DockerModeOpt = None,
    jobs: JobsOpt = None,
    queue_size: Annotated[int, typer.Option("--queue-size", min=0, help=(
        "Candidates that may wait beyond the --jobs running; past that, 429 with Retry-After."))] = 64,
    max_body_mb: Annotated[float, typer.Option("--max-body-mb", min=0.001, help="Largest request body.")] = 16.0,
    deadline: Annotated[float, typer.Option("--deadline", min=0.1, help=(
        "Seconds a request may take when it names no deadline_seconds."))] = 600.0,
    drain_seconds: Annotated[float, typer.Option("--drain-seconds", min=0, help=(
        "On SIGTERM: how long in-flight work may finish before it is answered infra_error."))] = 30.0,
    journal: Annotated[Path | None, typer.Option("--journal", help=(
        "Where acknowledged results are written before they are answered (default: "
        "$XDG_STATE_HOME/verify-cli/serve-journal.jsonl)."))] = None,
    no_journal: Annotated[bool, typer.Option("--no-journal", help=(
        "Keep no journal: a result answered before a crash is graded again on retry."))] = False,
    fsync: Annotated[bool, typer.Option("--fsync", help="fsync the journal per result (survives a machine crash).")
                     ] = False,
    cold: Annotated[bool, typer.Option("--cold", help="No warm pytest workers.")] = False,
    max_sessions: Annotated[int, typer.Option("--max-sessions", min=0, help=(
        "Agent sessions (/v1/sessions) open at once; past that, 429 with Retry-After."))] = 16,
    session_idle_seconds: Annotated[float, typer.Option("--session-idle-seconds", min=0.1, help=(
        "An agent session without a call for this long is closed (reclaimed)."))] = 600.0,
    header_timeout: Annotated[float, typer.Option("--header-timeout", min=0.1, help=(
        "Seconds a connection has to send its request head (else 408, closed)."))] = 10.0,
    body_timeout: Annotated[float, typer.Option("--body-timeout", min=0.1, help=(
        "Seconds a request has to send its body after its head (else 408, closed)."))] = 60.0,
    max_connections: Annotated[int | None, typer.Option("--max-connections", min=1, help=(
        "Connections open at once; more are answered 503 and closed (default: half the open-file "
        "limit)."))] = None,
    run_code_hold: Annotated[float, typer.Option("--run-code-hold", min=0.0, help=(
        "Seconds /run_code waits for a free worker before answering 504 (never 429: SandboxFusion "
        "clients do not retry it); also cut to the request's compile_timeout + 8 s."))] = 18.0,
    run_code_languages: Annotated[str, typer.Option("--run-code-languages", help=(
        "Compiled languages /run_code runs on --sandbox docker (cpp,go,java,rust,typescript): their "
        "toolchains are built once into one image of Debian packages. bwrap and process use the "
        "host's compilers."))] = "",
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = "auto",
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
) -> None:
    """Serve /v1/grade, /v1/sessions (agent episodes), /run_code (SandboxFusion), /healthz and /metrics
    over HTTP until SIGTERM."""
    try:
        from verify_cli.service.core import ServiceConfig
        from verify_cli.service.languages import parse_languages
        from verify_cli.service.server import serve
    except ImportError as e:
        raise UsageError(f"verify-cli serve needs the 'serve' extra ({e.name} is not installed)",
                         hint="pip install 'verify-cli[serve]'") from None
    if log_level.lower() not in ("debug", "info", "warning", "error"):
        raise UsageError(f"--log-level {log_level!r}: choose debug, info, warning or error")
    config = ServiceConfig(
        roots=tuple(paths), executor=executor, sandbox=sandbox, jobs=jobs or default_jobs(), queue_size=queue_size,
        warm=not cold, sandbox_options=sandbox_options(pool_size=pool_size, docker_mode=docker_mode),
        ray_address=ray_address,
        token=_read_token(token_file), max_body_bytes=int(max_body_mb * 1024 * 1024), default_deadline=deadline,
        drain_seconds=drain_seconds, journal=None if no_journal else (journal or default_journal()),
        journal_is_default=journal is None, journal_fsync=fsync, max_sessions=max_sessions,
        session_idle_seconds=session_idle_seconds, header_timeout=header_timeout, body_timeout=body_timeout,
        max_connections=max_connections, run_code_hold_seconds=run_code_hold,
        run_code_languages=parse_languages(run_code_languages))
    outcome = serve(config, host=host, port=port, log_level=log_level.lower(),
                    on_listening=lambda url: console.info(f"verify-cli serve: listening on {url}"))
    if outcome.drained:
        console.info("verify-cli serve: drained and stopped")
    if outcome.abandoned:
        # Their candidates were answered infra_error; the worker threads would hold the exit
        # until each run's own wall limit. The executor is closed already.
        console.warning(f"verify-cli serve: {outcome.abandoned} run(s) abandoned at shutdown")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
