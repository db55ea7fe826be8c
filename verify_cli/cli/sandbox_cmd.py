"""``verify-cli sandbox ...``: inspect and maintain sandbox backends."""

from __future__ import annotations

import typer

from verify_cli.cli import console
from verify_cli.sandbox.registry import sandbox_class, sandbox_names

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
