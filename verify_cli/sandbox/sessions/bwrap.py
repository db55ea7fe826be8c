"""Sessions on the bwrap backend: one long-lived session parent, a fork per session.

The parent (``verify_cli/harness/candidate/verify_session_parent.py``) runs in a sandbox of the
candidate's kind (:func:`verify_cli.sandbox.bwrap.candidate_parent_argv`: all namespaces
unshared, the read-only system and runtime, the candidate-side harness, nothing of any task, no
secret) and has imported the exec server once. Each session is a child it forks straight into
fresh user, mount, pid, IPC, UTS and network namespaces: its own tmpfs work folder and ``/tmp``
(the session's disk), its own ``/proc``, loopback only, no capabilities, no further user
namespaces; the exec server is its pid 1, so the session ends with it. The host moves the child
into the session's own cgroup (memory and processes) before its first request.

A session asking for the network gets a second parent started with the host's network.
Opening a session costs a round trip, a ``clone`` and a few mounts; an idle session holds its
namespaces, two empty tmpfs and the pages it has written of the parent's heap.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verify_cli.sandbox.base import RuntimeLayer
from verify_cli.sandbox.bwrap.rootfs import which_in_root
from verify_cli.sandbox.environment import (
    DEFAULT_PATH,
    SANDBOX_CANDIDATE_HARNESS,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    compile_harness,
    scratch_root,
)
from verify_cli.sandbox.plumbing.cgroup import RunCgroup, cgroup_manager
from verify_cli.sandbox.plumbing.job_send import send_job
from verify_cli.sandbox.plumbing.killing import stop_sandbox
from verify_cli.sandbox.process import runtime_path
from verify_cli.sandbox.sessions.base import (
    SessionInfraError,
    SessionLimits,
    SessionsUnsupportedError,
    Workspace,
)
from verify_cli.sandbox.sessions.client import (
    ServerSession,
    command_environment,
    decode,
    load_workspace,
    move_into,
    recv_with_pid,
    remove_tree,
    workspace_tar,
)
from verify_cli.sandbox.sessions.spares import SparePool

if TYPE_CHECKING:
    pass

#: Where the parent sees the host's /proc (read-only); no session sees it.
HOST_PROC = "/.verify-host-proc"
PARENT_SCRIPT = f"{SANDBOX_CANDIDATE_HARNESS}/verify_session_parent.py"
START_TIMEOUT = 60.0
OPEN_TIMEOUT = 30.0
#: The parent's own cgroup: its heap, and the sessions' pages until each is moved out.
PARENT_MEMORY_BYTES = 2 * 1024 * 1024 * 1024
PARENT_PIDS = 4096
#: Processes of the session's machinery in its cgroup (the exec server) beyond its limit.
OWN_PIDS = 1

# Popen must happen on a thread that outlives the parent: bwrap's --die-with-parent fires when
# the *thread* that started it ends.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="session-spawn")


class SessionParent:
    """One running session parent (with or without the host's network)."""

    def __init__(self, network: bool, layer: RuntimeLayer | None = None) -> None:
        self.network = network
        #: The built environment its sessions' commands run in (bound read-only), or None.
        self.layer = layer
        self.scratch = Path(tempfile.mkdtemp(prefix="verify-sessions-", dir=scratch_root()))
        self.proc: subprocess.Popen[bytes] | None = None
        self.ctl: socket.socket | None = None
        self.cgroup: RunCgroup | None = None
        self._lock = threading.Lock()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def _root(self) -> str | None:
        return self.layer.root if self.layer is not None else None

    def _python(self) -> str:
        """The parent's interpreter: verify-cli's, or, over an image's root, the root's."""
        if self._root is None:
            return sys.executable
        found = which_in_root(self._root, "python3", DEFAULT_PATH)
        if found is None:
            raise SessionsUnsupportedError("sessions over an image's root file system need python3 in the image "
                                           "(the session server runs under it): open the episode with "
                                           "--sandbox docker")
        return found

    def start(self) -> None:
        from verify_cli.sandbox.bwrap.sandbox import candidate_parent_argv

        compile_harness()
        manager = cgroup_manager()
        if manager.available:
            try:
                self.cgroup = manager.create(memory_bytes=PARENT_MEMORY_BYTES, max_pids=PARENT_PIDS)
            except OSError:
                self.cgroup = None
        host_ctl, parent_ctl = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.ctl = host_ctl
        try:
            argv = candidate_parent_argv(self.scratch, [
                self._python(), "-S", "-E", PARENT_SCRIPT, "--control-fd", str(parent_ctl.fileno())],
                layer=self.layer)
            if self.network:
                argv.insert(argv.index("--unshare-all") + 1, "--share-net")
            # A fresh /proc in a session's namespaces needs a proc mount the kernel deems fully
            # visible; bwrap's own has read-only covers. Each session covers this one again
            # before it runs anything (verify_session_parent.build).
            at = argv.index("--proc")
            argv[at:at] = ["--ro-bind", "/proc", HOST_PROC]
            log = open(self.scratch / "parent.log", "wb")  # noqa: SIM115 - handed to the child
            env = {"PATH": runtime_path() if self._root is None else DEFAULT_PATH, "LANG": "C.UTF-8"}
            try:
                cgroup = self.cgroup
                self.proc = _SPAWNER.submit(
                    subprocess.Popen, argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    env=env, cwd="/", pass_fds=[parent_ctl.fileno()], start_new_session=True,
                    close_fds=True, preexec_fn=cgroup.join_self if cgroup else None).result()
            finally:
                log.close()
        except OSError as e:
            raise SessionInfraError(f"cannot start the bwrap session parent: {e}") from e
        finally:
            parent_ctl.close()
        if not _readable(host_ctl, START_TIMEOUT):
            self.close()
            raise SessionInfraError(f"the bwrap session parent did not start{self.log_tail()}")
        data = host_ctl.recv(1 << 16)
        if not data or decode_or_empty(data).get("op") != "ready":
            tail = self.log_tail()
            self.close()
            raise SessionInfraError(f"the bwrap session parent failed to start{tail}")

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            tail = (self.scratch / "parent.log").read_bytes()[-2000:].decode("utf-8", "replace")
            return f": {tail.strip()}" if tail.strip() else ""
        return ""

    def fork_session(self, job: Mapping[str, Any]) -> tuple[socket.socket, int]:
        """A new session's socket and its server's host pid, once its sandbox is built."""
        host_s, child_s = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            host_s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            with self._lock:
                if not self.alive or self.ctl is None:
                    raise SessionInfraError(f"the bwrap session parent is not running{self.log_tail()}")
                try:
                    send_job(self.ctl, job, [child_s.fileno()], unreachable=lambda why: SessionInfraError(
                        f"cannot reach the bwrap session parent: {why}"))
                    child_s.close()
                    if not _readable(self.ctl, OPEN_TIMEOUT):
                        raise SessionInfraError("the bwrap session parent did not answer")
                    reply = decode_or_empty(self.ctl.recv(1 << 16))
                except OSError as e:
                    raise SessionInfraError(f"cannot reach the bwrap session parent: {e}") from e
            if reply.get("op") != "opened":
                raise SessionInfraError(f"the session could not be forked: {reply.get('message')}")
            if not _readable(host_s, OPEN_TIMEOUT):
                raise SessionInfraError("the session's sandbox was not built in time")
            data, _fds, pid = recv_with_pid(host_s)
            hello = decode_or_empty(data)
            if hello.get("op") != "hello" or not pid:
                raise SessionInfraError(f"the session's sandbox could not be built: "
                                        f"{hello.get('message', 'no answer')}")
            return host_s, pid
        except BaseException:
            host_s.close()
            child_s.close()
            raise

    def close(self) -> None:
        stop_sandbox(self.ctl, self.proc)
        if self.cgroup is not None:
            self.cgroup.remove()
        remove_tree(self.scratch)


def decode_or_empty(data: bytes) -> dict[str, Any]:
    try:
        return decode(data)
    except Exception:
        return {}


def _readable(sock: socket.socket, timeout: float) -> bool:
    import select

    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(poller.poll(max(0.0, timeout) * 1000))


class BwrapSessions:
    """The session parents of one :class:`BwrapSandbox` (started on first use)."""

    def __init__(self, *, spares: int = 2) -> None:
        self._parents: dict[tuple[bool, RuntimeLayer | None], SessionParent] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._open: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        #: Ready sessions per limits, once one of those limits was opened.
        self.spares = SparePool(self._start_spare, spares=spares, name="bwrap-session-spare")

    def _start_spare(self, key: Hashable) -> ServerSession:
        assert isinstance(key, tuple) and isinstance(key[0], SessionLimits)
        return self._start(key[0], key[1])

    def parent(self, network: bool, layer: RuntimeLayer | None = None) -> SessionParent:
        with self._lock:
            if self._closed:
                raise SessionInfraError("the sandbox was closed")
            current = self._parents.get((network, layer))
            if current is not None and current.alive:
                return current
            if current is not None:
                current.close()
            fresh = SessionParent(network, layer)
            fresh.start()
            self._parents[(network, layer)] = fresh
            return fresh

    def open(self, workspace: Workspace, limits: SessionLimits,
             env: Mapping[str, str] | None, layer: RuntimeLayer | None = None) -> ServerSession:
        """A session; its commands run in ``layer`` (a task's built environment) where given."""
        archive = workspace_tar(workspace)
        session = self.spares.take((limits, layer)) or self._start(limits, layer)
        path = layer.search_path(DEFAULT_PATH) if layer is not None else runtime_path()
        session.begin(command_environment(SANDBOX_WORKDIR, SANDBOX_TMP, path, env))
        with self._lock:
            self._open.add(session)
        return load_workspace(session, archive, workspace)

    def _start(self, limits: SessionLimits, layer: RuntimeLayer | None = None) -> ServerSession:
        """A session whose sandbox is built and whose server waits, its work folder empty."""
        parent = self.parent(limits.network, layer)
        cgroup: RunCgroup | None = None
        manager = cgroup_manager()
        if manager.available:
            try:
                cgroup = manager.create(memory_bytes=limits.memory_mb * 1024 * 1024,
                                        max_pids=limits.processes + OWN_PIDS)
            except OSError as e:
                raise SessionInfraError(f"cannot create the session's cgroup: {e}") from e
        job = {"op": "open", "id": uuid.uuid4().hex, "disk_bytes": limits.disk_bytes,
               "tmp_bytes": limits.disk_bytes, "network": limits.network,
               "keep": list(layer.binds) if layer is not None else []}
        try:
            sock, pid = parent.fork_session(job)
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        try:
            if cgroup is not None:
                move_into(cgroup, pid)
        except OSError as e:
            sock.close()
            cgroup.remove()  # type: ignore[union-attr]
            raise SessionInfraError(f"cannot move the session into its cgroup: {e}") from e
        return ServerSession(backend="bwrap", sock=sock, server_pid=pid, cgroup=cgroup,
                             limits=limits, env={}, workdir=SANDBOX_WORKDIR,
                             machinery_alive=lambda: parent.alive)

    def close(self) -> None:
        """Close every session still open, the spares and the parents."""
        self.spares.close()
        with self._lock:
            self._closed = True
            parents, self._parents = list(self._parents.values()), {}
            sessions, self._open = list(self._open), weakref.WeakSet()
        for session in sessions:
            session.close()
        for p in parents:
            p.close()


def wait_gone(pid: int, timeout: float = 5.0) -> None:
    """Wait until ``pid`` has ended (used by tests and the benchmark)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return
        if text.rpartition(")")[2].split()[:1] in (["Z"], ["X"]):
            return
        time.sleep(0.01)


__all__ = ["BwrapSessions", "SessionParent"]
