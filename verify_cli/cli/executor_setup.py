"""Build the executor a grading command asked for, and tell the user what the cluster did."""

from __future__ import annotations

from verify_cli.cli import console
from verify_cli.executors import Executor, create_executor
from verify_cli.sandbox.registry import resolve_backend_name


def open_executor(executor: str, *, sandbox: str, pool_size: int, warm: bool, ray_address: str,
                  docker_mode: str = "node") -> Executor:
    """The executor named ``executor``; warnings (a fallback to ``process``) go to the console."""
    if executor == "local":
        sandbox, warning = resolve_backend_name(sandbox)
        if warning:
            console.warning(warning)
    built = create_executor(executor, sandbox=sandbox, pool_size=pool_size, warm=warm, ray_address=ray_address,
                            docker_mode=docker_mode)
    for warning in getattr(built, "warnings", []):
        console.warning(f"WARNING: {warning}")
    return built


def report_cluster(built: Executor) -> None:
    """After a run on a cluster: where the runs went, what was re-queued or drained."""
    stats = getattr(built, "stats", None)
    if stats is None:
        return
    spread = ", ".join(f"{node} {n}" for node, n in sorted(stats.per_node.items()))
    console.info(f"runs per node: {spread or 'none'}")
    if stats.requeued or stats.lost:
        console.warning(f"{stats.requeued} run(s) re-queued after a node or actor failure, "
                        f"{stats.lost} lost (reported as infra errors, never scored)")
    for node in stats.drained:
        console.warning(f"node {node} was drained")
