"""Frameworks installed beside the venv, for the adapter tests that drive the real library.

verl and verifiers pin versions of libraries this project's venv holds at other versions
(transformers, openai, mcp), so ``scripts/setup.sh`` installs each with ``--no-deps``, with the few
libraries its code paths need (``scripts/extras/NAME.txt``), into ``$VENV/verify-extras/NAME``
(``VERIFY_EXTRAS_DIR`` overrides the parent folder). The tests run the framework in a child
process whose ``PYTHONPATH`` names that folder, so the rest of the suite never imports it.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT

EXTRAS_LISTS = REPO_ROOT / "scripts" / "extras"


def extras_dir(name: str) -> Path:
    parent = os.environ.get("VERIFY_EXTRAS_DIR") or str(Path(sys.prefix) / "verify-extras")
    return Path(parent) / name


def pinned(name: str) -> dict[str, str]:
    """The distributions ``scripts/extras/NAME.txt`` pins, by normalised name."""
    pins = {}
    for line in (EXTRAS_LISTS / f"{name}.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            dist, _, version = line.partition("==")
            pins[dist.strip().lower().replace("_", "-")] = version.strip()
    return pins


def require(name: str) -> Path:
    """The folder of framework ``name``: skipped with the reason where setup.sh has not made it,
    a failure under CI (whose set-up stage makes it). A pinned library the venv has too (the venv
    gained it since the list was written) is a warning: the child uses the folder's copy."""
    folder = extras_dir(name)
    if not (folder / ".installed").is_file():
        why = (f"{name} is not installed beside the venv ({folder}): run 'bash scripts/setup.sh', which "
               f"installs scripts/extras/{name}.txt there")
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    shadowing = []
    for dist in pinned(name):
        try:
            importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        shadowing.append(dist)
    if shadowing:
        warnings.warn(f"scripts/extras/{name}.txt pins packages the venv has too (drop them there): {shadowing}",
                      stacklevel=2)
    return folder


def run_child(name: str, script: Path, request: dict[str, Any], out: Path, timeout: float = 480) -> dict[str, Any]:
    """Run ``script REQUEST.json OUT.json`` with framework ``name`` on the path; return OUT's JSON."""
    folder = require(name)
    req = out.with_suffix(".request.json")
    req.write_text(json.dumps(request))
    # this checkout's verify_cli, not the venv's (which may be another checkout, installed editable)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO_ROOT)])}
    proc = subprocess.run([sys.executable, str(script), str(req), str(out)], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=out.parent)
    assert proc.returncode == 0 and out.is_file(), (
        f"{script.name} exited {proc.returncode}\n--- stdout ---\n{proc.stdout[-6000:]}\n"
        f"--- stderr ---\n{proc.stderr[-6000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result
