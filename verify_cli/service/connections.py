"""What each connection may cost the service: small answers leave at once, a slow or silent
client is cut off, and the number of open connections stays below the open-file limit.

- **TCP_NODELAY** on the listening socket and every accepted one: without it a small answer
  waits for the peer's delayed ACK (about 40 ms on Linux) before it leaves, on every call of an
  agent episode. asyncio sets it only on sockets whose ``proto`` is ``IPPROTO_TCP``, which a
  socket made as ``socket(AF_INET, SOCK_STREAM)`` is not.
- **Header timeout**: a connection that has not sent a whole request head within
  ``header_timeout`` seconds of opening (or of starting its next request) is answered 408 and
  closed. uvicorn bounds only the idle time between requests.
- **Connection cap**: past ``max_connections`` open connections a new one is answered 503 and
  closed at once, so that half-sent requests cannot take every file descriptor. The default is
  half the open-file limit, which is raised to its hard maximum first.

The body's own timeout (a client that sends its head and then trickles the body) is the
gate's (:mod:`verify_cli.service.gate`), which sees each chunk arrive.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: File descriptors kept back from the connection cap's default (sandboxes, the journal, logs).
FD_RESERVE = 256


def set_nodelay(sock: socket.socket) -> None:
    """Small writes leave at once (no Nagle wait for the peer's delayed ACK)."""
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def raise_open_file_limit(target: int = 65536) -> int:
    """Raise the soft open-file limit towards its hard limit (at most ``target``); the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = target if hard == resource.RLIM_INFINITY else min(hard, target)
    if want > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def default_max_connections(open_files: int) -> int:
    """Half of what the open-file limit leaves after :data:`FD_RESERVE` (at least 16)."""
    return max(16, (open_files - FD_RESERVE) // 2)


_TIMEOUT_408 = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                b"content-length: %d\r\n\r\n%s")
_FULL_503 = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
             b"retry-after: 1\r\ncontent-length: %d\r\n\r\n%s")


def _raw(template: bytes, code: str, message: str) -> bytes:
    body = b'{"error": {"code": "%s", "message": "%s", "field": null}}' % (code.encode(), message.encode())
    return template % (len(body), body)


class ConnectionCounters:
    """Connections refused or cut, for the metrics and tests."""

    def __init__(self) -> None:
        self.refused = 0
        self.header_timeouts = 0


def bounded_protocol(*, header_timeout: float, max_connections: int,
                     counters: ConnectionCounters) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with TCP_NODELAY, a header timeout and a connection cap."""

    class BoundedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            sock = transport.get_extra_info("socket")
            if sock is not None:
                set_nodelay(sock)
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                counters.refused += 1
                transport.write(_raw(_FULL_503, "too_many_connections",
                                     f"the service has {max_connections} connections open; retry"))
                transport.close()
                return
            self._arm_header_timer()

        def _arm_header_timer(self) -> None:
            self._cancel_header_timer()
            self._header_timer = self.loop.call_later(header_timeout, self._header_timed_out)

        def _cancel_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_timed_out(self) -> None:
            self._header_timer = None
            if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
                return
            counters.header_timeouts += 1
            if self.conn.our_state is h11.IDLE:
                self.transport.write(_raw(_TIMEOUT_408, "header_timeout",
                                          f"the request head did not arrive within {header_timeout:g} s"))
            self.transport.close()

        def data_received(self, data: bytes) -> None:
            starting = self.conn.their_state is h11.IDLE and self._header_timer is None
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._cancel_header_timer()  # the head is in: the body's time is the gate's
            elif starting and not self.transport.is_closing():
                self._arm_header_timer()  # a next request began on a kept-alive connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_header_timer()
            super().connection_lost(exc)

    return BoundedH11Protocol
