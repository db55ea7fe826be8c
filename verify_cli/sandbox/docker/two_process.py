"""Two-process runs in the docker backend's node mode (a RunSpec with ``candidate``).

A node run is one bubblewrap sandbox inside a long-lived container (:mod:`.nodes`). A
two-process run lays its outer sandbox out as the bwrap backend's does, with what the container
allows: the root there is the image, read-only, so no new top-level folder can be made and every
folder of the run lives on one of the run's own tmpfs mounts.

- The work folder's tar is unpacked into ``/workspace/.verify-shared``; the test folders
  (``CandidateProcess.hidden``) are then moved to ``/workspace/.verify-held`` (a rename: nothing
  is copied). The channel folder is ``/tmp/.verify-channel``.
- The candidate starts first, in the background, in a nested bubblewrap of its own (its own
  user, pid, mount, network, IPC and UTS namespaces; no further user namespaces; a new session)
  whose root is a fresh tmpfs holding: the image's top-level folders read-only (listed inside
  the run, since the image is only known there) except ``/proc``, ``/sys``, ``/dev``, ``/tmp``,
  ``/workspace``, ``/results`` and ``/opt/verify-harness``; a fresh ``/dev``; ``/tmp`` shared
  with the tests; ``.verify-shared`` as ``/workspace``; the channel folder at
  ``/.verify-channel``; the candidate-side harness read-only at ``/opt/verify-candidate``; and a
  cleared environment. The tests, hidden tests, results folder, harness, ``/proc`` and the seal
  key are absent from its view, as on the bwrap backend; where the test folders were, it sees
  empty read-only mount points, which it cannot remove (see :func:`candidate_start`).
- The run's command runs in a nested bubblewrap (a user namespace of its own) that sees the
  outer run's file systems with ``.verify-shared`` as ``/workspace``, the test folders bound
  read-only back in place, and the candidate's code files covered by ``/dev/null``.

The wrapper's end (``kill -KILL -1`` in the outer pid namespace) takes the candidate down with
the run, as on the bwrap backend.

A warm node (:mod:`.warm_nodes`) lays a two-process run out the same way from
:func:`warm_candidate` (``harness/warm/docker_node_warm.py``): the same folders, the same candidate
command line, and the tests' view (test folders bound back read-only, code files covered) made
in a mount namespace of the tests' side only, before the candidate starts; pytest there runs
forked from the node's warm parent instead of in a nested bubblewrap.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from verify_cli.sandbox.base import RESULTS_ENV, CandidateProcess, RunSpec, protected_bind_args
from verify_cli.sandbox.bwrap.candidate import PYTHON_SERVER_COMMAND
from verify_cli.sandbox.bwrap.sandbox import SANDBOX_UID
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
)
from verify_cli.sandbox.plumbing.levers import lever_on
from verify_cli.sandbox.plumbing.trusted_launch import CLOSE_SEAL_FD, no_links_prefix

#: The shared work folder and the test folders' stash, on the outer run's /workspace tmpfs.
SHARED_WORK = f"{SANDBOX_WORKDIR}/.verify-shared"
HELD_TESTS = f"{SANDBOX_WORKDIR}/.verify-held"
#: The channel folder, on the outer run's /tmp (which both sides share anyway).
CHANNEL_HOLD = f"{SANDBOX_TMP}/.verify-channel"
TRUSTED_CHANNEL = f"{CHANNEL_HOLD}/{CHANNEL_SOCKET}"
#: ``VERIFY_CANDIDATE_EXEC``: the harness's launcher runs the exec client under the image's
#: python3, or under node in an image without Python (verify-cli/node:20).
CANDIDATE_EXEC = shlex.join(["/bin/sh", f"{SANDBOX_HARNESS}/verify_candidate_exec.sh",
                             "--channel", TRUSTED_CHANNEL, "--"])
#: Processes the two nested bubblewraps add to a run (the candidate's: bwrap, its pid 1; the
#: tests': bwrap), on top of the run's own limit; and a warm node's candidate parent's own
#: (its bubblewrap, that one's pid 1, the parent).
NESTED_PIDS = 4 + 3

#: Top-level paths of the container the candidate never sees (besides dot-entries, which the
#: shell's ``/*`` never lists).
#: The trusted side's private home (and a checker's temporary folder) in a node's run: a 0700
#: tmpfs on the image's empty ``/srv`` in the outer run's namespace (an image's root is read-only,
#: so a new mount point like bwrap's ``/.verify-home`` cannot be made), never bound into the
#: candidate's sandbox.
TRUSTED_HOME_DIR = "/srv"
NOT_FOR_THE_CANDIDATE = ("/proc", "/sys", "/dev", SANDBOX_TMP, SANDBOX_WORKDIR, SANDBOX_RESULTS,
                          "/opt", SANDBOX_HARNESS, SANDBOX_CANDIDATE_HARNESS, TRUSTED_HOME_DIR)


@dataclass(frozen=True)
class TwoProcessJob:
    """What a two-process run changes in a node job: shell lines before and after the work
    folder's unpacking, where it is unpacked, the command's prefix and its extra variables."""

    before_unpack: str
    unpack_into: str
    after_unpack: str
    command_prefix: list[str]
    env: dict[str, str]


#: The file the tests' nested sandbox writes into the results folder once it has started.
TESTS_STARTED_FILE = ".verify-tests-started"


def two_process_job(spec: RunSpec) -> TwoProcessJob:
    assert spec.candidate is not None
    candidate = spec.candidate
    moves = "".join(
        f'if [ -e {SHARED_WORK}/{q} ] || [ -L {SHARED_WORK}/{q} ]; then '
        f'mv {SHARED_WORK}/{q} {HELD_TESTS}/ || exit 125; fi\n'
        for q in map(shlex.quote, candidate.hidden))
    return TwoProcessJob(
        before_unpack=(f"mkdir -p {SHARED_WORK} {HELD_TESTS} {CHANNEL_HOLD} && "
                       f"chmod 0700 {HELD_TESTS} {CHANNEL_HOLD} || exit 125\n"),
        unpack_into=SHARED_WORK,
        after_unpack=moves + candidate_start(candidate, held=held_folders(spec)),
        command_prefix=trusted_argv(spec),
        env=two_process_env(spec.env))


def held_folders(spec: RunSpec) -> list[str]:
    """The test folders (of ``CandidateProcess.hidden``) this run has."""
    assert spec.candidate is not None
    return [rel for rel in spec.candidate.hidden
            if (spec.workdir / rel).is_dir() and not (spec.workdir / rel).is_symlink()]


def trusted_argv(spec: RunSpec) -> list[str]:
    """The nested bubblewrap the run's command runs in (see the module's docstring)."""
    assert spec.candidate is not None
    argv = ["bwrap", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--die-with-parent", "--dev-bind", "/", "/", "--bind", SHARED_WORK, SANDBOX_WORKDIR]
    for rel in held_folders(spec):
        argv += ["--ro-bind", f"{HELD_TESTS}/{rel}", f"{SANDBOX_WORKDIR}/{rel}"]
    for rel in covered_files(spec):
        argv += ["--ro-bind", "/dev/null", f"{SANDBOX_WORKDIR}/{rel}"]
    # No link the candidate planted in the shared folders is followed in the tests' view. Once
    # inside (its namespaces and the no-links one made), it marks the start in the results
    # folder, which only the tests' side sees: a run without the mark never started its tests.
    return [*argv, "--chdir", SANDBOX_WORKDIR, "--", *no_links_prefix(SANDBOX_HARNESS, (SANDBOX_WORKDIR, SANDBOX_TMP)),
            "/bin/sh", "-c", f': > "${RESULTS_ENV}/{TESTS_STARTED_FILE}" && exec "$@"', "sh"]


def covered_files(spec: RunSpec) -> list[str]:
    """The candidate's code files (``CandidateProcess.private``) that the tests' side sees
    covered by ``/dev/null``: those that are regular files (not links) in the work folder."""
    assert spec.candidate is not None
    source = spec.workdir
    return [rel for rel in spec.candidate.private
            if (source / rel).is_file() and not (source / rel).is_symlink()]


def candidate_argv_parts(candidate: CandidateProcess, *, held: list[str]) -> tuple[list[str], list[str]]:
    """The candidate's nested bubblewrap command line around the image's top-level folders
    (which only the run can list): ``head`` (namespaces, cleared
    environment) and ``tail`` (its ``/dev``, ``/tmp``, work and channel folders, the
    candidate-side harness, the held test folders as empty read-only mount points, its
    environment, then ``--`` and the candidate's command)."""
    head = ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--hostname", "candidate", "--clearenv"]
    tail = ["--dev", "/dev", "--bind", SANDBOX_TMP, SANDBOX_TMP, "--bind", SHARED_WORK, SANDBOX_WORKDIR,
            "--bind", CHANNEL_HOLD, SANDBOX_CHANNEL_DIR,
            "--ro-bind", f"{SANDBOX_HARNESS}/candidate", SANDBOX_CANDIDATE_HARNESS,
            "--chdir", SANDBOX_WORKDIR]
    for rel in held:
        tail[-2:-2] = ["--perms", "0555", "--size", "4096", "--tmpfs", f"{SANDBOX_WORKDIR}/{rel}"]
    # after the work folder's bind, before --chdir
    tail[-2:-2] = protected_bind_args(candidate.protected, SHARED_WORK, SANDBOX_WORKDIR)
    for name, value in sorted(_candidate_env(candidate).items()):
        tail += ["--setenv", name, value]
    return head, [*tail, "--", *candidate.command]


def _candidate_env(candidate: CandidateProcess) -> dict[str, str]:
    """The candidate's whole environment (its bubblewrap clears the rest)."""
    return candidate_environment(workdir=SANDBOX_WORKDIR, tmp_dir=SANDBOX_TMP,
                                 channel=f"{SANDBOX_CHANNEL_DIR}/{CHANNEL_SOCKET}",
                                 candidate_harness=SANDBOX_CANDIDATE_HARNESS, path=DEFAULT_PATH,
                                 extra=candidate.env)


#: What the candidate parent runs (``--control-fd N`` is added by the node).
_PARENT_COMMAND = ["/bin/sh", "-c", f'exec python "{SANDBOX_CANDIDATE_HARNESS}/verify_candidate_parent.py" "$@"', "sh"]


def warm_parent(candidate: CandidateProcess) -> dict[str, object] | None:
    """The command line (around the image's folders, which the node lists) and environment of
    a warm node's candidate parent for ``candidate`` (``harness/warm/docker_node_candidate.py``),
    or None where its candidate starts cold (not the Python server; the lever
    ``docker-warm-candidate`` off). Its sandbox is the cold candidate's, minus any run: the
    same namespaces (user namespaces still allowed: it forks each run's child into new ones,
    which forbid further ones), the image read-only, the candidate-side harness, its own
    ``/proc``, empty mount points for a run's folders, and the candidate's environment."""
    if tuple(candidate.command) != PYTHON_SERVER_COMMAND or not lever_on("docker-warm-candidate"):
        return None
    env = _candidate_env(candidate)
    head = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "candidate", "--clearenv"]
    tail = ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",
            "--ro-bind", f"{SANDBOX_HARNESS}/candidate", SANDBOX_CANDIDATE_HARNESS]
    for folder in (SANDBOX_TMP, SANDBOX_WORKDIR, SANDBOX_CHANNEL_DIR):
        tail += ["--dir", folder]
    for name, value in sorted(env.items()):
        tail += ["--setenv", name, value]
    tail += ["--remount-ro", "/", "--chdir", "/", "--", *_PARENT_COMMAND]
    return {"head": head, "tail": tail, "env": env}


def candidate_start(candidate: CandidateProcess, *, held: list[str]) -> str:
    """Shell lines (in the outer run's wrapper) that start the candidate's nested bubblewrap in
    the background. The image's top-level folders are listed there; ``set --`` builds the
    argument list in a subshell, so the wrapper's own ``$@`` (the run's command) is untouched.

    Each test folder in ``held`` is an empty read-only tmpfs in the candidate's view: a mount
    point there, so the candidate cannot remove or rename the folder (the kernel would detach
    the tests' bind mount on it in the other namespace, and the candidate could put its own
    tests in their place)."""
    head, tail = candidate_argv_parts(candidate, held=held)
    skip = "|".join(NOT_FOR_THE_CANDIDATE)
    return ("(set --\n"
            "for d in /* /opt/*; do\n"
            f'  case "$d" in {skip}) continue;; esac\n'
            '  if [ -L "$d" ]; then set -- "$@" --symlink "$(readlink "$d")" "$d"\n'
            '  elif [ -e "$d" ]; then set -- "$@" --ro-bind "$d" "$d"; fi\n'
            "done\n"
            f'exec {shlex.join(head)} "$@" {shlex.join(tail)}\n'
            f") </dev/null 3>&-{CLOSE_SEAL_FD} &\n")


def warm_candidate(spec: RunSpec) -> dict[str, object]:
    """What a warm node's run (``harness/warm/docker_node_warm.py``) needs to lay a two-process run
    out as :func:`two_process_job` does and to start the candidate as :func:`candidate_start`
    does (the same command line; the node lists the image's folders as the shell does)."""
    assert spec.candidate is not None
    held = held_folders(spec)
    head, tail = candidate_argv_parts(spec.candidate, held=held)
    return {"shared": SHARED_WORK, "held_dir": HELD_TESTS, "channel": CHANNEL_HOLD,
            "hidden": list(spec.candidate.hidden), "held": held, "covered": covered_files(spec),
            "head": head, "tail": tail, "skip": list(NOT_FOR_THE_CANDIDATE),
            "protected": list(spec.candidate.protected), "parent": warm_parent(spec.candidate)}


def two_process_env(task_env: Mapping[str, str]) -> dict[str, str]:
    """The variables a two-process run's command gets on top of the run's own (``task_env``):
    the channel, the exec client, and ``HOME`` the trusted side's private folder (unless the
    task names one), as on bwrap (trusted_launch.trusted_home_variables)."""
    env = {"VERIFY_CHANNEL": TRUSTED_CHANNEL, "VERIFY_CANDIDATE_EXEC": CANDIDATE_EXEC}
    if "HOME" not in task_env:
        env.update(HOME=TRUSTED_HOME_DIR, VERIFY_TRUSTED_HOME=TRUSTED_HOME_DIR)
    return env


__all__ = [
    "NESTED_PIDS",
    "NOT_FOR_THE_CANDIDATE",
    "TESTS_STARTED_FILE",
    "TRUSTED_HOME_DIR",
    "TwoProcessJob",
    "candidate_argv_parts",
    "candidate_start",
    "covered_files",
    "trusted_argv",
    "two_process_env",
    "two_process_job",
    "warm_candidate",
    "warm_parent",
]
