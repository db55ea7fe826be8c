"""Helpers shared by the warm trusted worker and the warm candidate parent: namespaces, mounts,
capabilities, and the steps of their fork-server loop.

Both fork a child per run that enters fresh namespaces, mounts its file systems and drops every
capability: ``verify_cli/harness/warm/warm_worker.py`` (the trusted side, which finds this folder
beside it) and ``verify_candidate_parent.py`` (in the candidate's sandbox, which holds only this
folder). Stdlib only; nothing here runs on import but loading libc.
"""

from __future__ import annotations

import ctypes
import fcntl
import gc
import json
import os
import socket
import struct
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REC = 16384
MS_REMOUNT = 32
MS_BIND = 4096
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
MAX_MESSAGE = 1 << 20

libc = ctypes.CDLL(None, use_errno=True)
_pylibc = ctypes.PyDLL(None, use_errno=True)  # its calls keep the interpreter's lock


class SetupError(Exception):
    """A run's sandbox could not be built: an infrastructure fault, never a score."""


def check(rc: int, what: str) -> None:
    """Raise SetupError with errno's text where a libc call failed (returned -1)."""
    if rc < 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    check(libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                     ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_user_namespace(flags: int) -> None:
    """``unshare(flags)`` (which includes CLONE_NEWUSER) mapping this uid and gid to themselves."""
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(flags), "unshare")
    map_ids(uid, gid)


def map_ids(uid: int, gid: int) -> None:
    """In a user namespace this process has just entered (by unshare or clone): map the ``uid``
    and ``gid`` it had outside to themselves."""
    write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    write_file("/proc/self/setgroups", "deny")
    write_file("/proc/self/gid_map", f"{gid} {gid} 1")


#: clone(2)'s number where verify-cli knows it (x86_64 and aarch64; elsewhere no fork_into).
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}
_SIGCHLD = 17


def fork_into(flags: int) -> int:
    """``os.fork()`` whose child starts in the new namespaces ``flags`` (``clone(2)``): with
    CLONE_NEWPID the child is pid 1 of its own pid namespace, which ``unshare`` cannot make of
    the caller (it needs a second fork). Like ``os.fork``, the interpreter's fork hooks run on
    both sides (``PyOS_BeforeFork``/``AfterFork_*``: locks, threads, ``os.register_at_fork``).
    The caller must be single-threaded (no other thread may hold a libc lock: glibc's own fork
    handlers do not run). Returns 0 in the child, its pid in the parent; OSError where the kernel
    refuses or this machine's clone number is unknown."""
    nr = _SYS_CLONE.get(os.uname().machine)
    if nr is None:
        raise OSError(38, f"fork_into: no clone(2) number for {os.uname().machine}")  # ENOSYS
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    # With no new stack the child runs on a copy of this one, as after fork(); called with the
    # interpreter's lock held (a PyDLL function), as os.fork calls fork().
    pid = _pylibc.syscall(ctypes.c_long(nr), ctypes.c_ulong(flags | _SIGCHLD), None, None, None, None)
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    err = ctypes.get_errno()
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, f"clone: {os.strerror(err)}")
    return int(pid)


def runtime_handles_under(folder: str, extra: Sequence[str] = ()) -> list[tuple[str, int]]:
    """Handles on the interpreter's own installation where it lives under ``folder`` (a CI
    checkout's venv under /tmp), and on the ``extra`` folders there (a task's built
    environment), taken before a fresh mount covers it."""
    # The executable's own folder's parent too: a venv's root, which sys.prefix does not name in
    # an interpreter started with -S (site.py is what points sys.prefix at the venv).
    venv = os.path.dirname(os.path.dirname(os.path.abspath(sys.executable)))
    keep = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, venv, *extra)
                   if os.path.realpath(p).startswith(folder + "/")})
    return [(p, os.open(p, os.O_PATH | os.O_DIRECTORY)) for p in keep]


def bind_read_only(source: str, target: str, flags: int) -> None:
    """Bind ``source`` (recursively) at ``target``, read-only, with the extra mount ``flags``."""
    mount(source, target, None, MS_BIND | MS_REC)
    mount("none", target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)


def bind_back_read_only(handles: list[tuple[str, int]], flags: int) -> None:
    """Bind each handle of :func:`runtime_handles_under` back at its path, read-only."""
    for path, fd in handles:
        os.makedirs(path, exist_ok=True)
        bind_read_only(f"/proc/self/fd/{fd}", path, flags)
        os.close(fd)


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, _SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_capabilities(*, no_new_privs: bool) -> None:
    """Empty the bounding set and every capability set; then, if asked, no new privileges."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # EINVAL past the last capability the kernel knows
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    check(libc.capset(ctypes.byref(header), data), "capset")
    if no_new_privs:
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def send(sock: socket.socket, msg: dict[str, Any]) -> None:
    sock.sendall(json.dumps(msg).encode())


def fail_setup(job_sock: socket.socket, error: BaseException, status: int) -> NoReturn:
    """A run child whose sandbox could not be built: tell the host why, exit with ``status``."""
    try:
        send(job_sock, {"op": "setup_error", "message": f"{type(error).__name__}: {error}"})
    finally:
        os._exit(status)


def announce_ready(control: socket.socket, msg: dict[str, Any]) -> None:
    """Flush the streams, freeze the warmed heap (children share it instead of copying it on
    their first collection), then tell the host the server is ready."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    gc.collect()
    gc.freeze()
    send(control, msg)


def next_request(control: socket.socket, ops: tuple[str, ...], nfds: int) -> tuple[dict[str, Any] | None, list[int]]:
    """The host's next request whose ``op`` is one of ``ops`` and that carries ``nfds``
    descriptors (an ``op`` of ``"ping"`` or ``"spare"`` may carry none); anything else is
    refused as a bad request. None once the host is gone."""
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE, nfds)
        except OSError:
            return None, []
        if not data:
            return None, []  # the host is gone
        msg = json.loads(data)
        if msg.get("op") in ops and (len(fds) == nfds or msg.get("op") in ("ping", "spare")):
            return msg, fds
        for fd in fds:
            os.close(fd)
        send(control, {"op": "error", "message": "bad request"})
