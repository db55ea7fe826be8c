"""The exec server of a session (``verify_cli/sandbox/sessions``): runs on the candidate's side.

It lives inside the session's sandbox for the whole session and does what the host asks, one
request at a time, on one SOCK_SEQPACKET unix socket: JSON messages, file descriptors as
SCM_RIGHTS. It is never trusted: whatever it answers is an observation of the session, bounded
and decoded as plain data by the host, and the host enforces every limit (wall clock, output,
memory, processes) from outside. Stdlib only.

Requests (``op``) and the descriptors they carry:

- ``exec`` (stdin, stdout, stderr): fork, start a new session, take the three descriptors, set
  the command's rlimits, exec ``argv`` with ``env`` in ``cwd``; answer ``exit`` (wait
  status, CPU seconds) once it ended (nothing before: each message wakes the host). ``kill``
  during a command kills it and everything else the session runs; once a command ended,
  whatever it left running is killed.
- ``read`` / ``list`` / ``snapshot`` (a pipe's write end): write the file's bytes / a JSON list
  of entries / a tar archive of the work folder's regular files matching ``globs`` to the pipe,
  close it, answer ``done`` or ``error``.
- ``write`` / ``untar`` (a pipe's read end): read it to its end into a file / unpack the tar
  archive it carries into the work folder; answer ``done`` or ``error``.
- ``ping``: answer ``pong``.

The host closing the socket ends the server, and with it (as the init of the session's pid
namespace on the isolating backends) the whole session.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import resource
import select
import signal
import socket
import stat
import sys
from typing import Any

MAX_MESSAGE = 1 << 20
_PR_SET_CHILD_SUBREAPER = 36


def glob_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of a path glob: ``*`` and ``?`` within a folder, ``**`` across
    folders (``**/`` also matches no folder at all). The one definition the host filters with."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches_any(patterns: list[re.Pattern[str]], relpath: str) -> bool:
    return any(p.match(relpath) for p in patterns)


def _send(sock: socket.socket, msg: dict[str, Any]) -> None:
    sock.sendall(json.dumps(msg).encode())


def _error(sock: socket.socket, e: BaseException) -> None:
    code = e.errno if isinstance(e, OSError) else None
    _send(sock, {"op": "error", "errno": code, "message": f"{type(e).__name__}: {e}"})


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def close_on_exec_all(keep: tuple[int, ...] = (0, 1, 2)) -> None:
    """Mark every open descriptor but ``keep`` close-on-exec: a command the server starts
    inherits nothing of it (its socket to the host above all: a command holding it could forge
    its own result and desynchronise the next call)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: every descriptor a server may hold is below this
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.set_inheritable(fd, False)


def utf8_name(name: str) -> bool:
    """True when a file name (as ``os`` decodes it) is valid UTF-8: a name that is not cannot be
    carried as text to the grader, and is left out of a snapshot (the host says so)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Server:
    """The request loop. ``workdir``: the work folder; ``own_init``: the server is the init of
    the session's pid namespace (it reaps every orphan, and ``kill -1`` reaches everything else)."""

    def __init__(self, sock: socket.socket, workdir: str, *, own_init: bool) -> None:
        self.sock = sock
        self.workdir = workdir
        self.own_init = own_init

    # --- helpers ---------------------------------------------------------------------------
    def _path(self, path: str) -> str:
        return path if os.path.isabs(path) else os.path.join(self.workdir, path)

    def _reap(self, want: int = 0) -> tuple[int, Any] | None:
        """Reap every ended child without waiting; the status of ``want`` if it was among them."""
        found = None
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return found
            if pid == 0:
                return found
            if pid == want:
                found = (status, usage)

    def _reap_all(self, patience: float = 1.0) -> None:
        """Reap the killed rest until none is left (or ``patience`` runs out)."""
        import time

        end = time.monotonic() + patience
        while time.monotonic() < end:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                time.sleep(0.001)

    def _kill_rest(self, keep_group: int = 0) -> None:
        """Kill whatever the session runs but this server."""
        if self.own_init:
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)
        elif keep_group > 0:
            with contextlib.suppress(OSError):
                os.killpg(keep_group, signal.SIGKILL)

    # --- requests --------------------------------------------------------------------------
    def exec(self, msg: dict[str, Any], fds: list[int]) -> None:
        stdin, stdout, stderr = fds
        argv = [str(a) for a in msg["argv"]]
        if argv[:2] == ["/bin/bash", "-c"] and not os.path.exists("/bin/bash"):
            argv[0] = "/bin/sh"  # an image without bash: a command string runs in its sh
        env = {str(k): str(v) for k, v in dict(msg.get("env") or {}).items()}
        cwd = str(msg.get("cwd") or self.workdir)
        cpu = int(msg.get("cpu_seconds") or 60)
        fsize = int(msg.get("file_bytes") or (1 << 30))
        nofile = int(msg.get("open_files") or 1024)
        pid = None
        if not msg.get("data_bytes") and not msg.get("nproc"):
            pid = self._spawn(argv, env, cwd, fds, {resource.RLIMIT_FSIZE: fsize,
                                                    resource.RLIMIT_NOFILE: nofile,
                                                    resource.RLIMIT_CORE: 0}, cpu)
        try:
            if pid is None:
                pid = os.fork()
        except OSError as e:
            _close(stdin, stdout, stderr)
            _send(self.sock, {"op": "exit", "status": 126 << 8, "cpu": 0.0,
                              "message": f"cannot fork: {e}"})
            return
        if pid == 0:  # the command
            try:
                os.setsid()
                for i, fd in enumerate((stdin, stdout, stderr)):
                    os.dup2(fd, i)
                os.closerange(3, 1 << 16)
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
                signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
                resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                with contextlib.suppress(ValueError, OSError):
                    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
                if msg.get("data_bytes"):  # no cgroup: per-process data size, the user's processes
                    data_limit = int(msg["data_bytes"])
                    resource.setrlimit(resource.RLIMIT_DATA, (data_limit, data_limit))
                if msg.get("nproc") and os.getuid() != 0:
                    nproc = int(msg["nproc"])
                    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            except BaseException as e:
                with contextlib.suppress(Exception):
                    os.write(2, f"verify session: cannot run {argv[:1]}: {e}\n".encode())
                os._exit(127)
        _close(stdin, stdout, stderr)
        pidfd = -1
        with contextlib.suppress(OSError, AttributeError):
            pidfd = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        if pidfd >= 0:
            poller.register(pidfd, select.POLLIN)
        ended = None
        try:
            while ended is None:
                for fd, _ in poller.poll(None if pidfd >= 0 else 50):
                    if fd == self.sock.fileno():
                        data = self.sock.recv(MAX_MESSAGE)
                        if not data:  # the host is gone: end the session
                            self._kill_rest(pid)
                            os._exit(0)
                        with contextlib.suppress(ValueError):
                            if json.loads(data).get("op") == "kill":
                                self._kill_rest(pid)
                ended = self._reap(pid)
        finally:
            _close(pidfd)
        status, usage = ended
        self._kill_rest(pid)
        self._reap_all()
        _send(self.sock, {"op": "exit", "status": status,
                          "cpu": usage.ru_utime + usage.ru_stime})

    def _spawn(self, argv: list[str], env: dict[str, str], cwd: str, fds: list[int],
               limits: dict[int, int], cpu: int) -> int | None:
        """Start the command with ``posix_spawn`` (no copy of this process's page tables: a few
        times cheaper than a fork); None where it cannot (the fork path then reports why).

        The session-wide limits (file size, open files, core size) are set on the server
        itself, soft and hard, so that the command is born under them: a spawned process cannot
        be limited between its start and its exec. The CPU limit, which would count the
        server's own time, is set on the command right after it started (CPU time adds up: the
        moment before counts too)."""
        program = argv[0] if "/" in argv[0] else None
        if program is None:
            for folder in env.get("PATH", "").split(":"):
                candidate = os.path.join(folder or ".", argv[0])
                if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                    program = candidate
                    break
        if program is None or not os.path.isdir(cwd):
            return None
        for res, value in limits.items():
            soft, hard = resource.getrlimit(res)
            if (soft, hard) != (value, value) and (hard == resource.RLIM_INFINITY or value <= hard):
                with contextlib.suppress(ValueError, OSError):
                    resource.setrlimit(res, (value, value))
        try:
            for fd in fds:
                os.set_inheritable(fd, False)
            os.chdir(cwd)
            try:
                pid = os.posix_spawn(program, argv, env, setsid=True,
                                     setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
                                     file_actions=[(os.POSIX_SPAWN_DUP2, fd, i)
                                                   for i, fd in enumerate(fds)])
            finally:
                os.chdir(self.workdir)
        except OSError:
            return None
        with contextlib.suppress(ValueError, OSError):
            resource.prlimit(pid, resource.RLIMIT_CPU, (cpu, cpu + 1))
        return pid

    def read(self, msg: dict[str, Any], fds: list[int]) -> None:
        (out,) = fds
        try:
            limit = int(msg.get("max_bytes") or (16 << 20))
            fd = os.open(self._path(str(msg["path"])), os.O_RDONLY | os.O_NONBLOCK)
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise OSError(errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL,
                                  "not a regular file")
                if st.st_size > limit:
                    raise OSError(errno.EFBIG, f"{st.st_size} bytes, over the {limit}-byte limit")
                size = 0
                while chunk := os.read(fd, 1 << 16):
                    size += len(chunk)
                    _write_all(out, chunk)
            finally:
                os.close(fd)
        except (OSError, KeyError, ValueError) as e:
            _close(out)
            _error(self.sock, e)
            return
        _close(out)
        _send(self.sock, {"op": "done", "size": size})

    def write(self, msg: dict[str, Any], fds: list[int]) -> None:
        (src,) = fds
        try:
            path = self._path(str(msg["path"]))
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            mode = int(msg.get("mode") or 0o644) & 0o7777
            # Non-blocking: a fifo with no reader fails at once (ENXIO) instead of holding the
            # server; anything but a regular file is refused before it is truncated or written.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(errno.EINVAL, "not a regular file")
                os.set_blocking(fd, True)
                os.ftruncate(fd, 0)
                while chunk := os.read(src, 1 << 16):
                    _write_all(fd, chunk)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
        except (OSError, KeyError, ValueError) as e:
            with contextlib.suppress(OSError):  # let the host finish writing
                while os.read(src, 1 << 16):
                    pass
            _close(src)
            _error(self.sock, e)
            return
        _close(src)
        _send(self.sock, {"op": "done"})

    def _walk(self, top: str, recursive: bool, limit: int) -> list[list[Any]]:
        out: list[list[Any]] = []
        root = self._path(top)
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            rel_dir = os.path.relpath(dirpath, self.workdir)
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                try:
                    st = os.lstat(full)
                except OSError:
                    continue
                kind = ("link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode)
                        else "file" if stat.S_ISREG(st.st_mode) else "other")
                rel = os.path.normpath(os.path.join(rel_dir, name))
                out.append([rel, kind, st.st_size if kind == "file" else 0])
                if len(out) >= limit:
                    return out
            if not recursive:
                break
        return out

    def list_entries(self, msg: dict[str, Any], fds: list[int]) -> None:
        (out,) = fds
        try:
            entries = self._walk(str(msg.get("path") or "."), bool(msg.get("recursive", True)),
                                 int(msg.get("max_entries") or 10000))
            _write_all(out, json.dumps(entries).encode())
        except (OSError, ValueError) as e:
            _close(out)
            _error(self.sock, e)
            return
        _close(out)
        _send(self.sock, {"op": "done"})

    def snapshot(self, msg: dict[str, Any], fds: list[int]) -> None:
        import tarfile  # on first use: a plain subprocess server starts faster without it

        (out,) = fds
        patterns = [glob_regex(str(g)) for g in msg.get("globs") or ["**"]]
        count = 0
        skipped: list[str] = []
        try:
            with os.fdopen(out, "wb", closefd=True) as fh, \
                    tarfile.open(fileobj=fh, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                for rel, kind, _size in self._walk(".", True, 1 << 20):
                    if kind != "file" or not matches_any(patterns, rel):
                        continue
                    if not utf8_name(rel):
                        skipped.append(ascii(rel))
                        continue
                    full = os.path.join(self.workdir, rel)
                    try:
                        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                    except OSError:
                        continue
                    with os.fdopen(fd, "rb") as src:
                        st = os.fstat(src.fileno())
                        if not stat.S_ISREG(st.st_mode):
                            continue
                        info = tarfile.TarInfo(rel)
                        info.size = st.st_size
                        info.mode = st.st_mode & 0o777
                        tar.addfile(info, src)
                        count += 1
        except (OSError, ValueError, tarfile.TarError) as e:
            _error(self.sock, e)
            return
        _send(self.sock, {"op": "done", "files": count, "skipped": skipped[:100]})

    def untar(self, msg: dict[str, Any], fds: list[int]) -> None:
        import tarfile

        (src,) = fds
        try:
            with os.fdopen(src, "rb", closefd=True) as fh, tarfile.open(fileobj=fh, mode="r|") as tar:
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(self.workdir, filter="data")
                else:  # before Python 3.11.4: refuse what the data filter would
                    for member in tar:
                        name = os.path.normpath(member.name)
                        if (name.startswith(("/", "..")) or not (member.isfile() or member.isdir())):
                            continue
                        tar.extract(member, self.workdir, set_attrs=False)
        except (OSError, ValueError, tarfile.TarError) as e:
            _error(self.sock, e)
            return
        _send(self.sock, {"op": "done"})

    OPS: dict[str, tuple[str, int]] = {
        "exec": ("exec", 3), "read": ("read", 1), "write": ("write", 1), "list": ("list_entries", 1),
        "snapshot": ("snapshot", 1), "untar": ("untar", 1), "ping": ("", 0), "kill": ("", 0)}

    def serve(self) -> int:
        """Answer requests until the host closes the socket."""
        # Its own writes (write_file, untar) are under the commands' file-size limit: past it,
        # a write fails (EFBIG) rather than ending the server.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        close_on_exec_all()
        if not self.own_init:
            with contextlib.suppress(Exception):
                import ctypes

                ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        while True:
            self._reap()
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_MESSAGE, 4)
            except OSError:
                return 0
            for fd in fds:  # never inherited by a command (exec dups the three it gets)
                with contextlib.suppress(OSError):
                    os.set_inheritable(fd, False)
            if not data:
                return 0
            self._reap()
            try:
                msg = json.loads(data)
                name, nfds = self.OPS[str(msg.get("op"))]
                if len(fds) != nfds:
                    raise ValueError(f"{len(fds)} descriptors, {nfds} expected")
            except (ValueError, KeyError, AttributeError) as e:
                _close(*fds)
                _send(self.sock, {"op": "error", "errno": None, "message": f"bad request: {e}"})
                continue
            if not name:
                _send(self.sock, {"op": "pong"})
                continue
            try:
                getattr(self, name)(msg, fds)
            except Exception as e:
                with contextlib.suppress(OSError):
                    _error(self.sock, e)


def main(argv: list[str]) -> int:
    """``--control-fd N`` (an inherited socket) or ``--connect PATH`` (a socket the host
    listens on: a container's server); ``--workdir DIR``; ``--init``: the server is the init of
    the session's pid namespace (a container's pid 1)."""
    if "--connect" in argv:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(argv[argv.index("--connect") + 1])
    else:
        sock = socket.socket(fileno=int(argv[argv.index("--control-fd") + 1]))
    workdir = argv[argv.index("--workdir") + 1]
    # Only a pid namespace's init may kill(-1) its whole namespace: never a host's process,
    # whatever its arguments say.
    own_init = "--init" in argv and os.getpid() == 1
    if own_init:
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE: its commands may not ptrace it
    os.chdir(workdir)
    _send(sock, {"op": "hello", "pid": os.getpid()})
    return Server(sock, workdir, own_init=own_init).serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
