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
  the trusted side reads of the candidate's output comes through pipes or memfds.

This module holds the rule as data and small builders; the kinds (:mod:`verify_cli.kinds`) and
the backends call them, and tests/grading/test_trusted_processes.py holds every trusted process
of a run against it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

#: The interpreter flag of a trusted Python process that needs nothing of the run's ``PYTHON*``
#: variables (the candidate-exec client).
PYTHON_FLAGS: tuple[str, ...] = ("-I",)
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


__all__ = ["HARNESS_NODE_REQUIRE", "LAUNCH_SCRIPT", "MODULE_FLAGS", "PYTHON_FLAGS", "TRUSTED_HOME", "TRUSTED_HOME_ENV",
           "absolute_harness_requires", "python_module_command", "python_script_argv",
           "trusted_home_variables"]
