"""The verify-cli entry point: the command tree and the one place errors become exit codes."""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
import threading
from collections.abc import Iterator

import typer

from verify_cli._version import __version__
from verify_cli.cli import console, help_style
from verify_cli.errors import ExitCode, VerifyError

help_style.install()

#: The command tree: (name, module, attribute, whether it is a group of commands). A command's
#: module is imported only when the tree is built with it: a run of one command builds the tree
#: with that command alone (the others' imports are most of the start-up's cost), ``--help`` and
#: anything else the whole tree.
COMMANDS: tuple[tuple[str, str, str, bool], ...] = (
    ("check-tasks", "verify_cli.cli.check_tasks", "check_tasks_command", False),
    ("audit", "verify_cli.cli.audit", "audit_command", False),
    ("difficulty", "verify_cli.cli.difficulty", "difficulty_command", False),
    ("schema", "verify_cli.cli.misc", "schema_command", False),
    ("new-task", "verify_cli.cli.misc", "new_task_command", False),
    ("sandbox", "verify_cli.cli.sandbox_cmd", "sandbox_app", True),
    ("env", "verify_cli.cli.env_cmd", "env_app", True),
    ("train", "verify_cli.cli.train", "train_command", False),
    ("trajectories", "verify_cli.cli.train", "trajectories_app", True),
    ("import", "verify_cli.cli.import_export", "import_command", False),
    ("export", "verify_cli.cli.import_export", "export_command", False),
    ("tasks", "verify_cli.cli.tasks_cmd", "tasks_app", True),
    ("cluster", "verify_cli.cli.cluster_cmd", "cluster_app", True),
    ("serve", "verify_cli.cli.serve", "serve_command", False),
    ("agent", "verify_cli.cli.agent_cmd", "agent_app", True),
)


def _version(value: bool) -> None:
    if value:
        console.plain(f"verify-cli {__version__}")
        raise typer.Exit()


def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """verify-cli."""


def build_app(only: str | None = None) -> typer.Typer:
    """The command tree, every command in it, or the command ``only`` alone."""
    tree = typer.Typer(name="verify-cli", no_args_is_help=True, add_completion=False,
                       pretty_exceptions_enable=False,
                       help="Curate and use verifiable tasks: prove tasks solvable, grade candidates in sandboxes.")
    tree.callback()(root)
    for name, module, attribute, group in COMMANDS:
        if only is not None and name != only:
            continue
        target = getattr(importlib.import_module(module), attribute)
        if group:
            tree.add_typer(target, name=name)
        else:
            tree.command(name)(target)
    return tree


_FULL: list[typer.Typer] = []


def __getattr__(name: str) -> typer.Typer:
    """``app``: the whole command tree, built on first use."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _FULL:
        _FULL.append(build_app())
    return _FULL[0]


def _tree_for(argv: list[str] | None) -> typer.Typer:
    args = sys.argv[1:] if argv is None else argv
    first = args[0] if args else ""
    if any(first == name for name, *_ in COMMANDS):
        return build_app(first)
    return __getattr__("app")


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
        code = _tree_for(argv)(args=argv, standalone_mode=False)
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
