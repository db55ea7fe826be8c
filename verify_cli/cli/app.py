"""The verify-cli entry point: the command tree and the one place errors become exit codes."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

import typer

from verify_cli._version import __version__
from verify_cli.cli import console, help_style
from verify_cli.cli.audit import audit_command
from verify_cli.cli.check_tasks import check_tasks_command
from verify_cli.cli.cluster_cmd import cluster_app
from verify_cli.cli.difficulty import difficulty_command
from verify_cli.cli.import_export import export_command, import_command
from verify_cli.cli.misc import new_task_command, schema_command
from verify_cli.cli.sandbox_cmd import sandbox_app
from verify_cli.cli.serve import serve_command
from verify_cli.cli.tasks_cmd import tasks_app
from verify_cli.cli.train import train_command, trajectories_app
from verify_cli.errors import ExitCode, VerifyError

help_style.install()

app = typer.Typer(name="verify-cli", no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False,
                  help="Curate and use verifiable tasks: prove tasks solvable, grade candidates in sandboxes.")


def _version(value: bool) -> None:
    if value:
        console.plain(f"verify-cli {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """verify-cli."""


app.command("check-tasks")(check_tasks_command)
app.command("audit")(audit_command)
app.command("difficulty")(difficulty_command)
app.command("schema")(schema_command)
app.command("new-task")(new_task_command)
app.add_typer(sandbox_app, name="sandbox")
app.command("train")(train_command)
app.add_typer(trajectories_app, name="trajectories")
app.command("import")(import_command)
app.command("export")(export_command)
app.add_typer(tasks_app, name="tasks")
app.add_typer(cluster_app, name="cluster")
app.command("serve")(serve_command)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (a cancelled CI job, a timeout) ends the command as Ctrl-C does, so its clean-up
    runs (the docker backend removes its long-lived containers); by default it would die at once."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; expected errors become messages and exit codes, Ctrl-C (or SIGTERM) exits 130."""
    console.use_stdout()
    with _sigterm_interrupts():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    try:
        code = app(args=argv, standalone_mode=False)
    except VerifyError as e:
        console.error(str(e))
        return int(e.exit_code)
    except KeyboardInterrupt:
        console.error("interrupted")
        return int(ExitCode.INTERRUPTED)
    except typer.Exit as e:
        return int(e.exit_code or 0)
    except SystemExit as e:  # pragma: no cover
        return int(e.code or 0) if isinstance(e.code, int) else 1
    except typer.Abort:
        console.error("aborted")
        return int(ExitCode.INTERRUPTED)
    except typer.exceptions.TyperException as e:
        # Bad command-line usage (unknown option, bad value): typer's own message, exit 2.
        show = getattr(e, "show", None)
        if callable(show):
            show()
        else:
            console.error(str(e))
        return int(ExitCode.USAGE)
    return int(code) if isinstance(code, int) else 0


def entry() -> None:  # pragma: no cover
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()
