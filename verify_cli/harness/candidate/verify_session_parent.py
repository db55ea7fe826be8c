"""The session parent of the bwrap backend: forks one session per request, each in fresh
namespaces, each running the exec server (``verify_session_server.py``) as its init.

Started by ``verify_cli/sandbox/sessions/bwrap.py`` in a sandbox of the candidate's kind (the
read-only system and runtime, this folder, no task files, results, trusted harness or secret).
It has imported the exec server once; a session costs a fork, not an interpreter start, and
shares the parent's warmed heap until it writes to it. It never runs a command itself.

For each ``open`` request (carrying the session's socket) it forks a child straight into fresh
user, mount, pid, IPC, UTS and (unless the session asks for the network) network namespaces
(``clone``: the child is pid 1 of its pid namespace), which maps its ids, forbids further user
namespaces, mounts a private ``/proc``, size-limited tmpfs work folder and ``/tmp``, a fresh
``/dev/shm``, brings its loopback up, drops every capability, sets no-new-privileges and serves
the session until the host closes its socket. The host moves it into the session's cgroup
before its first request. Protocol: JSON over SOCK_SEQPACKET, descriptors as SCM_RIGHTS.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import socket
import sys
import tarfile  # noqa: F401 - imported once here, shared with every session
import traceback
from typing import Any

import verify_namespaces as ns
import verify_session_server as server
from verify_namespaces import check, libc, mount

WORKDIR = "/workspace"
TMP = "/tmp"
HOSTNAME = b"session"
HOST_PROC = "/.verify-host-proc"
SESSION_NAMESPACES = (ns.CLONE_NEWUSER | ns.CLONE_NEWNS | ns.CLONE_NEWIPC | ns.CLONE_NEWUTS
                      | ns.CLONE_NEWPID)
_FLAGS = ns.MS_NOSUID | ns.MS_NODEV
_MS_NOEXEC = 8


def build(job: dict[str, Any], ids: tuple[int, int]) -> None:
    """The session's sandbox, in the namespaces this child was forked into."""
    ns.map_ids(*ids)
    ns.write_file("/proc/sys/user/max_user_namespaces", "0")
    mount("none", "/", None, ns.MS_REC | ns.MS_PRIVATE)
    handles = ns.runtime_handles_under(TMP, [str(p) for p in job.get("keep", ())])
    disk = int(job["disk_bytes"])
    mount("tmpfs", WORKDIR, "tmpfs", _FLAGS, f"size={disk},mode=0755,uid={ids[0]},gid={ids[1]}")
    mount("tmpfs", TMP, "tmpfs", _FLAGS, f"size={int(job['tmp_bytes'])},mode=1777")
    ns.bind_back_read_only(handles, _FLAGS)
    mount("tmpfs", "/dev/shm", "tmpfs", _FLAGS, f"size={int(job['tmp_bytes'])},mode=1777")
    # Read-only, as the host's /proc the parent holds is (a kernel refuses a fresh /proc that
    # would be more permissive than the visible one); where it refuses anyway: none at all.
    try:
        mount("proc", "/proc", "proc", _FLAGS | _MS_NOEXEC | ns.MS_RDONLY)
    except ns.SetupError:
        mount("tmpfs", "/proc", "tmpfs", _FLAGS | ns.MS_RDONLY, "size=4k,mode=0555")
    if os.path.isdir(HOST_PROC):  # the parent's view of the host's /proc: never the session's
        mount("tmpfs", HOST_PROC, "tmpfs", _FLAGS | ns.MS_RDONLY, "size=4k,mode=0555")
    check(libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")
    if not job.get("network"):
        ns.loopback_up()
    ns.drop_capabilities(no_new_privs=True)


def run_session(job: dict[str, Any], sock_fd: int, ids: tuple[int, int]) -> None:
    """The forked child (pid 1 of the session); never returns."""
    sock = socket.socket(fileno=sock_fd)
    status = 0
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, sock_fd)
        os.closerange(sock_fd + 1, 1 << 16)
        libc.prctl(ns.PR_SET_DUMPABLE, 0, 0, 0, 0)  # its commands may not ptrace it
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        build(job, ids)
        os.chdir(WORKDIR)
        gc.enable()  # the parent's heap stays frozen (shared); the server's own garbage is collected
        server._send(sock, {"op": "hello", "pid": os.getpid()})
    except BaseException as e:
        with contextlib.suppress(Exception):
            server._send(sock, {"op": "setup_error", "message": f"{type(e).__name__}: {e}"})
        os._exit(111)
    try:
        status = server.Server(sock, WORKDIR, own_init=True).serve()
    except BaseException:
        status = 1
    os._exit(status)


def serve(control: socket.socket) -> int:
    libc.prctl(ns.PR_SET_DUMPABLE, 0, 0, 0, 0)
    ids = (os.getuid(), os.getgid())
    ns.announce_ready(control, {"op": "ready", "pid": os.getpid()})
    gc.disable()  # the heap stays frozen and shared with every session
    poller = select.poll()
    poller.register(control.fileno(), select.POLLIN)
    while True:
        while True:  # reap ended sessions
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not poller.poll(1000):
            continue
        msg, fds = ns.next_request(control, ("open",), 1)
        if msg is None:
            return 0
        flags = SESSION_NAMESPACES | (0 if msg.get("network") else ns.CLONE_NEWNET)
        try:
            pid = ns.fork_into(flags)
        except OSError as e:
            os.close(fds[0])
            ns.send(control, {"op": "error", "id": msg.get("id"), "message": f"clone: {e}"})
            continue
        if pid == 0:
            control.detach()
            run_session(msg, fds[0], ids)
        os.close(fds[0])
        ns.send(control, {"op": "opened", "id": msg.get("id")})


def main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[argv.index("--control-fd") + 1]))
    try:
        return serve(control)
    except BaseException:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
