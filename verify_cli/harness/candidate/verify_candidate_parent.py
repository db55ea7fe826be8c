"""The warm candidate parent of two-process grading: forks one candidate server per run.

Started by the bwrap backend's warm pool (``verify_cli/sandbox/bwrap_candidate.py``) in a sandbox
of the candidate's kind: the read-only system and runtime, this folder (the candidate-side
harness), the candidate's environment, and no view of any task's tests, the results folder, the
trusted harness or a secret. It has imported the candidate server's modules once (the server's
own imports, the wire codec and peer) and never runs candidate code itself. Stdlib only.

For each run the host sends the run's work folder, ``/tmp`` and channel folder as detached mounts
(``open_tree(OPEN_TREE_CLONE)`` handles made by the trusted side's run child, over SCM_RIGHTS),
the run's output pipes and a job socket. The parent forks a child that

1. takes those descriptors and closes everything else of the parent's;
2. enters fresh user, mount, IPC, network, UTS and pid namespaces, attaches the three mounts at
   ``/workspace``, ``/tmp`` and the channel folder (``move_mount``), mounts a fresh ``/dev/shm``,
   covers ``/proc`` with an empty read-only file system, brings loopback up and forbids further
   user namespaces; then drops every capability and sets no-new-privileges;
3. forks the namespace's init (pid 1: reaps, exits with the server), which forks the server
   (pid 2, in the init's new session), as bwrap's ``--unshare-pid --new-session`` would;
4. the server runs ``verify_candidate_server.py`` as ``__main__`` in the work folder with the
   run's environment, exactly what a cold start runs, minus the interpreter start and imports.

The parent lives in the trusted worker's cgroup, so a run's candidate processes are born inside
the run's memory and process limits and are killed with the run. Protocol: JSON messages over
SOCK_SEQPACKET unix sockets; file descriptors travel as SCM_RIGHTS.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import json
import os
import resource
import socket
import struct
import sys
import time
import traceback
import types
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "verify_candidate_server.py")
WORKDIR = "/workspace"
TMP = "/tmp"
CHANNEL_DIR = "/.verify-channel"
SETUP_FAILED_EXIT = 111
MAX_MESSAGE = 1 << 20
HOSTNAME = b"candidate"

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_REC = 16384
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_PRIVATE = 1 << 18
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1
_SYS_MOVE_MOUNT = 429  # x86_64 and aarch64 share the new mount API's numbers
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_AT_FDCWD = -100
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """The run's candidate sandbox could not be built: an infrastructure fault, never a score."""


def _check(rc: int, what: str) -> None:
    if rc < 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                       ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _attach(mount_fd: int, target: str) -> None:
    """Attach a detached mount (an ``open_tree`` handle) at ``target``."""
    _check(_libc.syscall(_SYS_MOVE_MOUNT, mount_fd, b"", _AT_FDCWD, target.encode(),
                         ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH)), f"move_mount {target}")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, _SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    for cap in range(64):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # EINVAL past the last capability the kernel knows
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def isolate(work_fd: int, tmp_fd: int, channel_fd: int, held: tuple[str, ...] = ()) -> None:
    """The run's namespaces and file systems (see the module's docstring), then no capabilities."""
    uid, gid = os.getuid(), os.getgid()
    fresh = (_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWNET | _CLONE_NEWUTS
             | _CLONE_NEWPID)
    _check(_libc.unshare(fresh), "unshare")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # No user namespace below this one (bwrap's --disable-userns for the cold candidate).
    _write("/proc/sys/user/max_user_namespaces", "0")
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)
    flags = _MS_NOSUID | _MS_NODEV
    # The interpreter's own installation may live under /tmp (a CI checkout's venv): keep a
    # handle on it and bind it back, read-only, over the run's /tmp.
    keep = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)
                   if os.path.realpath(p).startswith(TMP + "/")})
    handles = [(p, os.open(p, os.O_PATH | os.O_DIRECTORY)) for p in keep]
    _attach(work_fd, WORKDIR)
    # Each test folder the tests' side binds back is a mount point here too (an empty read-only
    # tmpfs): removing it would detach the tests' bind mount in their namespace and let the
    # candidate plant its own tests there (the cold start's bwrap does the same).
    for rel in held:
        target = os.path.join(WORKDIR, rel)
        if "/" not in rel and rel not in ("", ".", "..") and os.path.isdir(target) \
                and not os.path.islink(target):
            _mount("tmpfs", target, "tmpfs", flags | _MS_RDONLY, "size=4k,mode=0555")
    _attach(tmp_fd, TMP)
    _attach(channel_fd, CHANNEL_DIR)
    for path, fd in handles:
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)
        _mount("none", path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | flags)
        os.close(fd)
    _mount("tmpfs", "/dev/shm", "tmpfs", flags, "mode=1777")
    _mount("tmpfs", "/proc", "tmpfs", flags | _MS_RDONLY, "size=4k,mode=0555")
    _check(_libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")
    _loopback_up()
    _drop_capabilities()


def _server_code() -> types.CodeType:
    with open(SERVER, "rb") as fh:
        return compile(fh.read(), SERVER, "exec")


def warm_up(code: types.CodeType) -> None:
    """Import what the server imports (its module body, run once under another name: the
    ``__main__`` guard keeps it from serving); nothing of it is kept but the imported modules."""
    scratch: dict[str, Any] = {"__name__": "__verify_warm_up__", "__file__": SERVER,
                               "__builtins__": __builtins__}
    exec(code, scratch)
    scratch.clear()


def serve_run(code: types.CodeType, env: dict[str, str]) -> int:
    """The server (pid 2 of the run's pid namespace) as ``python verify_candidate_server.py``."""
    os.chdir(WORKDIR)
    os.environ.clear()
    os.environ.update(env)
    os.environ["PWD"] = WORKDIR  # the shell of the cold start (sh -c 'exec python ...') exports it
    time.tzset()
    module = types.ModuleType("__main__")
    module.__file__ = SERVER
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    sys.modules["__main__"] = module
    sys.argv = [SERVER]
    sys.orig_argv = [sys.executable, SERVER]
    sys.path[0] = HERE
    try:
        exec(code, module.__dict__)
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the interpreter ignores this at exit too
            stream.flush()
    return status & 0xFF


def init_and_serve(code: types.CodeType, env: dict[str, str]) -> int:
    """pid 1 of the run's pid namespace: start the server, reap every orphan, exit with the
    server (which takes the whole namespace down). A session of its own, as bwrap's
    ``--new-session`` gives a cold candidate."""
    os.setsid()
    server = os.fork()
    if server == 0:
        os._exit(serve_run(code, env))
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 1
        if pid == server:
            return os.waitstatus_to_exitcode(status) & 0xFF


def run_child(job: dict[str, Any], fds: list[int], code: types.CodeType) -> None:
    """Runs in the forked child; never returns."""
    out_fd, err_fd, sock_fd, work_fd, tmp_fd, channel_fd = fds
    job_sock = socket.socket(fileno=sock_fd)
    try:
        _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # like any fresh process (the parent is not)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        keep = sorted({sock_fd, work_fd, tmp_fd, channel_fd})
        low = 3
        for fd in keep:
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 1 << 16)
        # The parent is shielded from the OOM killer (-1000, inherited): a run's candidate is
        # as killable as a cold one (raising the value needs no privilege).
        with contextlib.suppress(OSError):
            _write("/proc/self/oom_score_adj", "0")
        cpu = int(job["cpu_seconds"])
        fsize = int(job["file_bytes"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        isolate(work_fd, tmp_fd, channel_fd, tuple(str(h) for h in job.get("held", [])))
        for fd in (work_fd, tmp_fd, channel_fd):
            os.close(fd)
        init = os.fork()  # pid 1 of the new pid namespace
        if init == 0:
            job_sock.close()
            os._exit(init_and_serve(code, {str(k): str(v) for k, v in job["env"].items()}))
        job_sock.sendall(json.dumps({"op": "ready"}).encode())
    except BaseException as e:
        try:
            job_sock.sendall(json.dumps({"op": "setup_error",
                                         "message": f"{type(e).__name__}: {e}"}).encode())
        finally:
            os._exit(SETUP_FAILED_EXIT)
    job_sock.close()
    _, status = os.waitpid(init, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    sock.sendall(json.dumps(msg).encode())


def serve(control: socket.socket) -> int:
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # run children may not ptrace the parent
    code = _server_code()
    warm_up(code)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    gc.collect()
    gc.freeze()
    _send(control, {"op": "ready", "pid": os.getpid()})
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE, 6)
        except OSError:
            return 0
        if not data:
            return 0  # the host is gone
        msg = json.loads(data)
        if msg.get("op") != "run" or len(fds) != 6:
            for fd in fds:
                os.close(fd)
            _send(control, {"op": "error", "message": "bad request"})
            continue
        pid = os.fork()
        if pid == 0:
            control.detach()
            run_child(msg, fds, code)
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        _send(control, {"op": "exit", "id": msg.get("id"), "status": status})


def main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[argv.index("--control-fd") + 1]))
    try:
        return serve(control)
    except BaseException:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
