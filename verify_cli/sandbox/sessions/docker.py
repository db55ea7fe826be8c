"""Sessions on the docker backend: a container per session, the exec server as its init.

The container is hardened as the backend's single-use containers are (no network unless the
session asks, read-only root, every capability dropped, no-new-privileges, uid 1000, memory,
pids and one-CPU cgroup limits, size-limited tmpfs work folder and ``/tmp``, no logs, the
backend's labels so that a crashed process's containers are reaped). Its pid 1 is the exec
server (``verify_session_server.py --init``, bound read-only from the candidate-side harness,
run by the host's own interpreter bound read-only beside it: the image needs no Python),
which connects to a unix socket the host listens on in a folder bound read-only into the
container; descriptors then cross as on the other backends. The host finds the container's
cgroup from the server's pid and kills from there (timeouts, leftovers) and counts OOM kills.

Bind mounts of host folders need a daemon on this machine (a remote daemon cannot open
sessions). Opening a session costs a container's creation and start; a pool of ready
sessions per (image, limits), refilled in the background once a key was opened, hides that
for every open but the first (``spares``).
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import tempfile
import threading
import uuid
import weakref
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verify_cli.sandbox.environment import (
    DEFAULT_PATH,
    SANDBOX_CANDIDATE_HARNESS,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    candidate_harness_dir,
    compile_harness,
)
from verify_cli.sandbox.plumbing.cgroup import CGROUP_ROOT, RunCgroup
from verify_cli.sandbox.sessions.base import SessionInfraError, SessionLimits, Workspace
from verify_cli.sandbox.sessions.client import (
    ServerSession,
    command_environment,
    decode,
    load_workspace,
    remove_tree,
    workspace_tar,
)
from verify_cli.sandbox.sessions.exec_python import MOUNT, ExecPythonUnavailable, exec_python
from verify_cli.sandbox.sessions.spares import SparePool

if TYPE_CHECKING:
    from verify_cli.sandbox.docker.sandbox import DockerSandbox

SOCKET_DIR = "/.verify-session"
SOCKET_NAME = "server.sock"
START_TIMEOUT = 120.0
#: The server, in the container's pids budget.
OWN_PIDS = 1


def container_cgroup(pid: int, container_id: str) -> RunCgroup | None:
    """The cgroup (v1: memory and pids; v2: the one) of host process ``pid`` of container
    ``container_id``, or None. Every process of that cgroup is killed when the session closes:
    a path that does not name the container (``pid`` ended and was reused, or a cgroup layout
    of another kind) is never taken, lest the host's own cgroup be swept."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    v1: dict[str, Path] = {}
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if not container_id or container_id not in path:
            continue
        if ctrls == "" and (CGROUP_ROOT / "cgroup.controllers").exists():
            d = CGROUP_ROOT / path.lstrip("/")
            return RunCgroup([d], d, d, 2) if d.is_dir() else None
        for c in ctrls.split(","):
            if c in ("memory", "pids"):
                v1[c] = CGROUP_ROOT / c / path.lstrip("/")
    if "pids" not in v1 or not v1["pids"].is_dir():
        return None
    mem = v1.get("memory")
    return RunCgroup([v1["pids"]], mem if mem and mem.is_dir() else None, v1["pids"], 1)


class DockerSessions:
    """Opens the sessions of one :class:`DockerSandbox`."""

    def __init__(self, sandbox: DockerSandbox, *, spares: int = 2) -> None:
        self.sandbox = sandbox
        self._api: Any = sandbox._api
        self._lock = threading.Lock()
        self._open: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        #: Ready sessions per (image, limits), once one of that key was opened.
        self.spares = SparePool(self._start_spare, spares=spares, workers=2,
                                name="docker-session-spare")

    def _start_spare(self, key: Hashable) -> ServerSession:
        assert isinstance(key, tuple) and isinstance(key[1], SessionLimits)
        return self._start(key[1], str(key[0]), None)

    def close(self) -> None:
        """Close every session still open and every spare (their containers go to the reaper)."""
        with self._lock:
            sessions, self._open = list(self._open), weakref.WeakSet()
        self.spares.close()
        for s in sessions:
            s.close()

    def daemon_alive(self) -> bool:
        try:
            self._api.ping()
        except Exception:
            return False
        return True

    def open(self, workspace: Workspace, limits: SessionLimits, env: Mapping[str, str] | None,
             image: str, labels: Mapping[str, str] | None) -> ServerSession:
        archive = workspace_tar(workspace)
        session = None if labels else self.spares.take((image, limits))
        if session is None:
            session = self._start(limits, image, labels)
        session.begin(command_environment(SANDBOX_WORKDIR, SANDBOX_TMP, DEFAULT_PATH, env))
        with self._lock:
            self._open.add(session)
        return load_workspace(session, archive, workspace)

    def _start(self, limits: SessionLimits, image: str,
               labels: Mapping[str, str] | None) -> ServerSession:
        """A container whose exec server has said hello, its work folder empty."""
        from verify_cli.sandbox.docker.containers import LABEL, NANO_CPUS, OWNER_LABEL, RUN_ID_LABEL, owner
        from verify_cli.sandbox.docker.errors import DAEMON_ERRORS, short

        compile_harness()
        interpreter, server_env, server_binds = server_python()
        folder = Path(tempfile.mkdtemp(prefix="verify-docker-session-"))
        folder.chmod(0o755)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        container_id = ""
        try:
            listener.bind(str(folder / SOCKET_NAME))
            os.chmod(folder / SOCKET_NAME, 0o666)
            listener.listen(1)
            host_config = self._api.create_host_config(
                network_mode="bridge" if limits.network else "none",
                mem_limit=f"{limits.memory_mb}m", memswap_limit=f"{limits.memory_mb}m",
                pids_limit=limits.processes + OWN_PIDS, nano_cpus=NANO_CPUS,
                cap_drop=["ALL"], security_opt=["no-new-privileges"], read_only=True,
                tmpfs={SANDBOX_WORKDIR: f"size={limits.disk_bytes},uid=1000,gid=1000,mode=0755,exec",
                       SANDBOX_TMP: f"size={limits.disk_bytes},mode=1777,exec",
                       "/dev/shm": f"size={limits.disk_bytes},mode=1777"},
                ulimits=_ulimits(limits),
                binds={str(folder): {"bind": SOCKET_DIR, "mode": "ro"},
                       str(candidate_harness_dir()): {"bind": SANDBOX_CANDIDATE_HARNESS, "mode": "ro"},
                       **server_binds},
                log_config={"type": "none", "config": {}},
            )
            run_labels = {**(labels or {}), LABEL: "1", RUN_ID_LABEL: uuid.uuid4().hex,
                          OWNER_LABEL: owner(), "verify-cli.session": "1"}
            command = [*interpreter, f"{SANDBOX_CANDIDATE_HARNESS}/verify_session_server.py",
                       "--connect", f"{SOCKET_DIR}/{SOCKET_NAME}", "--workdir", SANDBOX_WORKDIR,
                       "--init"]
            container_id = self._api.create_container(
                self.sandbox.image_digest(image), command, user="1000:1000",
                working_dir=SANDBOX_WORKDIR, environment={"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", **server_env},
                labels=run_labels, host_config=host_config,  # network_mode alone: /etc/hosts names localhost
                )["Id"]
            self._api.start(container_id)
            poller = select.poll()
            poller.register(listener.fileno(), select.POLLIN)
            if not poller.poll(START_TIMEOUT * 1000):
                raise SessionInfraError(f"the session container's exec server did not start "
                                        f"({self._logs(container_id)})")
            sock, _ = listener.accept()
        except DAEMON_ERRORS as e:
            self._remove(container_id)
            remove_tree(folder)
            raise SessionInfraError(f"cannot start the session's container: {short(e)}") from e
        except BaseException:
            self._remove(container_id)
            remove_tree(folder)
            raise
        finally:
            listener.close()
        try:
            # The peer's pid as it connected (in this pid namespace): SO_PASSCRED set after the
            # accept could miss a hello sent before it.
            pid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                      struct.calcsize("3i")))[0]
            if not _readable(sock, START_TIMEOUT):
                raise SessionInfraError("the session container's exec server did not say hello")
            data = sock.recv(1 << 16)
            if decode(data).get("op") != "hello" or not pid:
                raise SessionInfraError("the session container's exec server did not say hello")
        except BaseException:
            sock.close()
            self._remove(container_id)
            remove_tree(folder)
            raise

        def cleanup() -> None:
            self._remove(container_id)
            remove_tree(folder)

        session = ServerSession(
            backend="docker", sock=sock, server_pid=pid, cgroup=container_cgroup(pid, container_id),
            owns_cgroup=False, limits=limits, env={}, workdir=SANDBOX_WORKDIR, on_close=cleanup,
            machinery_alive=self.daemon_alive)
        session.container_id = container_id  # type: ignore[attr-defined]
        return session

    def _logs(self, container_id: str) -> str:
        with contextlib.suppress(Exception):
            state = self._api.inspect_container(container_id)["State"]
            return f"container {state.get('Status')}, exit {state.get('ExitCode')}"
        return "no container state"

    def _remove(self, container_id: str) -> None:
        if container_id:
            self.sandbox._reaper.put(container_id)


def server_python() -> tuple[list[str], dict[str, str], dict[str, dict[str, str]]]:
    """How a container runs its exec server: the argv that starts the interpreter (``-S``
    included), its environment and the binds it needs. The host's interpreter, carried in
    (:mod:`~verify_cli.sandbox.sessions.exec_python`): the image needs no Python of its own;
    where that bundle cannot be built here, the image's ``python``."""
    try:
        bundle = exec_python()
    except ExecPythonUnavailable:
        return ["python", "-S", "-E"], {}, {}
    return [*bundle.argv(), "-S"], bundle.environment(), {str(bundle.folder): {"bind": MOUNT, "mode": "ro"}}


def _readable(sock: socket.socket, timeout: float) -> bool:
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLHUP)
    return bool(poller.poll(timeout * 1000))


def _ulimits(limits: SessionLimits) -> list[Any]:
    from docker.types import Ulimit

    return [Ulimit(name="fsize", soft=limits.file_bytes, hard=limits.file_bytes),
            Ulimit(name="core", soft=0, hard=0)]


__all__ = ["DockerSessions", "container_cgroup", "server_python"]
