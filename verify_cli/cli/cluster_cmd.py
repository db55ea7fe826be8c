"""``verify-cli cluster ...``: look at the Ray cluster the ray executor grades on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import typer
from rich.markup import escape

from verify_cli.cli import console
from verify_cli.cli.console import Table
from verify_cli.cli.options import RayAddressOpt
from verify_cli.errors import ExitCode
from verify_cli.executors.status import NodeStatus, cluster_status
from verify_cli.report.files import write_json

cluster_app = typer.Typer(help="Inspect the Ray cluster that --executor ray grades on.", no_args_is_help=True)


def _backends(backends: dict[str, str]) -> str:
    return ", ".join(f"[green]{escape(n)}[/]" if why == "available" else f"[dim]{escape(n)}[/]"
                     for n, why in sorted(backends.items())) or "-"


def _table(nodes: Sequence[NodeStatus]) -> None:
    table = Table(title=f"Ray cluster: {len(nodes)} node(s)", title_justify="left")
    for col in ("node", "alive", "cpus", "sandbox slots", "held", "running", "waiting", "backends", "problem"):
        table.add_column(col, overflow="fold",
                         justify="right" if col in ("cpus", "sandbox slots", "held", "running", "waiting") else "left")
    for n in nodes:
        table.add_row(escape(n.node), "[green]yes[/]" if n.alive else "[red]no[/]", f"{n.cpus:g}",
                      str(n.slots) if n.slots else "[dim]0[/]", str(n.slots_held), str(n.running),
                      str(n.waiting), _backends(n.backends), escape(n.problem) or "-")
    console.out.print(table)
    slots = sum(n.slots for n in nodes if n.alive)
    running = sum(n.running for n in nodes)
    console.out.print(f"[bold]{slots}[/] sandbox slot(s) on live nodes, {running} sandbox(es) running now"
                      + ("" if slots else "  [yellow](start nodes with --resources '{\"sandbox_slots\": N}')[/]"))


@cluster_app.command("status")
def status_command(
    ray_address: RayAddressOpt = "auto",
    json_out: Annotated[str | None, typer.Option("--json", help="Write the status as JSON (- for stdout).")] = None,
) -> None:
    """Which nodes are there, which sandbox backends and slots each offers, how busy each is."""
    if json_out == "-":
        console.use_stderr()
    nodes = cluster_status(ray_address)
    _table(nodes)
    if json_out:
        write_json(json_out, {"tool": "verify-cli", "command": "cluster status", "address": ray_address,
                              "nodes": [n.to_dict() for n in nodes]})
    if not any(n.alive and n.slots > 0 for n in nodes):
        raise typer.Exit(ExitCode.INFRA)
