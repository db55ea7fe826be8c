"""Small commands: ``schema``, ``new-task``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from verify_cli.cli import console
from verify_cli.tasks.scaffold import scaffold_task
from verify_cli.tasks.schema import task_schema


def schema_command() -> None:
    """Print the task.toml JSON Schema."""
    console.plain(json.dumps(task_schema(), indent=2))


def new_task_command(
    name: Annotated[Path, typer.Argument(help="Folder to create (its name becomes the task id).")],
    language: Annotated[str, typer.Option(help="python or javascript.")] = "python",
    domain: Annotated[str, typer.Option(help="Task domain.")] = "coding",
) -> None:
    """Scaffold a valid task folder (passes check-tasks as it stands)."""
    dest = scaffold_task(name, language=language, domain=domain)
    console.info(f"created task {dest}: edit prompt.md, starter/, solution/ and tests/, then run "
                 f"'verify-cli check-tasks {dest}'")
