"""Handing a job to a warm process over its control socket: one JSON message with the job's
descriptors attached (``SCM_RIGHTS``), the one way the bwrap warm workers and candidate parents
are given a run; and the one way such a message is read back with its descriptors and sender's
pid (warm workers, session parents)."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def send_job(ctl: socket.socket, request: Mapping[str, Any], fds: Sequence[int], *,
             unreachable: Callable[[str], Exception], flags: int = 0) -> None:
    """Send ``request`` (JSON) with ``fds`` over ``ctl`` (``flags``: the send's, such as
    ``MSG_DONTWAIT``); where the process cannot be reached, raise ``unreachable(reason)`` (the
    caller's infrastructure error), chained to the OSError."""
    try:
        socket.send_fds(ctl, [json.dumps(request).encode()], list(fds), flags)
    except OSError as e:
        raise unreachable(str(e)) from e


def recv_with_pid(sock: socket.socket, max_fds: int = 0, *,
                  max_bytes: int = 1 << 20) -> tuple[bytes, list[int], int | None]:
    """One message (at most ``max_bytes``), the descriptors it carried (at most ``max_fds``) and
    the sender's pid (the socket must have SO_PASSCRED set; the kernel translates the pid into
    this process's pid namespace; None without credentials)."""
    anc = socket.CMSG_SPACE(12) + (socket.CMSG_SPACE(max_fds * 4) if max_fds else 0)
    data, ancdata, _flags, _addr = sock.recvmsg(max_bytes, anc)
    fds: list[int] = []
    pid: int | None = None
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds.extend(struct.unpack(f"{usable // 4}i", payload[:usable]))
        elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= 12:
            pid = struct.unpack("3i", payload[:12])[0]
    return data, fds, pid


__all__ = ["recv_with_pid", "send_job"]
