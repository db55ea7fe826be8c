"""Run the service under uvicorn: a bound socket, JSON logs, and a graceful drain on SIGTERM.

On SIGTERM (or Ctrl-C) the service stops taking work (new requests get 503, the listening
socket closes), lets what is in flight finish for ``drain_seconds``, then answers what is left
``infra_error`` and exits.
"""

from __future__ import annotations

import gc
import ipaddress
import logging
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

import uvicorn

from verify_cli.errors import UsageError
from verify_cli.service.app import create_app
from verify_cli.service.connections import (
    ConnectionCounters,
    bounded_protocol,
    default_max_connections,
    raise_open_file_limit,
    set_nodelay,
)
from verify_cli.service.core import GradingService, ServiceConfig
from verify_cli.service.gate import JsonFormatter

log = logging.getLogger("verify_cli.service")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None) -> None:
    """A service reachable from other machines must ask for a token."""
    if not token and not is_loopback(host):
        raise UsageError(f"refusing to serve on {host} without a token: anyone who reaches it could run code",
                         hint="pass --token-file FILE (or set VERIFY_SERVE_TOKEN), or bind to 127.0.0.1")


def setup_logging(level: str = "info") -> None:
    """JSON lines on stderr for the service's and uvicorn's loggers."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    for name in ("verify_cli.service", "uvicorn", "uvicorn.error"):
        lg = logging.getLogger(name)
        lg.handlers = [handler]
        lg.setLevel(level.upper())
        lg.propagate = False
    logging.getLogger("uvicorn.access").disabled = True  # the gate logs each request


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, so that asyncio sets TCP_NODELAY on each accepted socket as well
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    set_nodelay(sock)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}", hint="choose another --port") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class _DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, service: GradingService) -> None:
        super().__init__(config)
        self.service = service
        self.drained = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.service.begin_drain()
        self.drained = True
        super().handle_exit(sig, frame)


@dataclass(frozen=True)
class ServeOutcome:
    #: It ended by a drain (SIGTERM, Ctrl-C).
    drained: bool
    #: Runs still going on worker threads when it ended (answered infra_error already); the
    #: caller should exit without waiting for them.
    abandoned: int


def freeze_startup_heap() -> None:
    """Move every object alive now (the loaded modules, the app, the task store) out of the
    garbage collector's reach: a full collection, which holds the interpreter lock for as long
    as it walks the heap, then walks only what requests made since. A worker thread's full
    collection blocked the event loop 31-32 ms after one request of 32 candidates of a
    20,000-file task; with the heap frozen, 4-6 ms (``scripts/bench_serve.py --small-calls-only``,
    docs/service.md)."""
    gc.collect()
    gc.freeze()


def serve(config: ServiceConfig, *, host: str, port: int, log_level: str = "info",
          on_listening: Callable[[str], None] | None = None) -> ServeOutcome:
    """Serve until SIGTERM/SIGINT. ``on_listening`` gets the URL once it listens."""
    check_exposure(host, config.token)
    setup_logging(log_level)
    open_files = raise_open_file_limit()
    max_connections = config.max_connections or default_max_connections(open_files)
    sock = bind(host, port)
    try:
        service = GradingService(config)
    except BaseException:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    url = f"http://{f'[{host}]' if ':' in host else host}:{bound}"
    counters = ConnectionCounters()
    protocol = bounded_protocol(header_timeout=config.header_timeout, max_connections=max_connections,
                                counters=counters)
    service.metrics.watch_connections(counters)
    uv_config = uvicorn.Config(create_app(service), http=protocol, log_config=None, access_log=False,
                               lifespan="on",
                               timeout_graceful_shutdown=int(config.drain_seconds) + 10,
                               timeout_keep_alive=30, log_level=log_level)
    server = _DrainingServer(uv_config, service)
    log.info("listening", extra={"fields": {"url": url, "port": bound, "tasks": len(service.store.tasks()),
                                            "backend": service.executor.backend, "workers": config.jobs,
                                            "queue_capacity": service.capacity,
                                            "max_connections": max_connections, "open_files": open_files}})
    if on_listening is not None:
        on_listening(url)
    freeze_startup_heap()
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        # uvicorn re-raises the signal it drained on once it is done; the drain is the clean end
        if not server.drained:
            raise
    return ServeOutcome(server.drained, service.running)
