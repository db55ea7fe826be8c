"""``cluster status``: which nodes a Ray cluster has, their sandbox backends and slots, how busy."""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass, field
from typing import Any

from verify_cli._version import __version__
from verify_cli.executors.ray_cluster import ACTOR_NAMESPACE, ACTOR_PREFIX, cluster_nodes, connect, pin_to


@dataclass
class NodeStatus:
    node: str
    node_id: str
    address: str
    alive: bool
    cpus: float
    slots: int
    #: Slots held by verify-cli runs now (their sandbox-pool actors), and sandboxes running in them.
    slots_held: int = 0
    running: int = 0
    waiting: int = 0
    runs: int = 0
    backends: dict[str, str] = field(default_factory=dict)  # name -> "available" or why not
    version: str = ""
    python: str = ""
    problem: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def probe_node() -> dict[str, Any]:
    """What this node can grade with (runs on the node)."""
    from verify_cli.sandbox.registry import sandbox_class, sandbox_names

    backends: dict[str, str] = {}
    for name in sandbox_names():
        avail = sandbox_class(name).availability()
        backends[name] = "available" if avail.available else (avail.reason or "unavailable")
    return {"backends": backends, "version": __version__, "python": platform.python_version()}


def cluster_status(address: str, *, timeout: float = 60.0) -> list[NodeStatus]:
    """The state of every node of the cluster at ``address``; probes each live node."""
    ray, owns, _ = connect(address, start_local=False)
    try:
        return _status(ray, timeout)
    finally:
        if owns:
            ray.shutdown()


def _status(ray: Any, timeout: float) -> list[NodeStatus]:
    statuses = {n.node_id: NodeStatus(n.name, n.node_id, n.address, n.alive, n.cpus, n.slots)
                for n in cluster_nodes(ray)}
    probe = ray.remote(probe_node)
    probes = {probe.options(num_cpus=0, scheduling_strategy=pin_to(s.node_id)).remote(): s
              for s in statuses.values() if s.alive}
    stats = []
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry.get("namespace") == ACTOR_NAMESPACE and entry.get("name", "").startswith(ACTOR_PREFIX):
            try:
                stats.append(ray.get_actor(entry["name"], namespace=ACTOR_NAMESPACE).stats.remote())
            except ValueError:  # ended since it was listed
                continue
    pending = list(probes) + stats
    ready, _ = ray.wait(pending, num_returns=len(pending), timeout=timeout) if pending else ([], [])
    ready_set = set(ready)
    for ref, s in probes.items():
        if ref not in ready_set:
            s.problem = f"did not answer a probe within {timeout:g}s"
            continue
        try:
            info = ray.get(ref)
        except ray.exceptions.RayError as e:
            s.problem = f"probe failed: {str(e).strip().splitlines()[-1][:200]}"
            continue
        s.backends, s.version, s.python = info["backends"], info["version"], info["python"]
        if s.version != __version__:
            s.problem = f"verify-cli {s.version} on the node, {__version__} here"
    by_name = {s.node: s for s in statuses.values()}
    for ref in stats:
        if ref not in ready_set:
            continue
        try:
            info = ray.get(ref)
        except ray.exceptions.RayError:
            continue
        held = by_name.get(info["node"])
        if held is not None:
            held.slots_held += info["slots"]
            held.running += info["running"]
            held.waiting += info["waiting"]
            held.runs += info["done"]
    return list(statuses.values())
