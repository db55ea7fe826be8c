"""Build the executor a grading command asked for, and tell the user what the cluster did."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verify_cli.cli import console
from verify_cli.executors import Executor, create_executor


def open_executor(executor: str, *, sandbox: str, sandbox_options: Mapping[str, Any] | None = None,
                  warm: bool, ray_address: str) -> Executor:
    """The executor named ``executor`` grading in ``sandbox`` with the options given (checked
    once, there); its warnings (a fall-back to ``process``, a local Ray started) go to the console."""
    built = create_executor(executor, sandbox=sandbox, sandbox_options=sandbox_options, warm=warm,
                            ray_address=ray_address)
    for warning in built.warnings:
        console.warning(warning if warning.startswith("WARNING") else f"WARNING: {warning}")
    return built


def report_cluster(built: Executor) -> None:
    """After a run on a cluster: where the runs went, what was re-queued or drained."""
    stats = built.stats
    if stats is None:
        return
    spread = ", ".join(f"{node} {n}" for node, n in sorted(stats.per_node.items()))
    console.info(f"runs per node: {spread or 'none'}")
    if stats.requeued or stats.lost:
        console.warning(f"{stats.requeued} run(s) re-queued after a node or actor failure, "
                        f"{stats.lost} lost (reported as infra errors, never scored)")
    for node in stats.drained:
        console.warning(f"node {node} was drained")
