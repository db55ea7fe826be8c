"""Connecting to a Ray cluster and finding the nodes that offer sandbox slots."""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from verify_cli.executors.base import ExecutorUnavailableError, import_ray

#: The custom resource a node offers for sandboxed runs: how many it may run at once.
SLOTS_RESOURCE = "sandbox_slots"
#: The Ray namespace of verify-cli's named sandbox-pool actors (``cluster status`` finds them there).
ACTOR_NAMESPACE = "verify-cli"
ACTOR_PREFIX = "sandbox-pool:"

START_HINT = ("start a head with `ray start --head --resources '{\"sandbox_slots\": 4}'` and workers with "
              "`ray start --address HEAD:6379 --resources '{\"sandbox_slots\": N}'`")


@dataclass(frozen=True)
class SandboxNode:
    """A node of the cluster as Ray reports it."""

    node_id: str
    address: str
    alive: bool
    slots: int
    cpus: float

    @property
    def name(self) -> str:
        """How results and reports name the node: ``ip/first 8 hex of the node id``."""
        return f"{self.address}/{self.node_id[:8]}"


def connect(address: str, *, start_local: bool = True,
            local_slots: int | None = None) -> tuple[ModuleType, bool, str | None]:
    """Ray, connected to the cluster at ``address``; whether this call made the connection (so
    its caller should end it); and a notice for the user, or None.

    ``auto``: the cluster started on this machine, or, when none runs (and ``start_local``), a local Ray instance
    started here as ``ray.init()`` does, offering ``local_slots`` sandbox slots (default: one
    per core) and ended with the connection; the notice says so. A ``HOST:PORT`` address only
    connects to a cluster that is already there.
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray, False, None
    if address != "auto" and "://" not in address and not _answers(address):
        # ray.init retries an address that does not answer for minutes: fail now instead.
        raise ExecutorUnavailableError(f"no Ray cluster answers at {address!r} (nothing listens there)",
                                       hint=START_HINT)
    quiet: dict[str, Any] = {"namespace": ACTOR_NAMESPACE, "log_to_driver": False,
                             "logging_level": logging.WARNING, "configure_logging": False}
    try:
        ray.init(address=address, **quiet)
    except ConnectionError as e:
        if address != "auto" or not start_local or not _no_cluster_running(e):
            raise ExecutorUnavailableError(f"no Ray cluster answers at {address!r}: {e}", hint=START_HINT) from None
    except (RuntimeError, ValueError) as e:
        raise ExecutorUnavailableError(f"no Ray cluster answers at {address!r}: {e}", hint=START_HINT) from None
    else:
        return ray, True, None
    slots = local_slots or os.cpu_count() or 1
    try:
        ray.init(resources={SLOTS_RESOURCE: slots}, include_dashboard=False, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ExecutorUnavailableError(f"no Ray cluster runs here and a local one could not start: {e}",
                                       hint=START_HINT) from None
    return ray, True, (f"no Ray cluster is running: started a local Ray instance with {slots} sandbox slot(s), "
                       "ended when this command ends (give --ray-address HOST:PORT to use a cluster)")


def _no_cluster_running(error: ConnectionError) -> bool:
    """Whether ``ray.init(address="auto")`` failed because no cluster runs on this machine."""
    return "Could not find any running Ray instance" in str(error)


def _answers(address: str, timeout: float = 5.0) -> bool:
    """Whether something accepts a TCP connection at ``HOST:PORT``."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def cluster_nodes(ray: ModuleType) -> list[SandboxNode]:
    """Every node Ray knows, dead ones included, in a stable order."""
    nodes: list[SandboxNode] = []
    for n in ray.nodes():
        resources: dict[str, Any] = n.get("Resources") or {}
        nodes.append(SandboxNode(node_id=n["NodeID"], address=n.get("NodeManagerAddress", "?"),
                                 alive=bool(n.get("Alive")), slots=int(resources.get(SLOTS_RESOURCE, 0)),
                                 cpus=float(resources.get("CPU", 0.0))))
    return sorted(nodes, key=lambda n: (not n.alive, n.address, n.node_id))


def sandbox_nodes(ray: ModuleType) -> list[SandboxNode]:
    """The live nodes that offer sandbox slots; an error saying how to add some when none do."""
    nodes = [n for n in cluster_nodes(ray) if n.alive and n.slots > 0]
    if not nodes:
        raise ExecutorUnavailableError(f"no live node of the Ray cluster offers the {SLOTS_RESOURCE!r} resource",
                                       hint=START_HINT)
    return nodes


def node_is_alive(ray: ModuleType, node_id: str) -> bool:
    return any(n.node_id == node_id and n.alive for n in cluster_nodes(ray))


def pin_to(node_id: str) -> Any:
    """A scheduling strategy that runs an actor or task on ``node_id`` and nowhere else."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
