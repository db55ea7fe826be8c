"""What the stand-in writes into the run's results folder: the call trace (audit's observed
equivalence: every message to and from the candidate appended to ``verify-call-trace.jsonl``
when ``VERIFY_TRACE_CALLS`` asks for it; bounded, never raising) and the note that the candidate
server never came up."""

from __future__ import annotations

import json
import os
from typing import Any

TRACE_ENV = "VERIFY_TRACE_CALLS"
TRACE_FILE = "verify-call-trace.jsonl"
TRACE_MAX_BYTES = 8 * 1024 * 1024
#: Written to the results folder when the candidate server never came up: no candidate code
#: has run by then, so that is the infrastructure's fault (the grader reports infra_error).
NO_CANDIDATE_FILE = "verify-no-candidate-process.txt"


def mark_infrastructure_fault(message: str) -> None:
    results = os.environ.get("VERIFY_RESULTS_DIR", "")
    if results:
        try:
            with open(os.path.join(results, NO_CANDIDATE_FILE), "w", encoding="utf-8") as fh:
                fh.write(message)
        except OSError:
            pass


class Tracer:
    """The call trace of one session, when ``VERIFY_TRACE_CALLS`` asks for it (else inert)."""

    def __init__(self) -> None:
        results = os.environ.get("VERIFY_RESULTS_DIR", "")
        self.path = os.path.join(results, TRACE_FILE) if results and os.environ.get(TRACE_ENV) else ""
        self.written = 0

    def record(self, kind: str, message: Any) -> None:
        if not self.path or self.written > TRACE_MAX_BYTES:
            return
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
        line = json.dumps({"test": test, kind: message}, sort_keys=True, default=repr) + "\n"
        self.written += len(line)
        if self.written > TRACE_MAX_BYTES:
            line = json.dumps({"truncated": True}) + "\n"
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError:
            self.path = ""


__all__ = ["NO_CANDIDATE_FILE", "TRACE_ENV", "TRACE_FILE", "TRACE_MAX_BYTES", "Tracer", "mark_infrastructure_fault"]
