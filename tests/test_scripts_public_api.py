"""Scripts under scripts/ import only the public API: ``verify_cli.__all__`` and the ``__all__`` of
a subpackage (``from verify_cli.sandbox import create_sandbox``), never a module's internals."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import verify_cli

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").glob("*.py"))


def public_names(module: str) -> set[str]:
    """What ``from MODULE import NAME`` may name: the top level's or a subpackage's ``__all__``."""
    if module == "verify_cli":
        return set(verify_cli.__all__)
    parts = module.split(".")
    if len(parts) != 2 or parts[0] != "verify_cli" or parts[1] in ("cli", "harness"):
        return set()  # a module inside a subpackage, or a part that is not a library API
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return set()
    if not hasattr(mod, "__path__"):
        return set()  # a module, not a subpackage
    return set(getattr(mod, "__all__", ()))


def private_imports(path: Path) -> list[str]:
    """``module.name`` for every import of verify-cli's that is not public, anywhere in ``path``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names
                      if a.name.startswith("verify_cli.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "verify_cli":
            allowed = public_names(node.module or "")
            found += [f"{node.module}.{a.name}" for a in node.names if a.name not in allowed]
    return found


def test_there_are_scripts_to_check() -> None:
    assert len(SCRIPTS) >= 5


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_scripts_import_only_the_public_api(path: Path) -> None:
    assert private_imports(path) == [], (
        "import these from verify_cli (or a subpackage's __all__), or make them public there")


def test_the_scan_catches_an_internal_import(tmp_path: Path) -> None:
    script = tmp_path / "bad.py"
    script.write_text("import verify_cli.sandbox.process\n"
                      "from verify_cli import Grader\n"
                      "from verify_cli.sandbox import create_sandbox\n"
                      "def f():\n    from verify_cli.sandbox.environment import HARNESS_DIR\n")
    assert private_imports(script) == ["verify_cli.sandbox.process",
                                       "verify_cli.sandbox.environment.HARNESS_DIR"]
