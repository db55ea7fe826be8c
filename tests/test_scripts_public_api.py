"""Scripts under scripts/, and the Python code blocks of the README and docs/, import only the
public API: ``verify_cli.__all__`` and the ``__all__`` of a public package (``from
verify_cli.sandbox import create_sandbox``), never a module's internals (the rule:
verify_cli/_exports.py)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import verify_cli
from verify_cli._exports import PUBLIC_PACKAGES

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


def public_names(module: str) -> set[str]:
    """What ``from MODULE import NAME`` may name: the top level's or a subpackage's ``__all__``."""
    if module == "verify_cli":
        return set(verify_cli.__all__)
    if module not in PUBLIC_PACKAGES:
        return set()  # a module inside a package, or a package that is not a library API
    return set(importlib.import_module(module).__all__)


def private_imports(path: Path, source: str | None = None) -> list[str]:
    """``module.name`` for every import of verify-cli's that is not public, anywhere in ``path``
    (or in ``source``, code read from ``path``)."""
    found: list[str] = []
    text = path.read_text() if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
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


def code_blocks(path: Path) -> list[tuple[int, str]]:
    """(line, code) of each fenced ``python`` block in a Markdown file, dedented as in a list."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        indent = len(match["indent"])
        body = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
        blocks.append((text.count("\n", 0, match.start()) + 1, body))
    return blocks


def test_the_readme_has_code_blocks_to_check() -> None:
    blocks = code_blocks(ROOT / "README.md")
    assert blocks and any("from verify_cli" in code for _, code in blocks)


@pytest.mark.parametrize("path", DOCUMENTS, ids=[p.name for p in DOCUMENTS])
def test_documented_code_imports_only_the_public_api(path: Path) -> None:
    found = [f"{path.name}:{line}: {name}" for line, code in code_blocks(path)
             for name in private_imports(path, code)]
    assert found == [], "document code with public names (or make them public there)"


def test_the_block_scan_reads_indented_blocks_and_private_imports(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("text\n\n- item\n\n  ```python\n  from verify_cli.sandbox.bwrap import BwrapSandbox\n"
                   "  ```\n\n```bash\nfrom verify_cli.x import y\n```\n\n```python\nimport verify_cli\n```\n")
    blocks = code_blocks(doc)
    assert [line for line, _ in blocks] == [5, 13]
    assert [private_imports(doc, code) for _, code in blocks] == [
        ["verify_cli.sandbox.bwrap.BwrapSandbox"], []]
