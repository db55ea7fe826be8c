"""``bwrap``: bubblewrap namespaces around the local runner.

All namespaces unshared (no network), read-only system folders, a private size-limited work
folder filled from the caller's files, a private size-limited results folder, a fresh session,
and ``--die-with-parent``: killing bwrap takes the whole pid namespace with it.

No host folder is writable from inside: once the command ends, its wrapper kills whatever it
left running and hands the results folder back as a tar archive on an inherited pipe, which the
runner reads up to a bound. (A writable host bind would let the command fill the host's disk.)
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from verify_cli.sandbox.base import (
    Availability,
    CandidateProcess,
    RunSpec,
    RuntimeLayer,
    WarmHost,
    protected_bind_args,
)
from verify_cli.sandbox.bwrap.rootfs import host_bwrap_bundle, nested_bwrap, root_view_args
from verify_cli.sandbox.environment import (
    CHANNEL_SOCKET,
    DEFAULT_PATH,
    SANDBOX_CANDIDATE_HARNESS,
    SANDBOX_CHANNEL_DIR,
    SANDBOX_HARNESS,
    SANDBOX_RESULTS,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    candidate_environment,
    candidate_exec_prefix,
    candidate_harness_dir,
    harness_dir,
    pinned_environment,
    python_runtime_prefixes,
)
from verify_cli.sandbox.local import RESULTS_FD, LocalSandbox, Prepared, key_stdin_of
from verify_cli.sandbox.plumbing.trusted_launch import (
    CLOSE_SEAL_FD,
    MOVE_SEAL_FD,
    TRUSTED_HOME,
    no_links_prefix,
    trusted_home_variables,
)
from verify_cli.sandbox.process import run_path, runtime_path
from verify_cli.sandbox.registry import register_sandbox

if TYPE_CHECKING:
    from verify_cli.sandbox.sessions.base import Session, SessionLimits, Workspace

_SESSIONS_LOCK = threading.Lock()

SOURCE_MOUNT = "/.verify-src"
#: The redirection that keeps the results pipe (local.RESULTS_FD) from a command the wrapper
#: starts: the candidate (it could write an archive of its own ahead of the wrapper's) and the
#: run's command; only the wrapper writes the results archive.
CLOSE_RESULTS_FD = f" {RESULTS_FD}>&-"
SANDBOX_UID = 1000
#: Size of the results folder (a tmpfs); the runner reads at most twice that of its archive.
RESULTS_FOLDER_BYTES = 64 * 1024 * 1024
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install -y bubblewrap) and make sure "
                "unprivileged user namespaces are enabled "
                "(sysctl kernel.unprivileged_userns_clone=1)")

#: Namespaces and session of every bwrap run: this backend's and the docker backend's node mode.
RUN_NAMESPACES = ("--unshare-all", "--die-with-parent", "--new-session")

#: The start markers of a run (local.Prepared.start_markers): the wrapper inside the run's
#: bwrap, and the tests' nested sandbox of a two-process run. A tar archive never starts with
#: either (its first member is "./").
OUTER_STARTED = b"S"
TESTS_STARTED = b"T"


def inner_started_prefix(marker: bytes) -> list[str]:
    """A command prefix that writes ``marker`` on the results pipe (local.RESULTS_FD) and runs
    the rest of the command without that descriptor."""
    return ["/bin/sh", "-c", f'printf {marker.decode()} >&{RESULTS_FD} && exec "$@"{CLOSE_RESULTS_FD}', "sh"]


_SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin")
#: /etc/hosts of every bwrap sandbox (runs, warm workers, sessions): the names of its loopback.
SANDBOX_HOSTS = ("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                 "127.0.1.1\tsandbox candidate\n")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/alternatives", "/etc/ssl",
              "/etc/nsswitch.conf", "/etc/localtime")


_PROBE_LOCK = threading.Lock()
_PROBED: list[Availability] = []  # the one success, once had: a working bwrap stays working
#: Tries of a probe that fails to create namespaces (user namespaces can run out for a moment).
PROBE_TRIES = 3


def _probe() -> Availability:
    """Whether bwrap works here. A success is remembered; a failure is not (it is asked again
    next time): a namespace shortage at the moment of the probe must not take the backend away
    for the life of the process, and a remembered success never stands in for a run's own
    proof that its sandbox started (:attr:`verify_cli.sandbox.local.Prepared.start_markers`)."""
    with _PROBE_LOCK:
        if _PROBED:
            return _PROBED[0]
        result = _probe_once()
        for _ in range(PROBE_TRIES - 1):
            if result.available or "namespace" not in result.reason:
                break
            time.sleep(0.2)
            result = _probe_once()
        if result.available:
            _PROBED.append(result)
        return result


def _probe_once() -> Availability:
    exe = shutil.which("bwrap")
    if exe is None:
        return Availability(False, "bwrap is not installed", INSTALL_HINT)
    if shutil.which("tar") is None:
        return Availability(False, "tar is not installed (it hands the results folder back)",
                            "install tar (Debian/Ubuntu: apt-get install -y tar)")
    try:
        proc = subprocess.run(
            [exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
            capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Availability(False, f"bwrap failed to start: {e}", INSTALL_HINT)
    if proc.returncode != 0:
        why = proc.stderr.decode(errors="replace").strip() or f"exit {proc.returncode}"
        return Availability(False, f"bwrap cannot create namespaces here: {why}", INSTALL_HINT)
    return Availability(True)


def _system_argv(scratch: Path, root: str | None = None) -> list[str]:
    """bwrap, its namespaces, and the read-only system every sandboxed process sees: the host's,
    or the root file system ``root`` (:attr:`RuntimeLayer.root`, :mod:`.rootfs`)."""
    passwd = scratch / "passwd"
    passwd.write_text(f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:"
                      f"sandbox:{SANDBOX_WORKDIR}:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n")
    group = scratch / "group"
    group.write_text(f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n")
    hosts = scratch / "hosts"  # loopback only: a program serving on localhost resolves it
    hosts.write_text(SANDBOX_HOSTS)
    argv = [shutil.which("bwrap") or "bwrap", *RUN_NAMESPACES,
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]
    argv += _system_view(root)
    argv += ["--ro-bind", str(passwd), "/etc/passwd", "--ro-bind", str(group), "/etc/group",
             "--ro-bind", str(hosts), "/etc/hosts"]
    return argv


def _system_view(root: str | None, *, nested: bool = False) -> list[str]:
    """The read-only system folders of a sandbox: the host's (:data:`_SYSTEM_DIRS` and the
    :data:`_ETC_FILES`), or ``root``'s top-level folders (its whole ``/etc`` included). ``nested``:
    for a sandbox started inside one that already shows them (bound from its ``/``)."""
    if root is not None:
        return root_view_args(root, source="/" if nested else None)
    argv: list[str] = []
    for d in _SYSTEM_DIRS:
        if Path(d).is_symlink():
            argv += ["--symlink", str(Path(d).readlink()), d]
        elif Path(d).is_dir():
            argv += ["--ro-bind", d, d]
    for f in _ETC_FILES:
        argv += ["--ro-bind-try", f, f]
    return argv


def layer_root(layer: RuntimeLayer | None) -> str | None:
    """The root file system a run over ``layer`` sees, or None (the host's)."""
    return layer.root if layer is not None else None


def interpreter_binds(layer: RuntimeLayer | None) -> list[str]:
    """Read-only binds of the run's interpreters: verify-cli's own (:func:`runtime_binds`) and
    the environment's (:func:`layer_binds`); over a root file system of its own, its interpreter
    is the root's and nothing of the host's is bound."""
    if layer_root(layer) is not None:
        return []
    return [*runtime_binds(), *layer_binds(layer)]


def root_candidate_exec(channel: str) -> str:
    """``VERIFY_CANDIDATE_EXEC`` over a root file system of the run's own: the runner under the
    root's python3 (or node), as in a docker image, never the host's interpreter."""
    return shlex.join(["/bin/sh", f"{SANDBOX_HARNESS}/verify_candidate_exec.sh", "--channel", channel, "--"])


def run_wrapper(*, unpack: str, results_to: str, ready: str = "", close_fds: str = "",
                started: str = "") -> str:
    """The shell that runs a command inside a run's namespaces (``sh -c WRAPPER sh ARGV...``).

    ``started`` (optional) announces, first of all, that the sandbox exists; ``unpack`` fills
    the work folder (it ends the run on failure), ``ready`` (optional) announces
    that the command starts, ``close_fds`` are redirections that keep the wrapper's own channels
    from the command. Then it kills whatever the command left running (only inside a fresh pid
    namespace, where this shell is pid 2 and ``kill -1`` spares it and init) and writes the
    results folder as a tar archive to ``results_to``; the exit status stays the command's.
    """
    return (f"{started + chr(10) if started else ''}{unpack}\n{ready}"
            f'"$@"{close_fds}\n'
            "status=$?\n"
            'if [ "$$" -le 3 ]; then kill -KILL -1 2>/dev/null; fi\n'
            f"cd {SANDBOX_RESULTS} && tar -cf - . 2>/dev/null >{results_to}\n"
            "exit $status\n")


def runtime_binds() -> list[str]:
    """Read-only binds of the interpreter's installation (its venv and base prefix).

    They must come after the tmpfs mounts: a venv under /tmp (a CI checkout, say) would
    otherwise be hidden by the sandbox's private /tmp.
    """
    argv: list[str] = []
    for prefix in python_runtime_prefixes():
        real = str(Path(prefix).resolve())
        if not any(real == d or real.startswith(d + "/") for d in _SYSTEM_DIRS):
            argv += ["--ro-bind", real, real]
            if prefix != real:
                argv += ["--symlink", real, prefix]
    return argv


def layer_binds(layer: RuntimeLayer | None) -> list[str]:
    """Read-only binds of a run's built environment (:attr:`RunSpec.layer`), each at its own
    path; after the tmpfs mounts, as :func:`runtime_binds`."""
    argv: list[str] = []
    for folder in layer.binds if layer is not None else ():
        real = str(Path(folder).resolve())
        if not any(real == d or real.startswith(d + "/") for d in _SYSTEM_DIRS):
            argv += ["--ro-bind", real, real]
    return argv


def _trusted_argv(source: Path, candidate: CandidateProcess, root: str | None = None) -> list[str]:
    """The nested bwrap the run's command runs in on a two-process run: the run's own
    namespaces and file systems, plus the test folders (bound read-only from the source; they
    were never copied into the work folder the candidate shares) and the candidate's code files
    covered, so the tests reach that code only through the channel."""
    argv = [*nested_bwrap(root), "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--die-with-parent", "--dev-bind", "/", "/"]
    for rel in candidate.hidden:
        if (source / rel).is_dir() and not (source / rel).is_symlink():
            argv += ["--ro-bind", f"{SOURCE_MOUNT}/{rel}", f"{SANDBOX_WORKDIR}/{rel}"]
    for rel in candidate.private:
        if (source / rel).is_file() and not (source / rel).is_symlink():
            argv += ["--ro-bind", "/dev/null", f"{SANDBOX_WORKDIR}/{rel}"]
    return [*argv, "--chdir", SANDBOX_WORKDIR, "--"]


def candidate_argv(candidate: CandidateProcess, *, work_source: str = SANDBOX_WORKDIR,
                   channel_source: str = SANDBOX_CHANNEL_DIR, tmp_source: str = SANDBOX_TMP,
                   held: Sequence[str] = (), layer: RuntimeLayer | None = None) -> list[str]:
    """:func:`_candidate_argv` for a process whose work folder, channel folder and ``/tmp`` are
    at ``work_source``, ``channel_source`` and ``tmp_source`` (the warm worker's run children)."""
    return _candidate_argv(candidate, work_source=work_source, channel_source=channel_source,
                           tmp_source=tmp_source, held=held, layer=layer)


def held_folders(candidate: CandidateProcess, source: Path) -> list[str]:
    """The test folders (of ``candidate.hidden``) present in the host folder ``source``."""
    return [rel for rel in candidate.hidden
            if (source / rel).is_dir() and not (source / rel).is_symlink()]


def _candidate_argv(candidate: CandidateProcess, *, work_source: str = SANDBOX_WORKDIR,
                    channel_source: str = SANDBOX_CHANNEL_DIR, tmp_source: str = SANDBOX_TMP,
                    held: Sequence[str] = (), layer: RuntimeLayer | None = None) -> list[str]:
    """The inner bwrap that starts the candidate process from inside the run's sandbox.

    Its own user, pid, IPC, network and UTS namespaces (no further user namespaces), no /proc,
    the read-only system and runtime, the work folder and /tmp shared with the tests (so the
    tests see what it writes; the test folders were never copied into it), the channel folder,
    the candidate-side harness, and a cleared environment: the seal key, the results folder and
    the harness are absent from its mount namespace and its environment. Each test folder in
    ``held`` (those the tests' side binds back) is an empty read-only tmpfs in its view: a mount
    point, which it cannot remove or rename (that would detach the tests' bind mount in their
    namespace and let it put its own tests in their place).
    """
    root = layer_root(layer)
    argv = [*nested_bwrap(root), "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--hostname", "candidate", "--clearenv"]
    argv += _system_view(root, nested=True)
    if root is None:  # over a root of its own, its /etc (the run's files over it) is bound whole
        for f in (*_ETC_FILES, "/etc/passwd", "/etc/group", "/etc/hosts"):  # the run's own files
            argv += ["--ro-bind-try", f, f]
    else:  # its /opt came with the run's harness mounted in it: covered, as the harness is absent
        argv += ["--perms", "0555", "--size", "4096", "--tmpfs", SANDBOX_HARNESS]
    argv += ["--dev", "/dev", "--bind", tmp_source, SANDBOX_TMP, "--bind", work_source, SANDBOX_WORKDIR]
    argv += ["--bind", channel_source, SANDBOX_CHANNEL_DIR,
             "--ro-bind", f"{SANDBOX_HARNESS}/candidate", SANDBOX_CANDIDATE_HARNESS,
             *interpreter_binds(layer), "--chdir", SANDBOX_WORKDIR]
    for rel in held:
        argv[-2:-2] = ["--perms", "0555", "--size", "4096", "--tmpfs", f"{SANDBOX_WORKDIR}/{rel}"]
    # after the work folder's bind, before --chdir
    argv[-2:-2] = protected_bind_args(candidate.protected, work_source, SANDBOX_WORKDIR)
    env = candidate_environment(workdir=SANDBOX_WORKDIR, tmp_dir=SANDBOX_TMP,
                                channel=f"{SANDBOX_CHANNEL_DIR}/{CHANNEL_SOCKET}",
                                candidate_harness=SANDBOX_CANDIDATE_HARNESS,
                                path=layer.search_path(DEFAULT_PATH) if layer is not None else runtime_path(),
                                extra=candidate.env)
    for name, value in sorted(env.items()):
        argv += ["--setenv", name, value]
    return [*argv, "--", *candidate.command]


def candidate_parent_argv(scratch: Path, command: Sequence[str], *, layer: RuntimeLayer | None = None) -> list[str]:
    """The sandbox of a warm candidate parent (:mod:`verify_cli.sandbox.bwrap.candidate`): a
    run's namespaces and read-only system, its own ``/proc`` (its own pid namespace), the
    candidate-side harness and runtime, empty read-only mount points for a run's work folder,
    ``/tmp`` and channel folder, and nothing else: no task files, results, harness or secret.
    Its environment is the caller's (a candidate environment), not the run's."""
    argv = _system_argv(scratch, layer_root(layer))
    argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
             "--ro-bind", str(candidate_harness_dir()), SANDBOX_CANDIDATE_HARNESS, *interpreter_binds(layer)]
    for d in (SANDBOX_TMP, SANDBOX_WORKDIR, SANDBOX_CHANNEL_DIR):
        argv += ["--dir", d]
    return [*argv, "--remount-ro", "/", "--chdir", "/", "--", *command]


@register_sandbox("bwrap")
class BwrapSandbox(LocalSandbox):
    isolation = ("bubblewrap: all namespaces unshared (no network), read-only system, private "
                 "tmpfs work and results folders, cgroup/rlimit limits, whole pid namespace "
                 "killed on timeout")
    two_process = True
    two_process_gaps = ()
    runs_over_root = True

    @classmethod
    def availability(cls) -> Availability:
        return _probe()

    def prepare(self, spec: RunSpec, scratch: Path) -> Prepared:
        results = scratch / "results"  # never created: results come back on a pipe
        disk = f"{spec.limits.file_bytes}"
        source = Path(spec.workdir).resolve()
        root = layer_root(spec.layer)
        argv = _system_argv(scratch, root)
        argv += ["--proc", "/proc", "--dev", "/dev",
                 "--size", disk, "--tmpfs", SANDBOX_TMP,
                 "--size", disk, "--perms", "0755", "--tmpfs", SANDBOX_WORKDIR,
                 "--ro-bind", str(source), SOURCE_MOUNT,
                 "--size", str(min(spec.limits.file_bytes, RESULTS_FOLDER_BYTES)),
                 "--perms", "0755", "--tmpfs", SANDBOX_RESULTS,
                 "--ro-bind", str(harness_dir()), SANDBOX_HARNESS]
        extra = dict(spec.env)
        key_stdin = key_stdin_of(spec, extra)
        copy = f'cp -R {SOURCE_MOUNT}/. {SANDBOX_WORKDIR}/ || exit\n'
        command = list(spec.command)
        # Each stage writes its marker on the results pipe once it runs (local.Prepared
        # .start_markers): the wrapper inside this bwrap, then (two-process) the tests' nested
        # sandbox once its own namespaces exist. A missing one is a sandbox that never started.
        markers = OUTER_STARTED
        stages: tuple[str, ...] = ("the run's sandbox (bwrap)",)
        close_fds = CLOSE_RESULTS_FD
        if spec.candidate is not None:
            # The candidate's work folder is the run's, without the test folders; it starts
            # first, in a sandbox of its own; the command runs in a nested one (_trusted_argv).
            argv += ["--perms", "0755", "--tmpfs", SANDBOX_CHANNEL_DIR]
            channel = f"{SANDBOX_CHANNEL_DIR}/{CHANNEL_SOCKET}"
            extra.update(VERIFY_CHANNEL=channel, VERIFY_CANDIDATE_EXEC=candidate_exec_prefix(
                sys.executable, SANDBOX_HARNESS, channel) if root is None else root_candidate_exec(channel))
            if root is not None:  # the nested sandboxes start from the host's bwrap, bound in
                argv += host_bwrap_bundle()[0]
            # The trusted side's home: a tmpfs the candidate's sandbox never binds.
            argv += ["--perms", "0700", "--size", str(1 << 20), "--tmpfs", TRUSTED_HOME]
            extra.update(trusted_home_variables(spec.env))
            skip = "|".join(shlex.quote(h) for h in spec.candidate.hidden) or "''"
            copy = (f'cd {SOURCE_MOUNT} || exit\n'
                    'for f in * .[!.]* ..?*; do\n'
                    f'  case "$f" in {skip}) continue;; esac\n'
                    f'  if [ -e "$f" ] || [ -L "$f" ]; then cp -R "$f" {SANDBOX_WORKDIR}/ || exit; fi\n'
                    'done\n'
                    f'cd {SANDBOX_WORKDIR} || exit\n'
                    + shlex.join(_candidate_argv(spec.candidate, held=held_folders(spec.candidate, source),
                                                layer=spec.layer))
                    + f"{CLOSE_SEAL_FD}{CLOSE_RESULTS_FD} &\n")
            command = [*_trusted_argv(source, spec.candidate, root),
                       *no_links_prefix(SANDBOX_HARNESS, (SANDBOX_WORKDIR, SANDBOX_TMP)),
                       *inner_started_prefix(TESTS_STARTED), *command]
            markers += TESTS_STARTED
            stages += ("the tests' nested sandbox (bwrap, no-links namespace)",)
            close_fds = ""  # the nested sandbox's marker shell closes it for the command
        argv += [*interpreter_binds(spec.layer), "--chdir", SANDBOX_WORKDIR, "--"]
        env = pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                                 harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP,
                                 path=run_path(spec), extra=extra)
        read_end, write_end = os.pipe()  # the child holds the write end as RESULTS_FD only
        if key_stdin is not None:
            copy = f"{MOVE_SEAL_FD}\n{copy}"
        script = run_wrapper(unpack=copy.rstrip("\n"), results_to=f"/proc/self/fd/{RESULTS_FD}",
                             close_fds=close_fds,
                             started=f"printf {OUTER_STARTED.decode()} >&{RESULTS_FD} || exit 125")
        argv += ["/bin/sh", "-c", script, "sh", *command]
        return Prepared(argv=argv, env=env, cwd="/", results_dir=results, signal_from_status=True,
                        results_pipe=(read_end, write_end), key_stdin=key_stdin,
                        results_archive_limit=2 * RESULTS_FOLDER_BYTES + 1024 * 1024,
                        start_markers=markers, start_stages=stages)

    def warm_unavailable(self) -> str | None:
        from verify_cli.sandbox.bwrap.warm import bwrap_warm_unavailable  # imports this module

        return bwrap_warm_unavailable()

    def warm_host(self, *, workers_per_key: int = 2) -> WarmHost | None:
        """A pool of warm workers in this sandbox (:mod:`verify_cli.sandbox.bwrap.warm`)."""
        from verify_cli.sandbox.bwrap.warm import WarmPool  # imports this module

        if self.warm_unavailable() is not None:
            return None
        return WarmPool(self, workers_per_key=workers_per_key, max_workers=4 * workers_per_key)

    def sessions_unavailable(self) -> str | None:
        avail = _probe()
        return None if avail.available else avail.reason

    def open_session(self, workspace: Workspace = None, limits: SessionLimits | None = None, *,
                     env: Mapping[str, str] | None = None, image: str | None = None,
                     labels: Mapping[str, str] | None = None, layer: RuntimeLayer | None = None) -> Session:
        """A session in fresh namespaces forked by this sandbox's session parent
        (:mod:`verify_cli.sandbox.sessions.bwrap`); ``image`` and ``labels`` are ignored."""
        from verify_cli.sandbox.sessions.base import SessionLimits as _Limits
        from verify_cli.sandbox.sessions.bwrap import BwrapSessions

        with _SESSIONS_LOCK:
            hosts = self.__dict__.get("_sessions")
            if hosts is None:
                hosts = self.__dict__["_sessions"] = BwrapSessions()
        return hosts.open(workspace, limits or _Limits(), env, layer)

    def close(self) -> None:
        hosts = self.__dict__.pop("_sessions", None)
        if hosts is not None:
            hosts.close()

    def long_lived(self, command: Sequence[str], *, scratch: Path, env: Mapping[str, str],
                   ro_binds: Sequence[tuple[Path, str]] = (), dirs: Sequence[str] = (),
                   root: str | None = None) -> Prepared:
        """How to start a long-lived process (the warm grading worker) in this sandbox.

        The same namespaces and read-only system as a run, the harness, ``ro_binds`` (host folder,
        sandbox path) and empty ``dirs`` (mount points for the process's own children); every
        file system it sees is read-only, so nothing it or its children write outlives them.
        ``env`` is applied over the pinned environment of a run. Over a root file system of its
        own (``root``: :attr:`RuntimeLayer.root`), its system is that root's, with the host's bwrap
        bound in for the sandboxes it nests (:mod:`.rootfs`), and none of the host's interpreter.
        """
        argv = _system_argv(scratch, root)
        argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
                 "--ro-bind", str(harness_dir()), SANDBOX_HARNESS,
                 *(runtime_binds() if root is None else host_bwrap_bundle()[0])]
        for host, inside in ro_binds:
            argv += ["--ro-bind", str(Path(host).resolve()), inside]
        for d in (SANDBOX_TMP, SANDBOX_WORKDIR, SANDBOX_RESULTS, *dirs):
            argv += ["--dir", d]
        argv += ["--remount-ro", "/", "--chdir", "/", "--", *command]
        full_env = pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                                      harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP,
                                      path=runtime_path() if root is None else DEFAULT_PATH, extra=env)
        return Prepared(argv=argv, env=full_env, cwd="/", results_dir=scratch / "results",
                        signal_from_status=True)


__all__ = ["RUN_NAMESPACES", "BwrapSandbox", "layer_binds", "run_wrapper", "runtime_binds"]
