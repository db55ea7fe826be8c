"""The files verify-cli ships into sandboxes, grouped in the source tree by the role they play:

- ``plugins/``: trusted code loaded into the tests' own process: the pytest plugins
  (``verify_harness``: the seal and the collection guard; ``verify_shuffle``), node's preloads
  and reporter (``verify_node_guard.js``, ``verify_node_seal.js``, ``verify_node_standin.js``) and
  the two-process stand-in (``verify_standin*.py``: the module the tests import in place of the
  candidate's, which forwards every use across the channel);
- ``runners/``: the built-in runners a task's command names (``python -m verify_calls``,
  ``python -m verify_stdio``) and what they share (``verify_runner_common``);
- ``warm/``: the warm workers: ``warm_worker`` (a bwrap warm pool's worker, which forks one run
  per job), ``docker_warm`` and ``docker_node_warm`` (docker's warm containers) and
  ``docker_node_candidate`` (a warm node's candidate parent);
- ``exec/``: launch and exec shims: ``verify_launch.py`` (runs a harness module with the harness
  folder, never the work folder, first on ``sys.path``), ``verify_candidate_exec.{py,sh,js}`` (the
  tests' side runs a program in the candidate's sandbox through the channel);
- ``candidate/``: the candidate side of two-process grading (its server, the wire codec and peer,
  the warm candidate parent and session parent), which never sees the tests or the results.

At run time the harness is one flat folder (``/opt/verify-harness`` in an isolating sandbox,
``$VERIFY_HARNESS_DIR`` everywhere), as it was before the grouping: task commands and sandbox
command lines name its modules by bare name (``python -m verify_calls``, ``verify_launch.py
MODULE``, ``$VERIFY_HARNESS_DIR/verify_node_seal.js``), and the modules import each other from
that one folder. :func:`runtime_files` is the mapping from run-time name to source file;
:func:`build_runtime_folder` copies the sources into such a folder (the candidate side stays its
subfolder ``candidate/``, as the candidate's sandbox mounts it on its own). The host side builds
one per process (:func:`verify_cli.sandbox.environment.harness_dir`). Nothing under this package
imports verify-cli: it runs inside sandboxes.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

#: The source folder, and its role folders with what each holds (docs/architecture.md lists them).
SOURCE_DIR = Path(__file__).resolve().parent
ROLES: dict[str, str] = {
    "plugins": "trusted code loaded into the tests' own process (pytest plugins, node preloads, the stand-in)",
    "runners": "the built-in runners a task's command names, and what they share",
    "warm": "warm workers (bwrap's pool worker, docker's warm containers)",
    "exec": "launch and exec shims (verify_launch.py, verify_candidate_exec.*)",
    "candidate": "the candidate side of two-process grading (kept as the subfolder candidate/)",
}
#: Role folders copied flat into the run-time folder; the others keep their own subfolder.
FLAT_ROLES = ("plugins", "runners", "warm", "exec")
#: The kinds of file the harness ships.
SHIPPED_SUFFIXES = (".py", ".js", ".mjs", ".sh")


def _shipped(path: Path) -> bool:
    return path.is_file() and path.suffix in SHIPPED_SUFFIXES and path.name != "__init__.py"


def runtime_files(source: Path = SOURCE_DIR) -> dict[str, Path]:
    """Each flat run-time name (``verify_calls.py``) and the source file it is copied from. Two
    role folders holding the same name would make the run-time folder ambiguous: refused."""
    out: dict[str, Path] = {}
    for role in FLAT_ROLES:
        for path in sorted((source / role).iterdir()):
            if not _shipped(path):
                continue
            if path.name in out:
                raise RuntimeError(f"harness file {path.name} is in both {out[path.name].parent.name}/ and {role}/")
            out[path.name] = path
    return out


def _copy(path: Path, dest: Path) -> None:
    """Copy one file, its modification time (which its byte-compiled copy records) and, for a
    module with an up-to-date byte-compiled copy beside its source, that copy too: a sandboxed run
    sees the folder read-only, and compiling every harness module again in each process would
    cost more than building the folder."""
    shutil.copy2(path, dest)
    os.chmod(dest, 0o644)
    if path.suffix == ".py":
        compiled = Path(importlib.util.cache_from_source(str(path)))
        if compiled.is_file():
            target = Path(importlib.util.cache_from_source(str(dest)))
            target.parent.mkdir(mode=0o755, exist_ok=True)
            shutil.copyfile(compiled, target)
            os.chmod(target, 0o644)


def build_runtime_folder(dest: Path, source: Path = SOURCE_DIR) -> None:
    """Copy the harness into ``dest`` (which exists and is empty) in its run-time layout: the flat
    roles' files side by side, ``candidate/`` (and ``candidate/node/``) as subfolders. Folders
    0755, files 0644: a sandbox's user may differ from the host's."""
    for name, path in runtime_files(source).items():
        _copy(path, dest / name)
    for folder, _subdirs, files in os.walk(source / "candidate"):
        rel = Path(folder).relative_to(source)
        if "__pycache__" in rel.parts:
            continue
        (dest / rel).mkdir(mode=0o755, exist_ok=True)
        for name in sorted(files):
            if Path(name).suffix in SHIPPED_SUFFIXES:
                _copy(Path(folder) / name, dest / rel / name)
    os.chmod(dest, 0o755)
