"""Which tests can see a mutant: per-test line coverage from one traced reference run.

The harness plugin records, per test, the lines of the editable files it executed, the lines run
outside any test (at import: module constants, ``def`` lines, default arguments) and the tests
that started subprocesses (their lines are not traced). A mutant's statement is seen by the
tests that executed any of its lines; by every test when one of its lines runs at import; and
always by the tests that start subprocesses.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

COVERAGE_FILE = "verify-coverage.json"
OUTSIDE_TESTS = "<outside tests>"


@dataclass(frozen=True)
class Coverage:
    lines: Mapping[str, Mapping[int, frozenset[str]]] = field(default_factory=dict)
    spawners: frozenset[str] = frozenset()

    def tests_for(self, path: str, lines: tuple[int, ...]) -> frozenset[str] | None:
        """Tests that execute any of ``lines`` of ``path`` (plus the spawners); None means every
        test (a line runs at import, or the file was not traced)."""
        per_line = self.lines.get(path)
        if per_line is None:
            return None
        found: set[str] = set(self.spawners)
        for line in lines:
            tests = per_line.get(line, frozenset())
            if OUTSIDE_TESTS in tests:
                return None
            found |= tests
        return frozenset(found)


def parse_coverage(results: Mapping[str, bytes]) -> Coverage | None:
    """The coverage record of a traced run, or None when it wrote none."""
    data = results.get(COVERAGE_FILE)
    if data is None:
        return None
    try:
        doc = json.loads(data)
        lines = {str(path): {int(line): frozenset(str(t) for t in tests) for line, tests in per.items()}
                 for path, per in dict(doc.get("files", {})).items()}
        spawners = frozenset(str(t) for t in doc.get("spawners", []))
    except (ValueError, TypeError, AttributeError):
        return None
    return Coverage(lines, spawners)


_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try,
             ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Match)


def _contains(node: ast.AST, line: int, col: int) -> bool:
    start = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
    end = (node.end_lineno or node.lineno, node.end_col_offset or 0)  # type: ignore[attr-defined]
    return start <= (line, col) <= end


@lru_cache(maxsize=256)
def _tree(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def statement_lines(source: str, line: int, col: int) -> tuple[int, ...]:
    """The lines of the innermost statement at (``line``, 1-based ``col``): a simple statement
    whole, a compound one's header only (its body has statements of its own), and ``line``."""
    tree = _tree(source)
    if tree is None:
        return (line,)
    col0 = max(0, col - 1)
    body: list[ast.stmt] = list(tree.body)
    found: ast.stmt | None = None
    while True:
        inner = next((s for s in body if _contains(s, line, col0)), None)
        if inner is None:
            break
        found = inner
        children = [c for f in ("body", "orelse", "finalbody") for c in getattr(inner, f, []) or []
                    if isinstance(c, ast.stmt)]
        for handler in getattr(inner, "handlers", []) or []:
            children.extend(handler.body)
        for case in getattr(inner, "cases", []) or []:
            children.extend(case.body)
        body = children
    if found is None:
        return (line,)
    start = found.lineno
    if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and found.decorator_list:
        start = min(d.lineno for d in found.decorator_list)
    if isinstance(found, _COMPOUND):
        first = min((c.lineno for c in getattr(found, "body", [])), default=found.lineno + 1)
        end = max(found.lineno, first - 1)
    else:
        end = found.end_lineno or found.lineno
    return tuple(sorted({*range(start, end + 1), line}))
