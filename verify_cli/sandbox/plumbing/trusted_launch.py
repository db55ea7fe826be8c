"""The one launcher of every trusted process (DESIGN.md, "Trust": one launcher starts them all).

A trusted process is any process on the tests' side of a run: the test process, the built-in
runners (``calls``, ``stdio``), a task's checker program, the candidate-exec client, node
reporters and sealers, warm workers and their forked children. The rule they share:

- Python starts isolated: a harness module through the harness's launcher script
  (``python -s harness/verify_launch.py MODULE``: the harness folder first on ``sys.path``,
  never the working folder, no user site, only the sandbox's pinned ``PYTHON*`` variables), a
  harness script that needs none of them ``python -I``;
- ``HOME`` is a folder the candidate cannot see (:data:`TRUSTED_HOME`, a private folder of the
  trusted side on bwrap), and so is ``TMPDIR`` for processes that share no files with the
  candidate (a checker); the test process keeps the shared ``/tmp`` (CLI tests hand files
  through it);
- nothing is imported, executed or opened by path from a place the candidate can write: what
  the trusted side reads of the candidate's output comes through pipes or memfds;
- no symbolic link is followed, in the tests' view, on the folders the tests share with the
  candidate (the work folder, ``/tmp``): they are mounts marked nosymfollow there
  (:func:`no_links_prefix` before a cold run's command, the warm workers' own remount), so a
  link the candidate planted as its "output" cannot make the tests read their own golden file
  or a hidden test as the candidate's answer;
- the seal key reaches its reader (the test process, a runner, node's seal reporter) only by an
  inherited descriptor: a pipe holding the key, named by ``$VERIFY_SEAL_FD``, read once and
  closed by the reader, which then makes itself not dumpable. ``VERIFY_SEAL_KEY`` in a
  :class:`RunSpec`'s ``env`` is an order to the backend (:func:`take_seal_key`), never a
  variable of any process: the local backends hand the pipe as the run's stdin, which the
  wrapper inside moves to descriptor :data:`SEAL_FD` (:func:`seal_key_pipe`,
  :data:`MOVE_SEAL_FD`), the docker scripts give a here-document on it
  (:func:`seal_key_heredoc`), the warm workers make the pipe in the forked run from the job
  message (never an environment). The candidate's start closes it (:data:`CLOSE_SEAL_FD`).

This module holds the rule as data and small builders; the kinds (:mod:`verify_cli.kinds`) and
the backends call them, and tests/grading/test_trusted_processes.py holds every trusted process
of a run against it.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, MutableMapping

#: The interpreter flags of a trusted Python process that needs nothing of the run's ``PYTHON*``
#: variables and nothing but the standard library (the candidate-exec client): ``-I`` (isolated)
#: and ``-S`` (no ``site``: no site-packages to scan, no ``.pth`` files to run, about 15 ms less
#: of every program a CLI test starts).
PYTHON_FLAGS: tuple[str, ...] = ("-I", "-S")
#: The flags of a harness module started through the launcher script (a built-in runner): ``-s``
#: (no user site); the script's own folder, the read-only harness, is ``sys.path[0]`` (a script,
#: unlike ``-m``, never puts the working folder there). Not ``-I``: that would drop the run's
#: ``PYTHONHASHSEED`` too, and the runner must iterate sets as a cold run with that seed does.
#: The run's ``PYTHON*`` variables are the sandbox's pinned ones, never the candidate's.
MODULE_FLAGS: tuple[str, ...] = ("-s",)
#: The harness's launcher script (``python -I verify_launch.py MODULE ARGS``).
LAUNCH_SCRIPT = "verify_launch.py"
#: The trusted side's private home and temporary folder inside an isolating sandbox (a tmpfs
#: of the trusted side's mount namespace, never bound into the candidate's).
TRUSTED_HOME = "/.verify-home"
#: Names the trusted side's home to the harness (the candidate-exec client gives a program the
#: candidate's home in its place).
TRUSTED_HOME_ENV = "VERIFY_TRUSTED_HOME"


#: How the grader hands a run's seal key to the backend, in ``RunSpec.env`` (the backend takes it
#: out: no process is ever started with it in its environment).
SEAL_KEY_ENV = "VERIFY_SEAL_KEY"
#: The descriptor number (decimal) of the pipe that holds the key, in the key reader's
#: environment (the number is no secret; the pipe is empty once its reader has read it).
SEAL_FD_ENV = "VERIFY_SEAL_FD"
#: The descriptor the docker backend's scripts put the key on (a here-document: a pipe in dash).
SEAL_FD = 9


def take_seal_key(env: MutableMapping[str, str]) -> str | None:
    """The seal key ordered in ``env`` (taken out of it), or None."""
    return env.pop(SEAL_KEY_ENV, None) or None


def seal_key_pipe(env: MutableMapping[str, str]) -> int | None:
    """Take the key out of ``env`` into a pipe: the read end, for the run's wrapper as its stdin
    (the caller closes its copy once the run started; the wrapper moves it to :data:`SEAL_FD`
    with :data:`MOVE_SEAL_FD`), named in ``env`` by :data:`SEAL_FD_ENV`. None (and ``env``
    untouched) without a key."""
    key = take_seal_key(env)
    if key is None:
        return None
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, key.encode())
    finally:
        os.close(write_end)
    env[SEAL_FD_ENV] = str(SEAL_FD)
    return read_end


def seal_key_heredoc(env: MutableMapping[str, str]) -> str:
    """Take the key out of ``env``; the shell redirection (a here-document on :data:`SEAL_FD`,
    to follow a command on its line; the lines after it are the document) that gives the
    command the key, ``env`` naming the descriptor. ``""`` without a key."""
    key = take_seal_key(env)
    if key is None:
        return ""
    if not re.fullmatch(r"[0-9A-Za-z]+", key):
        raise ValueError("a seal key is letters and digits")
    env[SEAL_FD_ENV] = str(SEAL_FD)
    return f" {SEAL_FD}<<'VERIFY_SEAL_END'\n{key}\nVERIFY_SEAL_END\n"


#: The wrapper's first line where the key came as its stdin: the key's pipe on :data:`SEAL_FD`,
#: the command's stdin ``/dev/null`` as ever.
MOVE_SEAL_FD = f"exec {SEAL_FD}<&0 </dev/null"
#: The redirection that keeps the key's descriptor from a command (the candidate's start: it
#: never holds the pipe, even empty).
CLOSE_SEAL_FD = f" {SEAL_FD}<&-"


def python_module_command(python: str, module: str, harness_dir_var: str = "$VERIFY_HARNESS_DIR") -> str:
    """The shell command that runs harness module ``module`` as a trusted process (``python -s
    HARNESS/verify_launch.py MODULE``), the harness folder given by a variable."""
    return f'{shlex.quote(python)} {" ".join(MODULE_FLAGS)} "{harness_dir_var}/{LAUNCH_SCRIPT}" {shlex.quote(module)}'


def python_script_argv(python: str, script: str, *args: str) -> list[str]:
    """The argv that runs a harness script (one that puts what it needs on ``sys.path`` by its
    own absolute path) as a trusted process."""
    return [python, *PYTHON_FLAGS, script, *args]


#: How the node kind names the harness's preloads in ``NODE_OPTIONS`` (a bare name, found through
#: ``NODE_PATH``); :func:`absolute_harness_requires` turns them into absolute paths.
HARNESS_NODE_REQUIRE = re.compile(r"--require[= ](verify_node_[a-z_]+)(?=\s|$)")


def absolute_harness_requires(node_options: str, harness_dir: str) -> str:
    """``node_options`` with each harness preload named by its absolute path: a bare name is
    looked up in ``node_modules`` folders from the working folder up (the shared work folder)
    before ``NODE_PATH``, so a candidate could put its own file there in the harness's place."""
    return HARNESS_NODE_REQUIRE.sub(lambda m: f"--require {harness_dir}/{m.group(1)}.js", node_options)


def trusted_home_variables(env: Mapping[str, str]) -> dict[str, str]:
    """What a two-process run's trusted side gets on top of the run's variables: ``HOME`` the
    trusted side's folder (unless the task's own variables name one)."""
    if "HOME" in env:
        return {}
    return {"HOME": TRUSTED_HOME, TRUSTED_HOME_ENV: TRUSTED_HOME}


#: The shim that starts a cold two-process run's command with no symbolic link followed on the
#: folders it shares with the candidate (harness/exec/verify_no_links.sh).
NO_LINKS_SCRIPT = "verify_no_links.sh"


def no_links_prefix(harness_dir: str, folders: tuple[str, ...]) -> list[str]:
    """The command prefix (in the tests' own sandbox, before their command) that marks each of
    ``folders`` nosymfollow in a user and mount namespace of the tests' own, drops that
    namespace's capabilities and runs the command (harness/exec/verify_no_links.sh)."""
    return ["/bin/sh", f"{harness_dir}/{NO_LINKS_SCRIPT}", *folders, "--"]


__all__ = ["CLOSE_SEAL_FD", "HARNESS_NODE_REQUIRE", "LAUNCH_SCRIPT", "MODULE_FLAGS", "MOVE_SEAL_FD",
           "NO_LINKS_SCRIPT", "PYTHON_FLAGS", "SEAL_FD", "SEAL_FD_ENV", "SEAL_KEY_ENV", "TRUSTED_HOME",
           "TRUSTED_HOME_ENV", "absolute_harness_requires", "no_links_prefix", "python_module_command",
           "python_script_argv", "seal_key_heredoc", "seal_key_pipe", "take_seal_key", "trusted_home_variables"]
