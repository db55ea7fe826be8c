"""docs/architecture.md stays true: the README links it, it keeps the sections other changes fill
in, and every file or folder it names exists (a moved module shows here, not in a reader's
confusion)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: a path in backticks, with a folder in it (a bare file name is read in its sentence's folder):
#: folders end in '/', files in a known suffix
_PATH = re.compile(r"`([\w./-]+(?:/|\.py|\.md|\.js|\.json|\.toml))`")


def named_paths(text: str) -> list[str]:
    return [m for m in _PATH.findall(text) if "/" in m]


def resolves(name: str) -> bool:
    """Whether ``name`` is a path of the repository or of the package (``grading/grader.py``)."""
    return any((base / name).exists() for base in (ROOT, ROOT / "verify_cli"))


def test_the_readme_links_the_architecture_page() -> None:
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_architecture_page_has_its_sections() -> None:
    headings = re.findall(r"^## (.+)$", ARCHITECTURE.read_text(encoding="utf-8"), re.M)
    for needed in ("Layers", "One candidate, from the command line to a verdict", "Who owns what",
                   "Where to add", "Task kinds"):
        assert needed in headings, needed


def test_every_path_the_architecture_page_names_exists() -> None:
    names = named_paths(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(names) > 20
    assert [n for n in names if not resolves(n)] == []


def test_the_path_check_sees_a_missing_module() -> None:
    names = named_paths("the grader (`grading/grader.py`), the old `grading/judge.py`, `sandbox/`, `x`, `a.py`")
    assert names == ["grading/grader.py", "grading/judge.py", "sandbox/"]
    assert [n for n in names if not resolves(n)] == ["grading/judge.py"]
