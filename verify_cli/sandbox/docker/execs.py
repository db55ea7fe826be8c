"""Exec and attach plumbing over the Engine API: start an exec or attach, feed its stdin, pump its
frames, wait for its exit, and kill or remove a container."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from verify_cli.sandbox.base import Cancellation
from verify_cli.sandbox.docker.containers import COPY_TIMEOUT_S, ROOT
from verify_cli.sandbox.docker.errors import DAEMON_ERRORS, parse_docker_time
from verify_cli.sandbox.docker.streams import (
    Clock,
    Conn,
    ExecOutcome,
    Killer,
    ReadyGate,
    SocketWriter,
    feed_stdin,
    pump_frames,
)
from verify_cli.sandbox.environment import SANDBOX_HARNESS
from verify_cli.sandbox.plumbing.output import BoundedCapture


class DockerExecs:
    """The calls every mode makes to the daemon; ``_api`` is a docker ``APIClient``."""

    _api: Any

    def _oom_reported(self, container_id: str) -> bool:
        """Whether the daemon saw an OOM kill in the container (its counters were unreadable)."""
        with contextlib.suppress(*DAEMON_ERRORS):
            info = self._api.inspect_container(container_id)
            if info.get("State", {}).get("OOMKilled"):
                return True
            since = parse_docker_time(info.get("Created", "")) or (time.time() - 3600)
            events = self._api.events(since=int(since) - 1, until=f"{time.time():.6f}",
                                      filters={"container": container_id, "event": "oom"},
                                      decode=True)
            return any(True for _ in events)
        return False


    def _unpack_harness(self, container_id: str, archive: bytes) -> tuple[bool, str]:
        """Unpack the harness ``archive`` as root (no capabilities) into the container's
        root-owned harness folder, read-only for uid 1000 and so for every run; whether tar
        succeeded, and what it said."""
        said = BoundedCapture(4096)
        outcome = self._exec(container_id, ["tar", "-x", "-f", "-", "--no-same-owner", "-C",
                                            SANDBOX_HARNESS], user=ROOT,
                             feed=lambda w: w.write(archive), stdout=said, stderr=said,
                             timeout_s=COPY_TIMEOUT_S)
        return outcome.exit_code == 0, said.result().text

    def _remove_now(self, container_id: str) -> None:
        with contextlib.suppress(*DAEMON_ERRORS):
            self._api.remove_container(container_id, force=True)


    def _hijack(self, response: Any) -> Conn:
        raw = self._api._get_raw_response_socket(response)  # raises for an error status
        sock = getattr(raw, "_sock", raw)
        sock.settimeout(None)
        return Conn(sock, response.raw._fp.fp)

    def _start_exec(self, container_id: str, argv: list[str], *, user: str,
                    env: Mapping[str, str] | None = None,
                    workdir: str | None = None) -> tuple[str, Conn]:
        """Create and start an exec of ``argv``; its id and its connection (stdin, output)."""
        exec_id: str = self._api.exec_create(
            container_id, argv, stdin=True, stdout=True, stderr=True, user=user,
            environment=dict(env) if env else None, workdir=workdir)["Id"]
        response = self._api._post_json(  # the public exec_start(socket=True) drops buffered bytes
            self._api._url("/exec/{0}/start", exec_id),
            headers={"Connection": "Upgrade", "Upgrade": "tcp"},
            data={"Tty": False, "Detach": False}, stream=True)
        return exec_id, self._hijack(response)

    def _attach(self, container_id: str) -> Conn:
        """A connection to the main process's stdin and (from now on) its output."""
        response = self._api._post(
            self._api._url("/containers/{0}/attach", container_id),
            params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1},
            headers={"Connection": "Upgrade", "Upgrade": "tcp"}, stream=True)
        return self._hijack(response)

    def _exec(self, container_id: str, argv: list[str], *, user: str,
              feed: Callable[[SocketWriter], object] | None, stdout: Any, stderr: Any,
              timeout_s: float, env: Mapping[str, str] | None = None,
              workdir: str | None = None, killer_box: list[Killer] | None = None,
              cancel: Cancellation | None = None) -> ExecOutcome:
        """Run ``argv`` in the container, streaming its output into ``stdout``/``stderr`` (objects
        with ``feed(bytes)``) as it is produced. At ``timeout_s`` (or ``cancel``) the container
        is killed."""
        exec_id, conn = self._start_exec(container_id, argv, user=user, env=env, workdir=workdir)
        return self._drive(container_id, exec_id, conn, feed=feed, stdout=stdout, stderr=stderr,
                           timeout_s=timeout_s, killer_box=killer_box, cancel=cancel)

    def _drive(self, container_id: str, exec_id: str, conn: Conn, *,
               feed: Callable[[SocketWriter], object] | None, stdout: Any, stderr: Any,
               timeout_s: float, gate: ReadyGate | None = None,
               killer_box: list[Killer] | None = None, cancel: Cancellation | None = None) -> ExecOutcome:
        """Feed a started exec its stdin and pump its output until it ends or is killed."""
        killer = Killer(self._api, container_id)
        if killer_box is not None:
            killer_box.append(killer)
        killer.watch(conn.sock)
        unsubscribe = cancel.subscribe(lambda: killer.kill("cancelled")) if cancel is not None else None
        clock = Clock(killer, timeout_s, gated=gate is not None)
        if gate is not None:
            gate.on_ready = clock.ready
        writer = threading.Thread(target=feed_stdin, args=(conn.sock, feed), daemon=True,
                                  name="verify-docker-stdin")
        writer.start()
        exit_code: int | None = None
        try:
            pump_frames(conn.reader, stdout, stderr, stop=lambda: killer.reason is not None)
            if killer.reason is None:  # output closed; the process may still run (to the timer)
                exit_code = self._wait_exit(exec_id, killer)
        finally:
            seconds = clock.stop()
            if unsubscribe is not None:
                unsubscribe()
            conn.close()  # also wakes the stdin writer
        writer.join(timeout=5)
        if killer.reason is not None:
            return ExecOutcome(None, killer.reason, seconds)
        return ExecOutcome(exit_code, None, seconds)

    def _wait_exit(self, exec_id: str, killer: Killer,
                   timeout_s: float | None = None) -> int | None:
        pause = 0.001
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while killer.reason is None and (deadline is None or time.monotonic() < deadline):
            info = self._api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                return None if code is None else int(code)
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return None
