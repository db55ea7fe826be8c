"""The warm candidate parent of two-process grading: forks one candidate server per run.

Started by the bwrap backend's warm pool (``verify_cli/sandbox/bwrap/candidate.py``) in a sandbox
of the candidate's kind: the read-only system and runtime, this folder (the candidate-side
harness), the candidate's environment, and no view of any task's tests, the results folder, the
trusted harness or a secret. It has run the candidate server's module body once (its imports,
the wire codec and peer, its functions and classes) and never runs candidate code itself.
Stdlib only.

For each run the host sends the run's output pipes and a job socket as soon as the run starts.
The parent forks a child straight into fresh user, mount, IPC, UTS and pid namespaces (``clone``:
the child is the pid namespace's init, pid 1), that

1. takes those descriptors and closes everything else of the parent's;
2. maps its ids, mounts what needs nothing of the run (``prepare``) while the trusted side builds
   its own sandbox, then receives on the job socket the run's work folder, ``/tmp`` and channel
   folder as detached mounts (``open_tree(OPEN_TREE_CLONE)`` handles made by the trusted side's
   run child, over SCM_RIGHTS), attaches them at
   ``/workspace``, ``/tmp`` and the channel folder (``move_mount``), with the channel's listening
   socket (bound at the channel's path by the trusted side before its tests start), mounts a fresh ``/dev/shm``,
   covers ``/proc`` with an empty read-only file system and forbids further user namespaces;
   then drops every capability and sets no-new-privileges. The network namespace is the
   parent's sandbox's own (no network, loopback only, shared with no trusted process; see
   ``isolate``);
3. as the namespace's init (reaps, exits with the server) starts a new session and forks the
   server (pid 2, in that session), as bwrap's ``--unshare-pid --new-session`` would;
4. the server runs ``verify_candidate_server.py`` as ``__main__`` in the work folder with the
   run's environment, exactly what a cold start runs, minus the interpreter start and the
   module's body (the parent ran it: ``server_module``); the server calls its ``main()``, which
   accepts on the handed-over listening socket instead of binding one (the tests' ``connect``
   has been waiting in its backlog: neither side polls for the other).

The parent lives in the trusted worker's cgroup, so a run's candidate processes are born inside
the run's memory and process limits and are killed with the run. Protocol: JSON messages over
SOCK_SEQPACKET unix sockets; file descriptors travel as SCM_RIGHTS.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import json
import os
import resource
import socket
import sys
import time
import traceback
import types
from typing import Any, NoReturn

import verify_namespaces as ns
from verify_namespaces import check, libc, mount

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "verify_candidate_server.py")
WORKDIR = "/workspace"
TMP = "/tmp"
CHANNEL_DIR = "/.verify-channel"
SETUP_FAILED_EXIT = 111
HOSTNAME = b"candidate"

_SYS_MOVE_MOUNT = 429  # x86_64 and aarch64 share the new mount API's numbers
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_AT_FDCWD = -100


def _attach(mount_fd: int, target: str) -> None:
    """Attach a detached mount (an ``open_tree`` handle) at ``target``."""
    check(libc.syscall(_SYS_MOVE_MOUNT, mount_fd, b"", _AT_FDCWD, target.encode(),
                       ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH)), f"move_mount {target}")


#: The namespaces a run's child is forked into. No network namespace of its own (a fresh one
#: costs more CPU than the rest of the run's namespaces together): the parent's sandbox has one
#: (bwrap's ``--unshare-all``: loopback only) that no trusted process shares, the parent serves
#: one run at a time and the host kills every process of a run before the next, and the run has
#: no capability over that namespace (it belongs to the parent's user namespace), so nothing it
#: does there outlives it.
RUN_NAMESPACES = ns.CLONE_NEWUSER | ns.CLONE_NEWNS | ns.CLONE_NEWIPC | ns.CLONE_NEWUTS | ns.CLONE_NEWPID


_FLAGS = ns.MS_NOSUID | ns.MS_NODEV


def prepare(ids: tuple[int, int]) -> None:
    """What the run's sandbox needs before the run's folders arrive, in the namespaces this
    child was forked into (``ids``: its uid and gid outside them)."""
    ns.map_ids(*ids)
    # No user namespace below this one (bwrap's --disable-userns for the cold candidate).
    ns.write_file("/proc/sys/user/max_user_namespaces", "0")
    mount("none", "/", None, ns.MS_REC | ns.MS_PRIVATE)
    mount("tmpfs", "/dev/shm", "tmpfs", _FLAGS, "mode=1777")
    check(libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")


def _protect(protected: tuple[str, ...], flags: int) -> None:
    """The files the task ships outside its editable globs and test folders, read-only here, and
    every folder above them a mount point (it cannot be renamed away and replaced), as the cold
    start's bwrap binds them (verify_cli.sandbox.base.protected_mounts: at most 2048 files)."""
    files = sorted(protected) if len(protected) <= 2048 else []
    folders = sorted({"/".join(f.split("/")[:i]) for f in files for i in range(1, f.count("/") + 1)},
                     key=lambda d: (d.count("/"), d))
    for rel in folders:
        target = os.path.join(WORKDIR, rel)
        if os.path.isdir(target) and not os.path.islink(target):
            mount(target, target, None, ns.MS_BIND | ns.MS_REC)
    for rel in files:
        target = os.path.join(WORKDIR, rel)
        if os.path.isfile(target) and not os.path.islink(target):
            ns.bind_read_only(target, target, flags)


def isolate(work_fd: int, tmp_fd: int, channel_fd: int, held: tuple[str, ...] = (),
            protected: tuple[str, ...] = ()) -> None:
    """The run's file systems (see the module's docstring) after :func:`prepare`, then no
    capabilities."""
    flags = _FLAGS
    # The interpreter's own installation may live under /tmp (a CI checkout's venv): keep a
    # handle on it and bind it back, read-only, over the run's /tmp.
    handles = ns.runtime_handles_under(TMP)
    _attach(work_fd, WORKDIR)
    # Each test folder the tests' side binds back is a mount point here too (an empty read-only
    # tmpfs): removing it would detach the tests' bind mount in their namespace and let the
    # candidate plant its own tests there (the cold start's bwrap does the same).
    for rel in held:
        target = os.path.join(WORKDIR, rel)
        if "/" not in rel and rel not in ("", ".", "..") and os.path.isdir(target) \
                and not os.path.islink(target):
            mount("tmpfs", target, "tmpfs", flags | ns.MS_RDONLY, "size=4k,mode=0555")
    _protect(protected, flags)
    _attach(tmp_fd, TMP)
    _attach(channel_fd, CHANNEL_DIR)
    ns.bind_back_read_only(handles, flags)
    mount("tmpfs", "/proc", "tmpfs", flags | ns.MS_RDONLY, "size=4k,mode=0555")
    ns.drop_capabilities(no_new_privs=True)


def server_module() -> types.ModuleType:
    """The server's ``__main__`` module with its body run once, here: its imports, functions and
    classes, as a cold ``python verify_candidate_server.py`` makes them before it serves, minus
    the closing ``if __name__ == "__main__":`` block, which each run's server does itself
    (:func:`serve_run`). Nothing in that body depends on the run (its folder, environment or
    arguments): ``main()`` reads those."""
    with open(SERVER, "rb") as fh:
        tree = ast.parse(fh.read(), SERVER)
    guard = tree.body[-1] if tree.body else None
    if not (isinstance(guard, ast.If) and ast.unparse(guard.test) in _MAIN_GUARDS):
        raise RuntimeError(f"{SERVER} does not end with its __main__ block")
    tree.body.pop()
    module = types.ModuleType("__main__")
    module.__file__ = SERVER
    module.__builtins__ = __builtins__  # type: ignore[attr-defined]
    own = sys.modules["__main__"]
    sys.modules["__main__"] = module  # what its classes' decorators look up, as in a cold start
    try:
        exec(compile(tree, SERVER, "exec"), module.__dict__)
    finally:
        sys.modules["__main__"] = own
    return module


_MAIN_GUARDS = ("__name__ == '__main__'", '__name__ == "__main__"')


#: The trusted side's ``{"op": "mounts"}`` message: work folder, /tmp, channel folder, listening
#: socket (HANDOVER_FDS in verify_cli/harness/warm_worker.py).
HANDOVER_FDS = 4


def serve_run(server: types.ModuleType, env: dict[str, str], listener: int) -> int:
    """The server (pid 2 of the run's pid namespace) as ``python verify_candidate_server.py``,
    serving on ``listener`` (the channel's listening socket)."""
    server.__dict__["LISTENING_FD"] = listener  # the module global its main() reads
    os.chdir(WORKDIR)
    os.environ.clear()
    os.environ.update(env)
    os.environ["PWD"] = WORKDIR  # the shell of the cold start (sh -c 'exec python ...') exports it
    time.tzset()
    sys.modules["__main__"] = server
    sys.argv = [SERVER]
    sys.orig_argv = [sys.executable, SERVER]
    sys.path[0] = HERE
    try:
        sys.exit(server.main())  # the module's __main__ block
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        status = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the interpreter ignores this at exit too
            stream.flush()
    return status & 0xFF


def init_and_serve(server: types.ModuleType, env: dict[str, str], job_sock: socket.socket,
                   listener: int) -> int:
    """pid 1 of the run's pid namespace: start the server, say so on ``job_sock``, reap every
    orphan, exit with the server (which takes the whole namespace down). A session of its own,
    as bwrap's ``--new-session`` gives a cold candidate."""
    os.setsid()
    child = os.fork()
    if child == 0:
        job_sock.close()
        os._exit(serve_run(server, env, listener))
    os.close(listener)  # only the server accepts
    return _announce_and_reap(job_sock, child)


def _announce_and_reap(job_sock: socket.socket, child: int) -> int:
    """The run's init once its server runs: say so on ``job_sock``, then reap every orphan and
    exit with the server."""
    job_sock.sendall(json.dumps({"op": "ready"}).encode())
    job_sock.close()
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 1
        if pid == child:
            return os.waitstatus_to_exitcode(status) & 0xFF


def _set_limits(job: dict[str, Any]) -> None:
    cpu = int(job["cpu_seconds"])
    fsize = int(job["file_bytes"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _take_streams(out_fd: int, err_fd: int, keep: tuple[int, ...]) -> None:
    """stdin from /dev/null, the run's output pipes as stdout and stderr, every other descriptor
    above 2 but ``keep`` closed (nothing of the parent's, or of the trusted side's, is kept)."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 16)


def run_child(job: dict[str, Any], fds: list[int], server: types.ModuleType, ids: tuple[int, int], *,
              prepared: bool = False) -> None:
    """Runs in the forked child (the run's init, in its fresh namespaces); never returns. The
    run's folders arrive on the job socket once the trusted side has made them. ``prepared``:
    a spare that made its own preparations (:func:`prepare`) before the job came."""
    out_fd, err_fd, sock_fd = fds
    job_sock = socket.socket(fileno=sock_fd)
    try:
        if not prepared:
            _before_job()
        _take_streams(out_fd, err_fd, (sock_fd,))
        _set_limits(job)
        if not prepared:
            prepare(ids)
        msg, mounts = ns.next_request(job_sock, ("mounts",), HANDOVER_FDS)
        if msg is None:  # the host gave the run up
            os._exit(SETUP_FAILED_EXIT)
        work_fd, tmp_fd, channel_fd, listener = mounts
        isolate(work_fd, tmp_fd, channel_fd, tuple(str(h) for h in job.get("held", [])),
                tuple(str(p) for p in job.get("protected", [])))
        for fd in (work_fd, tmp_fd, channel_fd):
            os.close(fd)
        env = {str(k): str(v) for k, v in job["env"].items()}
    except BaseException as e:
        ns.fail_setup(job_sock, e, SETUP_FAILED_EXIT)
    try:
        status = init_and_serve(server, env, job_sock, listener)
    except BaseException as e:  # the server could not be forked: never a score
        ns.fail_setup(job_sock, e, SETUP_FAILED_EXIT)
    os._exit(status)


def _before_job() -> None:
    """What a run's child does first, before anything of its run is known."""
    libc.prctl(ns.PR_SET_DUMPABLE, 1, 0, 0, 0)  # like any fresh process (the parent is not)
    # The parent is shielded from the OOM killer (-1000, inherited): a run's candidate is
    # as killable as a cold one (raising the value needs no privilege).
    with contextlib.suppress(OSError):
        ns.write_file("/proc/self/oom_score_adj", "0")


# --------------------------------------------------------------------------------------------
# Spares: the next run's init and server, forked once a run is over (issue 40's lever
# "candidate-spare", verify_cli/sandbox/plumbing/levers.py)


def spare_server(server: types.ModuleType, go: socket.socket) -> NoReturn:
    """The spare's server (pid 2 of the spare's pid namespace, forked before its run is known):
    drops every capability (no new privileges) and closes every descriptor but ``go`` at once
    (it needs neither: its init makes the mounts, which are this process's too, as they share the
    mount namespace), then waits on ``go`` for the run's output pipes, listening socket, limits
    and environment, which its init sends once the run's sandbox is built, and becomes what
    :func:`serve_run` makes of a server forked then: no capability, no new privileges, only the
    run's descriptors. It runs no code of the run before that; a closed ``go`` (the run was given
    up) ends it."""
    try:
        ns.drop_capabilities(no_new_privs=True)  # before the run, off its path
        keep = go.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        data, fds, _flags, _addr = socket.recv_fds(go, MAX_GO, 3)
        if not data or len(fds) != 3:
            os._exit(SETUP_FAILED_EXIT)
        job = json.loads(data)
        out_fd, err_fd, listener = fds
        _take_streams(out_fd, err_fd, (listener,))  # closes ``go`` and everything else
        _set_limits(job)
        env = {str(k): str(v) for k, v in job["env"].items()}
    except BaseException:
        os._exit(SETUP_FAILED_EXIT)
    os._exit(serve_run(server, env, listener))


#: The largest message a spare's init sends its server (the run's environment and limits).
MAX_GO = 1 << 20


def spare_child(handoff: socket.socket, server: types.ModuleType, ids: tuple[int, int]) -> NoReturn:
    """The spare: the next run's init, in its fresh namespaces (it was forked into them). It
    makes what needs nothing of the run (:func:`prepare`), forks the run's server ahead (it waits
    for its run: :func:`spare_server`), then waits on ``handoff`` for the run (the request and its
    three descriptors) and builds the run's sandbox as a child forked for the run would, handing
    the server its descriptors once the sandbox is built. A closed ``handoff`` ends it (the
    parent gave the spare up); so does any failure before its run (the parent, finding it gone,
    forks the run's child itself)."""
    try:
        _before_job()
        prepare(ids)
        os.setsid()
        go_init, go_server = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        child = os.fork()
        if child == 0:
            handoff.close()
            go_init.close()
            spare_server(server, go_server)
        go_server.close()
        msg, fds = ns.next_request(handoff, ("run",), 3)
    except BaseException:
        os._exit(SETUP_FAILED_EXIT)
    if msg is None:
        os._exit(0)  # the server ends with the namespace (this is its pid 1)
    handoff.close()
    out_fd, err_fd, sock_fd = fds
    job_sock = socket.socket(fileno=sock_fd)
    try:
        _take_streams(out_fd, err_fd, (sock_fd, go_init.fileno()))
        _set_limits(msg)
        got, mounts = ns.next_request(job_sock, ("mounts",), HANDOVER_FDS)
        if got is None:  # the host gave the run up
            os._exit(SETUP_FAILED_EXIT)
        work_fd, tmp_fd, channel_fd, listener = mounts
        isolate(work_fd, tmp_fd, channel_fd, tuple(str(h) for h in msg.get("held", [])),
                tuple(str(p) for p in msg.get("protected", [])))
        for fd in (work_fd, tmp_fd, channel_fd):
            os.close(fd)
        go = {"env": msg["env"], "cpu_seconds": msg["cpu_seconds"], "file_bytes": msg["file_bytes"]}
        socket.send_fds(go_init, [json.dumps(go).encode()], [1, 2, listener])
        go_init.close()
        os.close(listener)  # only the server accepts
    except BaseException as e:
        ns.fail_setup(job_sock, e, SETUP_FAILED_EXIT)
    os._exit(_announce_and_reap(job_sock, child))


def fork_spare(control: socket.socket, server: types.ModuleType, ids: tuple[int, int]) -> tuple[int, socket.socket]:
    """Fork the next run's child (:func:`spare_child`) into its namespaces now; (pid, the socket
    its run goes to). OSError where the kernel refuses (runs then fork their child as ever)."""
    mine, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = ns.fork_into(RUN_NAMESPACES)
    except OSError:
        mine.close()
        its.close()
        raise
    if pid == 0:
        mine.close()
        os.close(control.detach())  # only the parent reads the host's requests
        spare_child(its, server, ids)
    its.close()
    return pid, mine


def _hand_to_spare(spare: tuple[int, socket.socket], msg: dict[str, Any], fds: list[int]) -> int:
    """Give the run to the spare; its pid, or 0 where it is gone (it is reaped then)."""
    pid, handoff = spare
    try:
        socket.send_fds(handoff, [json.dumps(msg).encode()], fds)
    except OSError:
        with contextlib.suppress(OSError):
            os.kill(pid, 9)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        return 0
    finally:
        handoff.close()
    return pid


def serve(control: socket.socket) -> int:
    libc.prctl(ns.PR_SET_DUMPABLE, 0, 0, 0, 0)  # run children may not ptrace the parent
    server = server_module()
    ids = (os.getuid(), os.getgid())
    ns.announce_ready(control, {"op": "ready", "pid": os.getpid()})
    spare: tuple[int, socket.socket] | None = None
    while True:
        msg, fds = ns.next_request(control, ("run", "spare"), 3)
        if msg is None:
            return 0
        if msg["op"] == "spare":
            for fd in fds:
                os.close(fd)
            if spare is None:
                with contextlib.suppress(OSError):  # none: the next run forks its child
                    spare = fork_spare(control, server, ids)
            continue
        pid = 0
        if spare is not None:
            pid = _hand_to_spare(spare, msg, fds)
            spare = None
        spared = pid != 0
        if pid == 0:
            try:
                pid = ns.fork_into(RUN_NAMESPACES)
            except OSError as e:  # the run's candidate cannot start warm: the host starts it cold
                sock = socket.socket(fileno=fds[2])
                with contextlib.suppress(OSError):
                    ns.send(sock, {"op": "setup_error", "message": f"{type(e).__name__}: {e}"})
                sock.close()
                for fd in fds[:2]:
                    os.close(fd)
                ns.send(control, {"op": "exit", "id": msg.get("id"), "status": SETUP_FAILED_EXIT << 8})
                continue
            if pid == 0:
                control.detach()
                run_child(msg, fds, server, ids)
        for fd in fds:
            os.close(fd)
        _, status, usage = os.wait4(pid, 0)  # its CPU: the child's and every process it reaped
        ns.send(control, {"op": "exit", "id": msg.get("id"), "status": status, "spare": spared,
                          "cpu": usage.ru_utime + usage.ru_stime})


def main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[argv.index("--control-fd") + 1]))
    try:
        return serve(control)
    except BaseException:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
