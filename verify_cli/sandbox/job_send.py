"""Handing a job to a warm process over its control socket: one JSON message with the job's
descriptors attached (``SCM_RIGHTS``), the one way the bwrap warm workers and candidate parents
are given a run."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def send_job(ctl: socket.socket, request: Mapping[str, Any], fds: Sequence[int], *,
             unreachable: Callable[[str], Exception]) -> None:
    """Send ``request`` (JSON) with ``fds`` over ``ctl``; where the process cannot be reached,
    raise ``unreachable(reason)`` (the caller's infrastructure error), chained to the OSError."""
    try:
        socket.send_fds(ctl, [json.dumps(request).encode()], list(fds))
    except OSError as e:
        raise unreachable(str(e)) from e


__all__ = ["send_job"]
