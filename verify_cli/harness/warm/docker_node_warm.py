"""The warm parent of a docker *node* (a long-lived container serving many runs).

Started by the docker backend's node mode (``verify_cli.sandbox.docker.warm_nodes``) as the
node's supervisor, under the interpreter the task's command names (stdlib and pytest only). It
imports pytest, its plugins and the task's preloads once (``docker_warm.warm_up``; mode
``runner``: a built-in runner, ``python -m verify_calls``, and what it needs instead), says
``verify-node-ready`` on stdout, and then serves one job at a time from stdin:

    NONCE HEADER_BYTES TAR_BYTES\\n  HEADER (JSON)  TAR (the work folder)  MARKER\\n

For each job it forks a child and never runs candidate code itself. The child (``C``) takes
/dev/null as stdin and closes every descriptor but stdout, stderr and a socket to the parent,
raises its OOM score to the maximum (the run, not the parent, is the one the kernel kills), then
enters fresh user, mount, pid, network, IPC and UTS namespaces: fresh size-limited tmpfs
``/workspace``, ``/tmp``, ``/results`` and ``/dev/shm``, loopback up, hostname ``sandbox``. It sends
the parent a handle on ``/results`` and forks the pid namespace's init (``G``), which mounts a
fresh ``/proc``, forks the run (``P``) and reaps until the run ends, then exits with its status:
the kernel then kills every process left in the namespace (so the whole process tree of a run
dies with it, as bubblewrap's init does in a cold node run). ``G`` dies with ``C``
(``PR_SET_PDEATHSIG``). ``P`` drops every capability, sets the run's CPU, file-size and core
rlimits, unpacks the work folder with ``tar`` exactly as a cold run does (``\\x02`` + tar's
complaint and exit 125 when it cannot), sets the run's environment, writes the ready byte
``\\x01`` on stderr and runs pytest (or the runner's ``main()``) in-process
(``warm_worker.run_pytest_as_command``, ``run_runner_as_command``).

A two-process job (the header's ``candidate``: see ``verify_cli.sandbox.docker.two_process``)
is laid out as the cold node run lays it out, and its candidate starts in the same nested
bubblewrap, from a process that never saw the tests' view (``_lay_out_two_process``); pytest
then runs warm in ``P`` on the tests' side, with ``VERIFY_CHANNEL`` and
``VERIFY_CANDIDATE_EXEC`` in its environment as in the cold run. Where the candidate is the Python
candidate server, the node's candidate parent (``docker_node_candidate``) forks it instead, and
``P`` hands it the run's folders before its tests start.

Memory and process limits are the container's (the node's envelope is the run's shape: memory
limit, process limit plus the node's own few); per-run cgroups are not writable inside the
container. The marker that frames the run's end is read from stdin only after the fork, so no
process of the run ever holds it; the parent is not dumpable and is outside the run's pid
namespace and ``/proc``. After the run the parent writes the node protocol's trailer
(``verify_cli.sandbox.docker.nodes``): on stderr ``\\nMARKER\\n``; on stdout ``\\nMARKER STATUS
CPU_NS OOM_KILLS PROCESSES\\nSIZE\\n`` and the results folder as tar.
"""

from __future__ import annotations

import contextlib
import gc
import io
import json
import os
import signal
import socket
import sys
import tarfile
import threading
import time
from typing import Any

import docker_node_candidate as warm_candidates  # same folder: sys.path[0]
import docker_node_unpack
import docker_warm
import warm_worker

READY_LINE = b"verify-node-ready\n"
UNFIT = 97
UNPACK_FAILED = 125
SETUP_FAILED = 126
_CLONE_NEWPID = 0x20000000
_PR_SET_PDEATHSIG = 1
_MS_NOEXEC = 8
_HEADER_MAX = 1 << 22
#: The namespace, mount and capability helpers the warm worker shares with the candidate side.
ns = warm_worker.ns
_libc = warm_worker._libc


def _read_exact(n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(0, min(n - len(buf), 1 << 20))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def _read_line(limit: int = 200) -> bytes | None:
    line = b""
    while not line.endswith(b"\n"):
        c = os.read(0, 1)  # a byte at a time: nothing past the line is read
        if not c or len(line) > limit:
            return None
        line += c
    return line


def _oom_kills() -> int:
    total = 0
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        with contextlib.suppress(OSError, ValueError), open(path) as fh:
            for line in fh:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    total += int(value)
    return total


def _live_processes() -> int:
    """The container's processes, zombies aside (as the cold supervisor counts them)."""
    n = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{name}/stat") as fh:
                if fh.read().rpartition(")")[2].split()[:1] != ["Z"]:
                    n += 1
    return n


def _status_code(status: int) -> int:
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return 1


def _results_tar(fd: int | None) -> bytes:
    """The results folder (through the handle the run's child sent) as a tar stream."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if fd is not None:
            here = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fchdir(fd)
                tar.add(".", recursive=True)
            except OSError:
                pass
            finally:
                os.fchdir(here)
                os.close(here)
    return out.getvalue()


def _unpack(tar_bytes: bytes, env: dict[str, str], job: dict[str, Any],
            into: str = warm_worker.WORKDIR) -> None:
    """``tar -x`` of the work folder into ``into`` (/workspace), as the cold node run does it:
    in this process where ``docker_node_unpack`` lays it out as tar would (the job's
    ``unpack_here``: lever ``docker-unpack-here``), else by tar itself."""
    if job.get("unpack_here") and docker_node_unpack.unpack(tar_bytes, into, int(job["file_bytes"])):
        return
    data_r, data_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.posix_spawnp("tar", ["tar", "-x", "-f", "-", "-C", into],
                          {**env, "TAR_OPTIONS": ""},
                          file_actions=[(os.POSIX_SPAWN_DUP2, data_r, 0),
                                        (os.POSIX_SPAWN_DUP2, err_w, 1),
                                        (os.POSIX_SPAWN_DUP2, err_w, 2),
                                        (os.POSIX_SPAWN_CLOSE, data_w),
                                        (os.POSIX_SPAWN_CLOSE, err_r)])
    os.close(data_r)
    os.close(err_w)

    def feed() -> None:
        with contextlib.suppress(OSError):
            view = memoryview(tar_bytes)
            while view:
                view = view[os.write(data_w, view[: 1 << 16]):]
        os.close(data_w)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    said = b""
    while chunk := os.read(err_r, 65536):
        said += chunk[: max(0, 65536 - len(said))]
    os.close(err_r)
    writer.join()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        os.write(2, b"\x02" + said.rstrip(b"\n") + b"\n")
        os._exit(UNPACK_FAILED)


def _isolate(job: dict[str, Any]) -> None:
    """Fresh namespaces (pid included: the next fork is its init) and tmpfs folders."""
    fresh = (warm_worker._CLONE_NEWUSER | warm_worker._CLONE_NEWNS | warm_worker._CLONE_NEWIPC
             | warm_worker._CLONE_NEWNET | warm_worker._CLONE_NEWUTS | _CLONE_NEWPID)
    # /proc/self's files belong to root while the process is not dumpable (the parent is not).
    _libc.prctl(warm_worker._PR_SET_DUMPABLE, 1, 0, 0, 0)
    ns.enter_user_namespace(fresh)
    # Not dumpable again: the namespace's init (forked next) keeps its capabilities, and no
    # process of the run may ptrace it.
    _libc.prctl(warm_worker._PR_SET_DUMPABLE, 0, 0, 0, 0)
    warm_worker._mount("none", "/", None, warm_worker._MS_REC | warm_worker._MS_PRIVATE)
    flags = warm_worker._MS_NOSUID | warm_worker._MS_NODEV
    for path, size, mode in (("/tmp", job["tmp_bytes"], "1777"),
                             (warm_worker.WORKDIR, job["work_bytes"], "0755"),
                             (warm_worker.RESULTS, job["results_bytes"], "0755"),
                             ("/dev/shm", job["tmp_bytes"], "1777")):
        warm_worker._mount("tmpfs", path, "tmpfs", flags, f"size={int(size)},mode={mode}")
    name = b"sandbox"
    ns.check(_libc.sethostname(name, len(name)), "sethostname")
    warm_worker._loopback_up()


def _init(job: dict[str, Any], tar_bytes: bytes) -> None:
    """pid 1 of the run's pid namespace (G): fresh /proc, the run (P), reap until it ends."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    warm_worker._mount("proc", "/proc", "proc",
                       warm_worker._MS_NOSUID | warm_worker._MS_NODEV | _MS_NOEXEC)
    pid = os.fork()
    if pid == 0:
        _run(job, tar_bytes)
    _close_job_fd(job)  # the run's (P's) alone
    while True:
        try:
            done, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if done == pid:
            os._exit(_status_code(status))


def _run(job: dict[str, Any], tar_bytes: bytes) -> None:
    """The run itself (P); never returns."""
    try:
        _libc.prctl(warm_worker._PR_SET_DUMPABLE, 1, 0, 0, 0)  # like any fresh process
        candidate = job.get("candidate")
        if not candidate:
            warm_worker._drop_capabilities()
        import resource

        cpu = job.get("cpu_seconds")
        if isinstance(cpu, int):
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        fsize = int(job["file_bytes"])
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        env = {str(k): str(v) for k, v in dict(job["env"]).items()}
        env["PWD"] = warm_worker.WORKDIR  # the cold run's shell exports it
        env = warm_worker._key_to_pipe(env)  # the seal key: in a pipe (not inherited), in no environment
        if candidate:
            try:
                _lay_out_two_process(candidate, tar_bytes, env, job)
            except warm_candidates.Unavailable as e:  # before the tests: the host re-runs it cold
                with contextlib.suppress(OSError):
                    os.write(2, f"warm node setup failed: the warm candidate: {e}\n".encode())
                os._exit(warm_candidates.CANDIDATE_UNAVAILABLE)
            warm_worker._drop_capabilities()
        else:
            _unpack(tar_bytes, env, job)
        del tar_bytes
        os.chdir(warm_worker.WORKDIR)
        os.environ.clear()
        os.environ.update(env)
        time.tzset()
        warm_worker._reseed_copied_generators()
    except BaseException as e:  # never the code's fault: the host re-runs the job cold
        with contextlib.suppress(OSError):
            os.write(2, f"warm node setup failed: {type(e).__name__}: {e}\n".encode())
        os._exit(SETUP_FAILED)
    os.write(2, b"\x01")
    mode, program = str(job["mode"]), str(job["program"])
    if mode == "runner":
        os._exit(warm_worker.run_runner_as_command(str(job["runner"]), program))
    os._exit(warm_worker.run_pytest_as_command(mode, program, [str(a) for a in job["args"]],
                                               program))


# -- two-process runs ---------------------------------------------------------------------------

def _lay_out_two_process(cand: dict[str, Any], tar_bytes: bytes, env: dict[str, str],
                         job: dict[str, Any]) -> None:
    """A two-process run's folders, as the cold node run lays them out
    (``verify_cli.sandbox.docker.two_process``), then the candidate's sandbox started, then this
    process's own view. Runs in P with the run's user namespace's capabilities (dropped after).

    1. The work folder unpacked into the shared folder; the test folders moved to the held
       folder (a rename on the same tmpfs), so that they were never in the candidate's folder.
    2. A starter process forked now, in the run's mount namespace as it is here: it waits.
    3. P enters a mount namespace of its own and, there only, binds the held test folders back
       read-only, covers the candidate's code files with ``/dev/null``, binds the shared
       folder over ``/workspace`` and marks it and ``/tmp`` nosymfollow (its view only).
    4. Then the starter drops every capability and becomes the candidate's nested bubblewrap
       (the cold path's command line): it never sees P's mounts, and nothing of the run had
       started before P's view was complete.
    """
    shared, held_dir, channel = str(cand["shared"]), str(cand["held_dir"]), str(cand["channel"])
    for path, mode in ((shared, 0o755), (held_dir, 0o700), (channel, 0o700)):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)
    _unpack(tar_bytes, env, job, shared)
    for rel in cand["hidden"]:
        src = os.path.join(shared, str(rel))
        if os.path.lexists(src):  # `mv SHARED/rel HELD/` as the cold wrapper does
            os.rename(src, os.path.join(held_dir, os.path.basename(str(rel))))
    held = [str(rel) for rel in cand["held"]]
    for rel in held:  # the candidate's bubblewrap mounts its empty tmpfs here
        os.makedirs(os.path.join(shared, rel), exist_ok=True)
    job_fd = cand.get("job_fd")
    go_r = go_w = -1
    handles: list[int] = []
    if isinstance(job_fd, int):  # the node's candidate parent forks this run's candidate
        handles = warm_candidates.export_mounts(shared, channel, str(env.get("VERIFY_CHANNEL", "")))
    else:
        argv = [*map(str, cand["head"]), *warm_candidates.image_binds([str(d) for d in cand["skip"]]),
                *map(str, cand["tail"])]
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _start_candidate(go_r, go_w, argv)
        os.close(go_r)
    try:
        ns.check(_libc.unshare(warm_worker._CLONE_NEWNS), "unshare")
        flags = warm_worker._MS_NOSUID | warm_worker._MS_NODEV
        for rel in held:
            target = os.path.join(shared, rel)
            ns.bind_read_only(os.path.join(held_dir, rel), target, flags)
        for rel in cand["covered"]:
            target = os.path.join(shared, str(rel))
            if os.path.isfile(target) and not os.path.islink(target):
                _cover(target)
        warm_worker._mount(shared, warm_worker.WORKDIR, None, warm_worker._MS_BIND | warm_worker._MS_REC)
        for path in (warm_worker.WORKDIR, "/tmp"):  # no link the candidate plants is followed here
            warm_worker.refuse_links(path)
        home = env.get("VERIFY_TRUSTED_HOME", "")
        if home and os.path.isdir(home):  # the trusted side's home, as the cold run's bwrap mounts it
            warm_worker._mount("tmpfs", home, "tmpfs", flags, "size=1048576,mode=0700")
        if isinstance(job_fd, int):
            warm_candidates.hand_over(job_fd, handles)
            handles = []
        else:
            os.write(go_w, b"go")
    finally:
        if go_w >= 0:
            os.close(go_w)
        for fd in handles:
            os.close(fd)


#: statvfs flags a read-only remount keeps from the source mount (the kernel refuses to clear
#: them on a mount of a more privileged namespace), as mount flags.
_KEPT_FLAGS = ((os.ST_NOEXEC, 8), (os.ST_NOATIME, 1024), (os.ST_NODIRATIME, 2048),
               (os.ST_RELATIME, 1 << 21))


def _cover(target: str) -> None:
    """``/dev/null`` over ``target``, read-only and with device access off, as bubblewrap's
    ``--ro-bind /dev/null TARGET`` makes it in the cold run: opening it fails."""
    warm_worker._mount("/dev/null", target, None, warm_worker._MS_BIND)
    flags = (warm_worker._MS_BIND | ns.MS_REMOUNT | warm_worker._MS_RDONLY
             | warm_worker._MS_NOSUID | warm_worker._MS_NODEV)
    have = os.statvfs(target).f_flag
    for st_flag, ms_flag in _KEPT_FLAGS:
        if have & st_flag:
            flags |= ms_flag
    warm_worker._mount("none", target, None, flags)


def _start_candidate(go_r: int, go_w: int, argv: list[str]) -> None:
    """The starter (a child of P, still in the run's first mount namespace); never returns.
    It waits for P's view to be complete, then becomes the candidate's bubblewrap with no
    capability, no descriptor but stdin (/dev/null), stdout and stderr, and no variable of the
    run's (bubblewrap clears its own environment for the candidate)."""
    try:
        os.close(go_w)
        if os.read(go_r, 2) != b"go":
            os._exit(0)
        os.closerange(3, 1 << 16)
        warm_worker._drop_capabilities()
        os.execvpe(argv[0], argv, {"PATH": "/usr/local/bin:/usr/bin:/bin"})
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.write(2, f"verify: cannot start the candidate's sandbox: {type(e).__name__}: {e}\n".encode())
    os._exit(127)


def _child(job: dict[str, Any], tar_bytes: bytes, sock: socket.socket) -> None:
    """The run's outer process (C), outside its pid namespace; never returns. It keeps only
    ``sock`` and, where the node's candidate parent serves the run, its job socket."""
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        cand = job.get("candidate") or {}
        low = 3
        for keep in sorted({sock.fileno(), *([cand["job_fd"]] if isinstance(cand.get("job_fd"), int) else [])}):
            os.closerange(low, keep)
            low = keep + 1
        os.closerange(low, 1 << 16)
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
        _isolate(job)
        socket.send_fds(sock, [b"ready"], [os.open(warm_worker.RESULTS, os.O_RDONLY | os.O_DIRECTORY)])
        sock.close()
        pid = os.fork()
        if pid == 0:
            _init(job, tar_bytes)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.write(2, f"warm node setup failed: {type(e).__name__}: {e}\n".encode())
        os._exit(SETUP_FAILED)
    del tar_bytes
    _close_job_fd(job)
    _, status = os.waitpid(pid, 0)
    os._exit(_status_code(status))


def _close_job_fd(job: dict[str, Any]) -> None:
    """Close this process's copy of the warm candidate's job socket (only ``P`` uses it)."""
    fd = (job.get("candidate") or {}).get("job_fd")
    if isinstance(fd, int):
        with contextlib.suppress(OSError):
            os.close(fd)


#: The node's warm candidate parent (two-process runs of the Python candidate server).
CANDIDATES = warm_candidates.WarmCandidates()


def _begin_candidate(job: dict[str, Any]) -> tuple[warm_candidates.NodeCandidateParent | None, socket.socket | None]:
    """The node's candidate parent and the run's end of its job socket, where it serves this
    run (the run's ``P`` then hands its candidate the run's folders: ``job_fd``)."""
    cand = job.get("candidate")
    if not cand or not cand.get("parent"):
        return None, None
    parent = CANDIDATES.parent_for(cand)
    if parent is None:
        return None, None
    try:
        sock = parent.begin(job, cand)
    except warm_candidates.Unavailable:
        CANDIDATES.drop()
        return None, None
    cand["job_fd"] = sock.fileno()
    return parent, sock


def _end_candidate(parent: warm_candidates.NodeCandidateParent | None, code: int) -> float:
    """After the run: its candidate killed and its end reported, or the parent goes; where
    the run could not set its warm candidate up, warm candidates are off in this node. The
    candidate's CPU seconds (a cold candidate's count in the run's own, as its processes are
    the run's)."""
    if parent is None:
        return 0.0
    cpu = parent.finish()
    if cpu is None:
        CANDIDATES.drop()
    if code == warm_candidates.CANDIDATE_UNAVAILABLE:
        CANDIDATES.turn_off("a run could not set its warm candidate up")
    return cpu or 0.0


def serve_one(job: dict[str, Any], tar_bytes: bytes) -> bool:
    """One run; False when the host is out of step (the node must go)."""
    ooms = _oom_kills()
    cpu_before = docker_warm._cgroup_cpu_usec()
    parent, job_sock = _begin_candidate(job)
    host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        host.close()
        _child(job, tar_bytes, child)
    child.close()
    if job_sock is not None:
        job_sock.close()
    results_fd: int | None = None
    with contextlib.suppress(OSError):
        _msg, fds, _flags, _addr = socket.recv_fds(host, 64, 1)
        results_fd = fds[0] if fds else None
    host.close()
    _, status, usage = os.wait4(pid, 0)
    marker = _read_line()  # sent after the job: no process of the run ever held it
    if marker is None:
        return False
    code = _status_code(status)
    candidate_cpu = _end_candidate(parent, code)
    # The container's CPU during the run, as a cold node run counts it (the candidate's too,
    # wherever it ran); where the cgroup cannot be read, the run's processes' and the warm
    # candidate's as their parents reaped them.
    used = docker_warm._cgroup_cpu_usec()
    cpu_ns = ((used - cpu_before) * 1000 if used and cpu_before
              else int((usage.ru_utime + usage.ru_stime + candidate_cpu) * 1e9))
    n = _live_processes() - CANDIDATES.own_processes()  # the parent's processes are the node's
    for _ in range(50):  # the kernel may still be taking the run's namespace down
        if n <= 3:
            break
        time.sleep(0.01)
        n = _live_processes() - CANDIDATES.own_processes()
    data = _results_tar(results_fd)
    if results_fd is not None:
        os.close(results_fd)
    m = marker.strip().decode()
    os.write(2, f"\n{m}\n".encode())
    how = (" warm" if parent is not None and code != warm_candidates.CANDIDATE_UNAVAILABLE
           else " cold" if job.get("candidate") else "")  # how the run's candidate started
    head = f"\n{m} {code} {cpu_ns} {_oom_kills() - ooms} {n}{how}\n{len(data)}\n".encode()
    view = memoryview(head + data)
    while view:
        view = view[os.write(1, view):]
    return True


def serve(nonce: str, mode: str, program: str, runner: str = "") -> int:
    while True:
        line = _read_line()
        if line is None:
            return 0
        words = line.split()
        if len(words) != 3 or words[0].decode() != nonce or int(words[1]) > _HEADER_MAX:
            return 0
        header = _read_exact(int(words[1]))
        tar_bytes = _read_exact(int(words[2]))
        if len(header) != int(words[1]) or len(tar_bytes) != int(words[2]):
            return 0
        job = json.loads(header)
        job["mode"], job["program"], job["runner"] = mode, program, runner
        if not serve_one(job, tar_bytes):
            return 0
        del header, tar_bytes, job


def _warm_up_runner(runner: str, preload: list[str]) -> bool:
    """Import the built-in runner ``runner`` (``verify_calls``, ``verify_stdio``: this folder),
    what it needs on any path and ``preload``, as the bwrap backend's runner workers do; False
    when the runner cannot be imported (the node is unfit: its runs go cold). A preload that
    cannot be imported is left to the run, which imports it itself, as a warm pytest node does.
    What the imports print goes to /dev/null (stdout is the node's protocol)."""
    with docker_warm.silenced():
        warm_worker.warm_up_runners([runner], preload)
    return callable(getattr(sys.modules.get(runner), "main", None))


def main(argv: list[str]) -> None:
    mode, program, preload, nonce = argv[1], argv[2], argv[3], argv[4]
    runner = argv[5] if mode == "runner" and len(argv) > 5 else ""
    modules = [m for m in preload.split(",") if m]
    if mode == "runner":
        fit = runner.isidentifier() and _warm_up_runner(runner, modules)
    else:
        fit = mode in ("module", "script") and docker_warm.warm_up(modules)
    if not fit:
        os._exit(UNFIT)
    _libc.prctl(warm_worker._PR_SET_DUMPABLE, 0, 0, 0, 0)  # no run may ptrace or read us
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    gc.collect()
    gc.freeze()  # runs share the warmed heap instead of copying it on the first collection
    os.write(1, READY_LINE)
    os._exit(serve(nonce, mode, program, runner))


if __name__ == "__main__":
    main(sys.argv)
