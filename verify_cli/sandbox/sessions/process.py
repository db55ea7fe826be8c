"""Sessions on the process backend: the exec server as a plain subprocess. NOT ISOLATED.

The work folder is a host folder; the commands run as the user running verify-cli, with the
host's file system, network and processes in reach (they can read what that user can, signal
that user's processes and fill the host's disk). Memory and processes are limited by the
session's cgroup where one is writable (else per command by rlimits), and whatever a command
leaves running is killed when it ends. Use it only where nothing hostile runs, or to develop.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from verify_cli.sandbox.base import RuntimeLayer
from verify_cli.sandbox.environment import DEFAULT_PATH, candidate_harness_dir, compile_harness, scratch_root
from verify_cli.sandbox.plumbing.cgroup import RunCgroup, cgroup_manager
from verify_cli.sandbox.process import runtime_path
from verify_cli.sandbox.sessions.base import SessionFileError, SessionInfraError, SessionLimits, Workspace
from verify_cli.sandbox.sessions.client import (
    ServerSession,
    command_environment,
    decode,
    remove_tree,
    workspace_tar,
)

SERVER_SCRIPT = "verify_session_server.py"  # in the run-time candidate harness folder
START_TIMEOUT = 30.0
ISOLATION = ("none: the exec server and its commands are plain host processes of the user "
             "running verify-cli (no file system, network or pid isolation, no disk limit); "
             "cgroup memory and process limits where writable")


def open_process_session(workspace: Workspace, limits: SessionLimits,
                         env: Mapping[str, str] | None, layer: RuntimeLayer | None = None) -> ServerSession:
    """A process-backend session (see the module's docstring: not isolated); its commands run
    in ``layer`` (a task's built environment) where given."""
    import select

    archive = workspace_tar(workspace)
    compile_harness()
    scratch = Path(tempfile.mkdtemp(prefix="verify-session-", dir=scratch_root()))
    work = scratch / "workspace"
    tmp = scratch / "tmp"
    work.mkdir(mode=0o755)
    tmp.mkdir(mode=0o700)
    cgroup: RunCgroup | None = None
    manager = cgroup_manager()
    if manager.available:
        try:
            cgroup = manager.create(memory_bytes=limits.memory_mb * 1024 * 1024,
                                    max_pids=limits.processes + 1)
        except OSError as e:
            remove_tree(scratch)
            raise SessionInfraError(f"cannot create the session's cgroup: {e}") from e
    host_s, child_s = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-E", str(candidate_harness_dir() / SERVER_SCRIPT),
             "--control-fd", str(child_s.fileno()), "--workdir", str(work)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={"PATH": runtime_path(), "LANG": "C.UTF-8"}, cwd=str(work),
            pass_fds=[child_s.fileno()], start_new_session=True, close_fds=True,
            preexec_fn=cgroup.join_self if cgroup else None)
    except OSError as e:
        host_s.close()
        if cgroup is not None:
            cgroup.remove()
        remove_tree(scratch)
        raise SessionInfraError(f"cannot start the exec server: {e}") from e
    finally:
        child_s.close()
    poller = select.poll()
    poller.register(host_s.fileno(), select.POLLIN)
    hello = decode(host_s.recv(1 << 16)) if poller.poll(START_TIMEOUT * 1000) else {}
    if hello.get("op") != "hello":
        proc.kill()
        proc.wait()
        host_s.close()
        if cgroup is not None:
            cgroup.remove()
        remove_tree(scratch)
        raise SessionInfraError("the process session's exec server did not start")

    def cleanup() -> None:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        remove_tree(scratch)

    session = ServerSession(
        backend="process", sock=host_s, server_pid=proc.pid, cgroup=cgroup, limits=limits,
        env=command_environment(str(work), str(tmp), layer.search_path(DEFAULT_PATH) if layer else runtime_path(),
                                env), workdir=str(work),
        on_close=cleanup)
    if archive is not None:
        try:
            session.load(archive)
        except SessionFileError as e:
            session.close()
            raise SessionFileError(f"the workspace could not be copied in: {e}",
                                   path=str(workspace)) from e
    return session


__all__ = ["ISOLATION", "open_process_session"]
