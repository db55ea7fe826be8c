"""The warm candidate side of a docker warm node: a candidate parent started once per node.

A two-process run on a warm node (``docker_node_warm.py``) starts its candidate cold by default:
a nested bubblewrap, an interpreter start and the candidate server's imports on every run. Where
the run's candidate is the Python candidate server, the node's supervisor instead keeps one
*candidate parent* (``candidate/verify_candidate_parent.py``, the bwrap backend's warm candidate
parent) and has it fork each run's candidate. Stdlib only; the supervisor imports it.

- **The parent's sandbox** is a nested bubblewrap of the candidate's kind, started from the
  supervisor (the container's own view: no run's folders are in it; each run's live only in the
  run's namespaces): the image's top-level folders read-only as the cold candidate gets them,
  the candidate-side harness, its own ``/proc``, ``/dev``, network and pid namespaces, empty
  mount points for ``/workspace``, ``/tmp`` and the channel folder, and the candidate's whole
  environment (``--clearenv``: the variables read at interpreter start are the run's). It never
  saw a task's tests, the results folder, the trusted harness or a seal key, and it runs no
  candidate code itself. The supervisor starts it when a run first needs it and keys it by its
  command line and environment (another hash seed: another parent).
- **A run**: the supervisor asks the parent for the run's child (``{"op": "run"}``: the run's
  output streams, limits, held test folders and protected files, and a job socket) before it
  forks the run. The run's trusted process (``P``), once it has laid the run out as the cold path
  does, makes detached copies of the candidate's view of the work folder, of ``/tmp`` and of the
  channel folder (``open_tree(OPEN_TREE_CLONE)``, :func:`export_mounts`), binds and listens on
  the channel's socket, and sends those four handles on the job socket; the child attaches them
  where a cold candidate has them and starts the server, which accepts on that socket. ``P``
  waits until the child says its sandbox is built before its tests start; anything else exits
  ``P`` with :data:`CANDIDATE_UNAVAILABLE` before the tests started, so the host re-runs the job
  cold (never a score) and the node starts its candidates cold from then on.
- **After the run** the supervisor kills every process of the parent's tree that is not the
  parent's own (the run's candidate: its child is the init of a pid namespace, so the whole
  namespace goes with it) and waits for the parent to report its child's end. A parent that
  does not is killed; the node's next two-process run starts a new one.
- **Limits**: the parent's processes are the node's own (the container's process limit leaves
  room for them); the candidate's CPU and file-size rlimits are the run's, as a cold candidate
  inherits them; memory is the container's, shared with the tests' side, as in the cold run.

Where the kernel or the container's seccomp profile refuses the new mount API, no parent is
started (:func:`probe_mount_api`): candidates start cold, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
from typing import Any

import warm_worker  # same folder: sys.path[0]

ns = warm_worker.ns
_libc = warm_worker._libc

START_TIMEOUT = 60.0
SETUP_TIMEOUT = 20.0
EXIT_GRACE = 3.0
#: How long a run's candidate init may take to reap its killed server before it is killed too.
REAP_GRACE = 0.5
#: ``P``'s exit status when the run's warm candidate could not be set up before its tests started.
CANDIDATE_UNAVAILABLE = 124
#: The run's CPU rlimit for a candidate child where the run has none (the parent needs a number).
NO_CPU_LIMIT = 1 << 31
_SYS_MOVE_MOUNT = 429  # x86_64 and aarch64 share the new mount API's numbers
_MOVE_MOUNT_F_EMPTY_PATH = 4
_AT_FDCWD = -100
_PATH = "/usr/local/bin:/usr/bin:/bin"


class Unavailable(Exception):
    """The run's warm candidate could not be set up: never the code's fault."""


def probe_mount_api() -> str:
    """Whether a run's folders can be handed to a candidate child here: ``open_tree`` and
    ``move_mount`` in a fresh user and mount namespace, in a forked child. "" when they work,
    else why not (an old kernel, a seccomp profile without them)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        why = ""
        try:
            os.close(r)
            # /proc/self's files belong to root while the process is not dumpable (the supervisor is not).
            _libc.prctl(ns.PR_SET_DUMPABLE, 1, 0, 0, 0)
            ns.enter_user_namespace(ns.CLONE_NEWUSER | ns.CLONE_NEWNS)
            ns.mount("none", "/", None, ns.MS_REC | ns.MS_PRIVATE)
            fd = warm_worker.open_tree_clone("/tmp")
            if _libc.syscall(_SYS_MOVE_MOUNT, fd, b"", _AT_FDCWD, b"/tmp",
                             ctypes.c_uint(_MOVE_MOUNT_F_EMPTY_PATH)) < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"move_mount: {os.strerror(err)}")
        except BaseException as e:
            why = f"{type(e).__name__}: {e}"
        with contextlib.suppress(OSError):
            os.write(w, why.encode()[:500])
        os._exit(0)
    os.close(w)
    said = b""
    while chunk := os.read(r, 4096):
        said += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return said.decode("utf-8", "replace")


def _children() -> dict[int, list[int]]:
    """Every live process's children, by parent pid (from /proc)."""
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{name}/stat", "rb") as fh:
            fields = fh.read().rpartition(b")")[2].split()
            if fields[0] != b"Z":
                out.setdefault(int(fields[1]), []).append(int(name))
    return out


def _descendants(root: int, kids: dict[int, list[int]] | None = None) -> list[int]:
    """``root``'s live descendants, parents before children (from ``kids``, :func:`_children`'s
    map, where the caller has one)."""
    kids = _children() if kids is None else kids
    out: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop(0)
        for child in kids.get(pid, []):
            out.append(child)
            todo.append(child)
    return out


def _readable(sock: socket.socket, timeout: float) -> bool:
    ready, _, _ = select.select([sock], [], [], max(0.0, timeout))
    return bool(ready)


def _recv(sock: socket.socket) -> dict[str, Any]:
    data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 8)
    for fd in fds:
        os.close(fd)
    if not data:
        return {}
    with contextlib.suppress(ValueError):
        msg = json.loads(data)
        if isinstance(msg, dict):
            return msg
    return {}


class NodeCandidateParent:
    """One candidate parent of a warm node (see the module's docstring); one run at a time."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.pid = 0  # its outer bubblewrap, the supervisor's child
        self.ctl: socket.socket | None = None
        self.own: set[int] = set()  # the parent's own processes (bubblewrap, its init, the parent)
        self.runs = 0

    def start(self, argv: list[str]) -> None:
        """Start it and wait for its warm-up; raises Unavailable."""
        host, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:
                host.close()
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):  # stdout and stderr are the node's protocol between runs
                    os.dup2(null, fd)
                keep = theirs.fileno()
                os.closerange(3, keep)
                os.closerange(keep + 1, 1 << 16)
                os.set_inheritable(keep, True)
                os.execvpe(argv[0], [*argv, "--control-fd", str(keep)], {"PATH": _PATH})
            finally:
                os._exit(127)
        theirs.close()
        self.pid, self.ctl = pid, host
        if not _readable(host, START_TIMEOUT) or _recv(host).get("op") != "ready":
            self.close()
            raise Unavailable("the candidate parent did not start")
        self.own = {pid, *_descendants(pid)}

    def begin(self, job: dict[str, Any], cand: dict[str, Any]) -> socket.socket:
        """Have the parent fork the run's candidate child; the run's end of its job socket."""
        assert self.ctl is not None
        self.runs += 1
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cpu = job.get("cpu_seconds")
        request = {"op": "run", "id": str(self.runs), "env": cand["parent"]["env"],
                   "cpu_seconds": cpu if isinstance(cpu, int) else NO_CPU_LIMIT,
                   "file_bytes": int(job["file_bytes"]), "held": list(cand["held"]),
                   "protected": list(cand.get("protected", []))}
        try:
            socket.send_fds(self.ctl, [json.dumps(request).encode()], [1, 2, theirs.fileno()])
        except OSError as e:
            mine.close()
            raise Unavailable(f"cannot reach the candidate parent: {e}") from e
        finally:
            theirs.close()
        return mine

    def finish(self) -> float | None:
        """After the run: kill its candidate (every process of the parent's tree but the
        parent's own, namespace inits first) and wait for the parent to report its child's
        end: the candidate's CPU seconds (its init's and every process that init reaped), or
        None when the parent did not report (it must go)."""
        ctl = self.ctl
        if ctl is None:
            return None
        # The candidate's processes first, its init (a child of the parent's own) last: the init
        # reaps its server, and so reports that CPU too, then ends its namespace with the rest.
        kids = _children()
        inits = {pid for own in self.own for pid in kids.get(own, []) if pid not in self.own}
        for pid in _descendants(self.pid, kids):
            if pid not in self.own and pid not in inits:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        if not _readable(ctl, REAP_GRACE):
            for pid in inits:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            if not _readable(ctl, EXIT_GRACE):
                return None
        msg = _recv(ctl)
        if msg.get("op") != "exit" or msg.get("id") != str(self.runs):
            return None
        cpu = msg.get("cpu")
        return float(cpu) if isinstance(cpu, (int, float)) else 0.0

    def alive_own(self) -> int:
        """How many of the parent's own processes are alive (the node counts them as its own)."""
        n = 0
        for pid in self.own:
            with contextlib.suppress(OSError), open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rpartition(b")")[2].split()[:1] != [b"Z"]:
                    n += 1
        return n

    def close(self) -> None:
        if self.ctl is not None:
            self.ctl.close()
            self.ctl = None
        if self.pid:
            for pid in [self.pid, *_descendants(self.pid)]:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(self.pid, 0)
            self.pid = 0
        self.own = set()


class WarmCandidates:
    """The supervisor's candidate parent (at most one) and whether warm candidates are off in
    this node (and why)."""

    def __init__(self) -> None:
        self.parent: NodeCandidateParent | None = None
        self.off = ""

    def parent_for(self, cand: dict[str, Any]) -> NodeCandidateParent | None:
        spec = cand.get("parent")
        if not spec or self.off:
            return None
        key = json.dumps([spec["head"], spec["tail"], spec["env"]], sort_keys=True)
        if self.parent is not None and self.parent.key == key and self.parent.ctl is not None:
            return self.parent
        self.drop()
        if not self.off:  # once per node: the kernel and the profile do not change
            why = probe_mount_api()
            if why:
                self.off = f"the new mount API is refused here: {why}"
                return None
        argv = [*map(str, spec["head"]), *image_binds([str(d) for d in cand["skip"]]), *map(str, spec["tail"])]
        parent = NodeCandidateParent(key)
        try:
            parent.start(argv)
        except (Unavailable, OSError) as e:
            self.off = str(e)
            return None
        self.parent = parent
        return parent

    def drop(self) -> None:
        parent, self.parent = self.parent, None
        if parent is not None:
            parent.close()

    def turn_off(self, why: str) -> None:
        self.off = why
        self.drop()

    def own_processes(self) -> int:
        return self.parent.alive_own() if self.parent is not None else 0


def image_binds(skip: list[str]) -> list[str]:
    """The image's top-level folders (and those of /opt) for a candidate's root, read-only, as
    the cold wrapper's ``for d in /* /opt/*`` lists them (dot-entries and ``skip`` left out)."""
    out: list[str] = []
    for parent in ("/", "/opt"):
        try:
            names = sorted(os.listdir(parent))
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            if name.startswith(".") or path in skip:
                continue
            if os.path.islink(path):
                out += ["--symlink", os.readlink(path), path]
            elif os.path.exists(path):
                out += ["--ro-bind", path, path]
    return out


def export_mounts(shared: str, channel_dir: str, channel: str) -> list[int]:
    """In ``P``, before its own view is made: detached copies of the candidate's work folder
    (``shared``), of ``/tmp`` and of the channel folder, and the channel's listening socket bound
    at ``channel`` (``warm_worker.handover_handles``); raises Unavailable."""
    try:
        return warm_worker.handover_handles(shared, channel_dir, channel)
    except OSError as e:
        raise Unavailable(str(e)) from e


def hand_over(job_fd: int, handles: list[int]) -> None:
    """Send the run's handles to its candidate child and wait until its sandbox is built (its
    server forked); this process keeps none of them. Raises Unavailable."""
    sock = socket.socket(fileno=job_fd)
    try:
        try:
            socket.send_fds(sock, [json.dumps({"op": "mounts"}).encode()], handles)
        except OSError as e:
            raise Unavailable(f"the run's candidate child is gone: {e}") from e
        finally:
            for fd in handles:
                os.close(fd)
        if not _readable(sock, SETUP_TIMEOUT):
            raise Unavailable("the run's candidate sandbox was not set up in time")
        msg = _recv(sock)
        if msg.get("op") != "ready":
            raise Unavailable(f"the run's candidate sandbox could not be set up: {msg.get('message', 'no answer')}")
    finally:
        sock.close()
