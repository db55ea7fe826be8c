"""Which nodes may take work: strikes for failures, drained after too many in a row."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class NodeRecord:
    node: str
    strikes: int = 0  # failures since the last success
    failures: int = 0
    successes: int = 0
    drained: bool = False
    reasons: list[str] = field(default_factory=list)


class NodeHealth:
    """A node that fails ``drain_after`` times in a row (its actor died, a run could not be
    delivered, its sandbox failed) is drained: it gets no more work in this run."""

    def __init__(self, drain_after: int = 3) -> None:
        self.drain_after = max(1, drain_after)
        self._nodes: dict[str, NodeRecord] = {}
        self._lock = threading.Lock()

    def _record(self, node: str) -> NodeRecord:
        rec = self._nodes.get(node)
        if rec is None:
            rec = self._nodes[node] = NodeRecord(node)
        return rec

    def success(self, node: str) -> None:
        with self._lock:
            rec = self._record(node)
            rec.successes += 1
            rec.strikes = 0

    def failure(self, node: str, reason: str) -> bool:
        """Count a failure; True when this one drains the node."""
        with self._lock:
            rec = self._record(node)
            rec.failures += 1
            rec.strikes += 1
            if len(rec.reasons) < 5:
                rec.reasons.append(reason)
            if not rec.drained and rec.strikes >= self.drain_after:
                rec.drained = True
                return True
            return False

    def drain(self, node: str, reason: str) -> None:
        with self._lock:
            rec = self._record(node)
            rec.drained = True
            rec.reasons.append(reason)

    def drained(self, node: str) -> bool:
        with self._lock:
            rec = self._nodes.get(node)
            return rec is not None and rec.drained

    def records(self) -> list[NodeRecord]:
        with self._lock:
            return [NodeRecord(r.node, r.strikes, r.failures, r.successes, r.drained, list(r.reasons))
                    for r in self._nodes.values()]
