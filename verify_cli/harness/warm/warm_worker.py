"""The warm grading worker: runs inside a sandbox and forks one child per pytest run.

Started by ``verify_cli.grading.warm`` (stdlib and pytest only: it runs under the task's
interpreter, not verify-cli's). The parent imports pytest, its plugins (through a dry session,
so that plugin modules are loaded by pytest's assertion rewriter exactly as a cold run would)
and the task's preload modules, freezes its heap, and then never runs candidate code: for each
job it forks a child that

1. takes the job's stdout/stderr pipes and job socket, closes everything else of the parent's;
2. enters fresh user, mount, IPC and UTS namespaces: fresh tmpfs ``/tmp``, ``/workspace``,
   ``/dev/shm`` and ``/results``, the job folders hidden, then drops every capability. The network
   namespace is the worker's sandbox's own (no network, loopback only; see ``isolate``);
3. copies the job's files into ``/workspace`` (like ``cp -R``) and sends the host a handle on
   ``/results`` (the host reads it once the run is over; the socket credentials give it the
   child's pid);
4. sets the job's environment and runs ``python -m pytest ARGS`` (or the ``pytest`` script)
   in-process, then shuts down the way the interpreter does (non-daemon threads joined, atexit
   run, streams flushed) and exits.

The whole worker lives in one cgroup that the host re-limits for each run and empties of every
process but the worker's own after it, so a child is born inside its run's limits.

The parent reports each child's wait status to the host. Protocol: JSON messages over
SOCK_SEQPACKET unix sockets; file descriptors travel as SCM_RIGHTS.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import runpy
import socket
import sys
import threading
import time
import traceback
from typing import Any

JOBS_MOUNT = "/.verify-jobs"
WARMUP_DIR = "/.verify-warmup"
WORKDIR = "/workspace"
RESULTS = "/results"
SETUP_FAILED_EXIT = 111  # never scored: the host re-runs the job cold

if __package__:  # imported by verify-cli itself, for its constants
    from verify_cli.harness.candidate import verify_namespaces as ns
else:  # the worker: this folder is sys.path[0]; the shared helpers live in the candidate side's
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "candidate"))
    try:
        import verify_namespaces as ns  # type: ignore[no-redef]
    finally:
        sys.path.pop()
SetupError = ns.SetupError

# Shorthands for the shared helpers (docker_node_warm.py uses them too).
_libc = ns.libc
_mount = ns.mount
_loopback_up = ns.loopback_up
_CLONE_NEWNS = ns.CLONE_NEWNS
_CLONE_NEWUTS = ns.CLONE_NEWUTS
_CLONE_NEWIPC = ns.CLONE_NEWIPC
_CLONE_NEWUSER = ns.CLONE_NEWUSER
_CLONE_NEWNET = ns.CLONE_NEWNET
_MS_RDONLY = ns.MS_RDONLY
_MS_NOSUID = ns.MS_NOSUID
_MS_NODEV = ns.MS_NODEV
_MS_REC = ns.MS_REC
_MS_BIND = ns.MS_BIND
_MS_PRIVATE = ns.MS_PRIVATE
_PR_SET_DUMPABLE = ns.PR_SET_DUMPABLE


def _drop_capabilities() -> None:
    ns.drop_capabilities(no_new_privs=False)


def _copy_tree(src: str, dst: str) -> None:
    """``cp -R src/. dst/``: modes kept under the umask, symlinks copied as links."""
    with os.scandir(src) as it:
        entries = list(it)
    for entry in entries:
        target = os.path.join(dst, entry.name)
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir():
            os.mkdir(target, entry.stat().st_mode & 0o777)
            _copy_tree(entry.path, target)
        elif entry.is_file():
            mode = entry.stat().st_mode & 0o777
            with open(entry.path, "rb") as fin:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
                with os.fdopen(fd, "wb") as fout:
                    while chunk := fin.read(1 << 20):
                        fout.write(chunk)


def enter_namespaces() -> None:
    """The run's own user, mount, IPC and UTS namespaces, its mounts private: what a run's
    sandbox needs before its job is known (a spare child does it ahead of its job)."""
    ns.enter_user_namespace(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWUTS)
    _mount("none", "/", None, _MS_REC | _MS_PRIVATE)


def isolate(job: dict[str, Any], job_sock: socket.socket | None = None, *, entered: bool = False) -> int:
    """Fresh namespaces and file systems for one run, then no capabilities at all. Mounts
    exported for a warm candidate go to the host over ``job_sock`` as soon as they are made.

    No network namespace of its own: making one and tearing it down costs more CPU than the
    rest of the run's namespaces together (about 5 ms of a 50 ms run). The worker's sandbox has
    one already (bwrap's ``--unshare-all``: no interface but loopback), which no other worker and
    no candidate shares (the warm candidate parent has a sandbox of its own); the worker serves
    one run at a time and kills every process of a run before the next starts, and a run without
    capabilities over that namespace (it belongs to the worker's user namespace, not the run's)
    can change nothing in it that would outlive its processes.

    Returns a directory handle on the run's private results folder (a size-limited tmpfs)."""
    if not entered:
        enter_namespaces()
    disk = int(job["disk_bytes"])
    flags = _MS_NOSUID | _MS_NODEV
    # The interpreter's own installation may live under /tmp (a CI checkout's venv): keep a
    # handle on it and bind it back, read-only, over the fresh /tmp.
    handles = ns.runtime_handles_under("/tmp")
    _mount("tmpfs", "/tmp", "tmpfs", flags, f"size={disk},mode=0755")
    ns.bind_back_read_only(handles, flags)
    _mount("tmpfs", WORKDIR, "tmpfs", flags, f"size={disk},mode=0755")
    _mount("tmpfs", "/dev/shm", "tmpfs", flags, "mode=0755")
    _mount("tmpfs", RESULTS, "tmpfs", flags,
           f"size={int(job['results_bytes'])},nr_inodes={int(job['results_files'])},mode=0755")
    candidate = job.get("candidate")
    if candidate:
        _lay_out_two_process(f"{JOBS_MOUNT}/{job['id']}", candidate, flags,
                             str(job.get("env", {}).get("VERIFY_CHANNEL", "")))
        if job_sock is not None and _EXPORTED_MOUNTS:
            hand_over_mounts(job_sock)
    else:
        _copy_tree(f"{JOBS_MOUNT}/{job['id']}", WORKDIR)
    # Hide every job folder (this run's and any other) behind an empty read-only file system.
    _mount("tmpfs", JOBS_MOUNT, "tmpfs", flags | _MS_RDONLY, "size=4k,mode=0555")
    _drop_capabilities()
    # The host reads the results through this handle once every process of the run is dead.
    return os.open(RESULTS, os.O_RDONLY | os.O_DIRECTORY)


#: Two-process runs: mount points (made by the worker's sandbox) for the work folder as the
#: candidate sees it (no mounts over it), for the channel folder, and for ``/tmp`` as a cold
#: candidate binds it (before the tests' ``/tmp`` is marked nosymfollow).
CANDIDATE_WORK = "/.verify-work"
CANDIDATE_CHANNEL = "/.verify-channel"
CANDIDATE_TMP = "/.verify-tmp"
_MS_REMOUNT = 32
_MS_NOSYMFOLLOW = 256
#: statvfs flags and the mount flags a remount restates for them (the kernel refuses to clear a
#: flag of a mount made in a more privileged namespace, and a remount names every flag it keeps).
_STATVFS_MOUNT_FLAGS = ((os.ST_RDONLY, ns.MS_RDONLY), (os.ST_NOSUID, ns.MS_NOSUID), (os.ST_NODEV, ns.MS_NODEV),
                        (os.ST_NOEXEC, 8), (os.ST_NOATIME, 1024), (os.ST_NODIRATIME, 2048),
                        (os.ST_RELATIME, 1 << 21))


def refuse_links(path: str) -> None:
    """Mark the mount at ``path`` nosymfollow, its other flags kept: in this mount namespace no
    symbolic link on it is followed, so a link the candidate planted in a folder it shares with
    the tests (its "output" pointing at a golden file or a hidden test) cannot make the tests
    read their own file as its answer (harness/exec/verify_no_links.sh does the same for cold
    runs). Mounts bound from it earlier (the candidate's views) are other mounts: unchanged."""
    current = os.statvfs(path).f_flag
    flags = _MS_REMOUNT | _MS_BIND | _MS_NOSYMFOLLOW
    for statvfs_flag, mount_flag in _STATVFS_MOUNT_FLAGS:
        if current & statvfs_flag:
            flags |= mount_flag
    _mount("none", path, None, flags)


def _lay_out_two_process(src: str, candidate: dict[str, Any], flags: int, channel: str = "") -> None:
    """The work folder without the test folders, a second view of it for the candidate, then
    (in this run's view only) the test folders bound read-only and the candidate's code files
    covered: the tests reach that code only through the channel."""
    hidden = {str(h) for h in candidate.get("hidden", [])}
    with os.scandir(src) as it:
        for entry in it:
            if entry.name in hidden:
                continue
            target = os.path.join(WORKDIR, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(entry.path), target)
            elif entry.is_dir():
                os.mkdir(target, entry.stat().st_mode & 0o777)
                _copy_tree(entry.path, target)
            elif entry.is_file():
                with open(entry.path, "rb") as fin, open(target, "xb") as fout:
                    fout.write(fin.read())
                os.chmod(target, entry.stat().st_mode & 0o777)
    _mount(WORKDIR, CANDIDATE_WORK, None, _MS_BIND)  # not recursive: none of the mounts below
    _mount("/tmp", CANDIDATE_TMP, None, _MS_BIND | _MS_REC)  # as bwrap's --bind (a cold candidate)
    _mount("tmpfs", CANDIDATE_CHANNEL, "tmpfs", flags, "size=65536,mode=0755")
    for rel in sorted(hidden):
        folder = os.path.join(src, rel)
        if os.path.isdir(folder) and not os.path.islink(folder):
            target = os.path.join(WORKDIR, rel)
            os.makedirs(target, exist_ok=True)
            ns.bind_read_only(folder, target, flags)
    for rel in candidate.get("private", []):
        target = os.path.join(WORKDIR, str(rel))
        if os.path.isfile(target) and not os.path.islink(target):
            _mount("/dev/null", target, None, _MS_BIND)
    if candidate.get("warm"):
        export_candidate_mounts(channel)  # clones of the candidate's views, made before the marks
    for path in (WORKDIR, "/tmp"):
        refuse_links(path)


# --------------------------------------------------------------------------------------------
# Two-process runs served by a warm candidate parent (verify_candidate_parent.py)

_SYS_OPEN_TREE = 428  # x86_64 and aarch64 share the new mount API's numbers
_OPEN_TREE_CLONE = 1
_OPEN_TREE_CLOEXEC = os.O_CLOEXEC
#: Detached copies of the candidate's work folder, /tmp and channel folder, and the channel's
#: listening socket, once exported; whether they were handed to the host (the run's candidate
#: then starts warm).
_EXPORTED_MOUNTS: list[int] = []
_HANDED_OVER: list[bool] = []
#: What a ``{"op": "mounts"}`` message carries: the three detached mounts, then the listening
#: socket bound at the channel's path (mirrored in candidate/verify_candidate_parent.py).
HANDOVER_FDS = 4


def export_candidate_mounts(channel: str) -> None:
    """Detached copies (``open_tree(OPEN_TREE_CLONE)``, not recursive: none of the mounts over
    them) of the candidate's view of the work folder, of ``/tmp`` and of the channel folder, for
    the host to hand to the warm candidate parent, which attaches them in the run's candidate
    sandbox; and the candidate server's listening socket, bound and listening at ``channel`` (in
    the channel folder) before the tests start, so that the tests' first ``connect`` succeeds at
    once and waits in the socket's backlog until the server accepts: no polling for a socket
    file. Where the kernel refuses, nothing is exported and the run starts its candidate cold
    (whose server binds the socket itself)."""
    try:
        _EXPORTED_MOUNTS[:] = handover_handles(CANDIDATE_WORK, CANDIDATE_CHANNEL, channel)
    except OSError:
        return


def open_tree_clone(path: str) -> int:
    """A detached copy of the mount at ``path`` (``open_tree(OPEN_TREE_CLONE)``, not recursive:
    none of the mounts over it); raises OSError."""
    fd = _libc.syscall(_SYS_OPEN_TREE, -100, path.encode(), ctypes.c_uint(_OPEN_TREE_CLONE | _OPEN_TREE_CLOEXEC))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"open_tree {path}: {os.strerror(err)}")
    return int(fd)


def handover_handles(work: str, channel_dir: str, channel: str) -> list[int]:
    """What a ``{"op": "mounts"}`` message carries (HANDOVER_FDS): detached copies of ``work``
    (the candidate's view of the work folder), of ``/tmp`` and of ``channel_dir``, and a socket
    bound and listening at ``channel`` (in ``channel_dir``). Raises OSError, leaving none open."""
    if os.path.dirname(channel) != channel_dir:
        raise OSError(f"the channel {channel!r} is not in {channel_dir}")
    handles: list[int] = []
    try:
        for path in (work, "/tmp", channel_dir):
            handles.append(open_tree_clone(path))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(channel)
            listener.listen(64)
        except OSError:
            listener.close()
            raise
        handles.append(listener.detach())
    except OSError:
        for fd in handles:
            os.close(fd)
        raise
    return handles


def hand_over_mounts(job_sock: socket.socket) -> None:
    """Send the exported mounts and listening socket to the host at once (``{"op": "mounts"}``),
    so that the candidate's sandbox is built while this child finishes its own. This process
    keeps no handle on the listening socket: only the candidate's server accepts on it."""
    socket.send_fds(job_sock, [json.dumps({"op": "mounts"}).encode()], _EXPORTED_MOUNTS)
    for fd in _EXPORTED_MOUNTS:
        os.close(fd)
    _EXPORTED_MOUNTS.clear()
    _HANDED_OVER.append(True)


def start_candidate(job: dict[str, Any]) -> None:
    """Start the run's candidate process (its own sandbox: a bwrap command line built by the
    host) with nothing of this process's environment; none where the host starts it in the
    warm candidate parent from the exported mounts."""
    candidate = job.get("candidate")
    if not candidate or _HANDED_OVER:
        return
    import subprocess

    subprocess.Popen([str(a) for a in candidate["argv"]], env={"PATH": "/usr/bin:/bin"},
                     stdin=subprocess.DEVNULL, close_fds=True, cwd="/")


def _exit_code_of(exc: SystemExit) -> int:
    """What the interpreter makes of an uncaught SystemExit."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    with contextlib.suppress(Exception):  # the interpreter ignores this too
        print(code, file=sys.stderr)
    return 1


def _finalize(code: int) -> int:
    """The parts of interpreter shutdown a run can observe: threads, atexit, flushed streams."""
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            if stream is sys.stdout:
                code = 120
    return code


def _reseed_copied_generators() -> None:
    # random reseeds itself after fork; libraries a task preloads may not.
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        with contextlib.suppress(Exception):
            nprandom.seed()


_INSTALL_PREFIXES = tuple(sorted({os.path.realpath(p) + "/" for p in (sys.prefix, sys.base_prefix)}))


def _imports_report(baseline: set[str]) -> list[str]:
    """Top-level third-party modules this run imported that the parent has not. A run whose
    ``sys.modules`` is no larger than the parent's imported nothing new that matters: nothing is
    looked at then (a full look touches every module object, and a forked child pays a page
    copy for each page it touches)."""
    if len(sys.modules) <= len(baseline):
        return []
    out: set[str] = set()
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    for name, mod in list(sys.modules.items()):
        top = name.partition(".")[0]
        if name in baseline or top in stdlib or top in out or top.startswith("_"):
            continue
        path = str(getattr(mod, "__file__", "") or "")
        # Installed packages only: not the run's own files, nor anything it dropped in /tmp
        # (the interpreter's installation may itself live under /tmp, in a CI checkout).
        installed = path.startswith(_INSTALL_PREFIXES)
        if "-packages/" in path and (installed or not path.startswith((WORKDIR, "/tmp"))):
            out.add(top)
    return sorted(out)[:64]


def run_pytest_as_command(mode: str, program: str, args: list[str], argv0: str) -> int:
    """Run pytest in this process as ``python -m pytest ARGS`` (``mode == "module"``) or as the
    ``pytest`` console script ``program`` would; returns the exit status a cold run would have,
    after the interpreter's own shutdown steps (threads joined, atexit, streams flushed)."""

    def start() -> None:
        if mode == "module":
            sys.orig_argv = [argv0, "-m", "pytest", *args]
            sys.argv = ["-m", *args]
            sys.path[0] = os.getcwd()
            runpy.run_module("pytest", run_name="__main__", alter_sys=True)
        else:
            sys.orig_argv = [sys.executable, program, *args]
            sys.argv = [program, *args]
            sys.path[0] = os.path.dirname(program)
            runpy.run_path(program, run_name="__main__")

    return _run_as_main(start)


def _run_as_main(start: Any) -> int:
    """Call ``start()`` as the interpreter runs a main module: the exit status an uncaught
    SystemExit or exception gives, after the interpreter's own shutdown steps."""
    try:
        start()
        code = 0
    except SystemExit as e:
        code = _exit_code_of(e)
    except BaseException:
        with contextlib.suppress(BaseException):
            sys.excepthook(*sys.exc_info())
        code = 1
    with contextlib.suppress(BaseException):
        code = _finalize(code)
    return code


def _key_to_pipe(env: dict[str, str]) -> dict[str, str]:
    """The job's environment with its seal key (the host's order, trusted_launch.SEAL_KEY_ENV)
    moved into a pipe named by ``VERIFY_SEAL_FD``, as a cold run's wrapper hands it: the key is
    in no environment, and the run's key reader reads it once and closes it."""
    key = env.pop("VERIFY_SEAL_KEY", None)
    if key:
        read_end, write_end = os.pipe()
        os.write(write_end, key.encode())
        os.close(write_end)
        env["VERIFY_SEAL_FD"] = str(read_end)
    return env


def run_child(job: dict[str, Any], out_fd: int, err_fd: int, job_sock: socket.socket,
              baseline: set[str], *, entered: bool = False) -> None:
    """Runs in the forked child (``entered``: a spare that entered its namespaces ahead of the
    job); never returns."""
    code = SETUP_FAILED_EXIT
    try:
        if job["mode"] == "runner":
            runner_main(job["program"])  # a runner this worker lacks is a setup error, not a score
        _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)  # like any fresh process (the parent is not)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        keep = job_sock.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        cpu = int(job["cpu_seconds"])
        fsize = int(job["file_bytes"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        results_fd = isolate(job, job_sock, entered=entered)
        socket.send_fds(job_sock, [json.dumps({"op": "ready"}).encode()], [results_fd])
        os.close(results_fd)
        os.chdir(WORKDIR)
        os.environ.clear()
        os.environ.update(_key_to_pipe(job["env"]))
        time.tzset()
        _reseed_copied_generators()
        start_candidate(job)
    except BaseException as e:
        ns.fail_setup(job_sock, e, SETUP_FAILED_EXIT)
    if job["mode"] == "runner":
        code = run_runner_as_command(job["program"], job["argv0"])
    else:
        code = run_pytest_as_command(job["mode"], job["program"], list(job["args"]), job["argv0"])
    if job.get("candidate"):
        # The tests are done: the host may end the candidate's side now, while this process's
        # own exit (its namespaces' teardown) goes on.
        with contextlib.suppress(Exception):
            ns.send(job_sock, {"op": "finished"})
    if job.get("report_imports"):
        with contextlib.suppress(Exception):
            report = {"op": "imports", "modules": _imports_report(baseline)}
            job_sock.sendall(json.dumps(report).encode())
    os._exit(code)


#: The test the dry session runs (the host writes it into WARMUP_DIR): it exercises what every
#: run does after collection (assertion rewriting, reports, JUnit XML) so that those code paths'
#: lazy imports and compiled patterns are in place before the first fork.
WARMUP_TEST = """\
def test_warm_up():
    assert [1, 2] == [1, 2]
    assert {"a": 1}.get("a") == 1
"""


def warm_up(preload: list[str]) -> tuple[list[str], dict[str, str]]:
    """Import pytest, its plugins and ``preload``; returns (loaded, failed: name -> error)."""
    import pytest

    loaded: list[str] = []
    failed: dict[str, str] = {}
    for name in preload:
        try:
            __import__(name)
            loaded.append(name)
        except BaseException as e:
            failed[name] = f"{type(e).__name__}: {e}"
    # A dry session loads the entry-point plugins through pytest's assertion rewriter, as a cold
    # run does, so the runs that follow neither re-import them nor warn that they cannot. It
    # leaves nothing behind that a run could see: environment, sys.path and its test module are
    # put back as they were.
    saved_env = dict(os.environ)
    saved_path = list(sys.path)
    before = set(sys.modules)
    try:
        code = pytest.main(["-q", "-s", "-p", "no:cacheprovider", "--junitxml=/dev/null",
                            WARMUP_DIR])
        if code not in (0, 5):
            failed["<pytest>"] = f"the warm-up session exited {int(code)}"
    except BaseException as e:
        failed["<pytest>"] = f"{type(e).__name__}: {e}"
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.path[:] = saved_path
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(WARMUP_DIR):
                del sys.modules[name]
        import tempfile

        tempfile.tempdir = None
    return loaded, failed


# --------------------------------------------------------------------------------------------
# Workers of the built-in runners ('calls' and 'stdio' tasks: ``python -m verify_calls``)

#: What a runner imports on some paths only (the stand-in and its wire for calls, the process
#: and temporary-file modules for stdio and the local server, ``ast`` for assert lists): a
#: runner worker imports it all once, so that no run pays for it.
RUNNER_SUPPORT = ("verify_runner_common", "verify_standin", "verify_peer", "verify_wire", "ast",
                  "shlex", "shutil", "subprocess", "tempfile", "traceback", "math", "selectors")


def parse_runners(argv: list[str]) -> list[str]:
    """``--runners verify_calls,verify_stdio``: a worker that serves those runners (and no pytest)."""
    if "--runners" not in argv:
        return []
    listed = argv[argv.index("--runners") + 1]
    return [m for m in listed.split(",") if m]


def warm_up_runners(runners: list[str], preload: list[str]) -> tuple[list[str], dict[str, str]]:
    """Import the runner modules, what they need on any path, and ``preload``; returns (loaded,
    failed: name -> error). A runner that cannot be imported fails every run of it (setup
    error, so the host re-runs it cold)."""
    loaded: list[str] = []
    failed: dict[str, str] = {}
    for name in [*runners, *RUNNER_SUPPORT, *preload]:
        if name in loaded or name in failed:
            continue
        try:
            __import__(name)
            loaded.append(name)
        except BaseException as e:
            failed[name] = f"{type(e).__name__}: {e}"
    return loaded, failed


def runner_main(module: str) -> Any:
    """The ``main`` of a runner module this worker imported."""
    main_function = getattr(sys.modules.get(module), "main", None)
    if not callable(main_function):
        raise SetupError(f"the worker has not imported the runner {module!r}")
    return main_function


def run_runner_as_command(module: str, argv0: str) -> int:
    """``python -m MODULE`` for a runner this worker imported: its ``main()`` runs in this
    process, as the cold command would (``sys.path[0]`` the harness folder, ``sys.argv[0]`` the
    module's file); returns the exit status a cold run would have, after the interpreter's own
    shutdown steps. The module is the one the worker imported from the harness, never a file of
    the same name in the work folder."""

    def start() -> None:
        main_function = runner_main(module)
        runner = sys.modules[module]
        sys.orig_argv = [argv0, "-m", module]
        sys.argv = [str(getattr(runner, "__file__", module))]
        # As the trusted launcher starts it cold (harness/verify_launch.py): the harness folder
        # first, never the work folder (the candidate writes there while the runner runs).
        sys.path[0] = os.path.dirname(os.path.abspath(__file__))
        main_function()

    return _run_as_main(start)


def fork_spare(control: socket.socket, baseline: set[str]) -> tuple[int, socket.socket]:
    """Fork the next run's child ahead of its job (asked by the host once a run is over, so the
    fork is off the next run's path): it enters its namespaces, then waits on the returned socket
    for the job (the request and its three descriptors) and runs it as a child forked for it
    would. (pid, socket); a spare that finds the socket closed exits."""
    mine, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        mine.close()
        os.close(control.detach())  # only the worker reads the host's requests
        code = SETUP_FAILED_EXIT
        try:
            enter_namespaces()
            msg, fds = ns.next_request(its, ("run",), 3)
            if msg is None:
                code = 0
            else:
                run_child(msg, fds[0], fds[1], socket.socket(fileno=fds[2]), baseline, entered=True)
        finally:
            os._exit(code)
    its.close()
    return pid, mine


def serve(control: socket.socket, preload: list[str], runners: list[str] | None = None) -> int:
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # candidates may not ptrace us or open /proc/PPID/*
    loaded, failed = warm_up_runners(runners, preload) if runners else warm_up(preload)
    baseline = set(sys.modules)
    ns.announce_ready(control, {"op": "ready", "pid": os.getpid(), "loaded": loaded,
                                "failed": failed})
    spare: tuple[int, socket.socket] | None = None
    while True:
        msg, fds = ns.next_request(control, ("run", "ping", "spare"), 3)
        if msg is None:
            return 0
        if msg["op"] in ("ping", "spare"):
            for fd in fds:
                os.close(fd)
            if msg["op"] == "ping":
                ns.send(control, {"op": "pong"})
            elif spare is None:
                spare = fork_spare(control, baseline)
            continue
        out_fd, err_fd, sock_fd = fds
        pid = 0
        if spare is not None:
            pid, handoff = spare
            spare = None
            try:
                socket.send_fds(handoff, [json.dumps(msg).encode()], fds)
            except OSError:  # the spare is gone: reap it, fork the run's child as ever
                with contextlib.suppress(OSError):
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                pid = 0
            finally:
                handoff.close()
        if pid == 0:
            job_sock = socket.socket(fileno=sock_fd)
            pid = os.fork()
            if pid == 0:
                control.detach()
                run_child(msg, out_fd, err_fd, job_sock, baseline)
            job_sock.close()
        else:
            os.close(sock_fd)
        os.close(out_fd)
        os.close(err_fd)
        _, status, usage = os.wait4(pid, 0)
        ns.send(control, {"op": "exit", "id": msg["id"], "status": status,
                        "cpu": usage.ru_utime + usage.ru_stime})


def main(argv: list[str]) -> int:
    control_fd = int(argv[argv.index("--control-fd") + 1])
    listed = argv[argv.index("--preload") + 1] if "--preload" in argv else ""
    preload = [m for m in listed.split(",") if m]
    runners = parse_runners(argv)
    control = socket.socket(fileno=control_fd)
    try:
        return serve(control, preload, runners)
    except BaseException:
        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
