"""The package's import graph, read from the source: arrows point down, never up to the package
root, and the modules do not import each other in a circle (a ``TYPE_CHECKING`` import counts:
it hides a cycle from the interpreter, not from a reader or a refactoring)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "verify_cli"

#: cycles that exist today, each to be broken where its module is next changed; the test fails on
#: any other cycle, and on one of these once it is gone (so that the list only shrinks)
KNOWN_CYCLES: set[frozenset[str]] = set()


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of the package."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _module_level_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports run when the module is (or, under TYPE_CHECKING, is thought of as) imported;
    imports inside functions are deferred on purpose and left out."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _module_level_imports(node.body)
            for handler in node.handlers:
                yield from _module_level_imports(handler.body)
            yield from _module_level_imports(node.orelse)


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports at module level."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _module_level_imports(ast.parse(path.read_text(), str(path)).body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            deps |= {o for t in targets if (o := _owner(t, modules)) is not None}
        deps.discard(name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_the_package_root() -> None:
    """``from verify_cli import X`` inside the package runs an arrow up to the root, whose lazy
    public names import the package's modules in turn (the version is in ``_version``)."""
    upward = [f"{name}:{node.lineno}"
              for name, path in module_files().items() if name != "verify_cli"
              for node in ast.walk(ast.parse(path.read_text(), str(path)))
              if (isinstance(node, ast.ImportFrom) and node.module == "verify_cli" and not node.level)
              or (isinstance(node, ast.Import) and any(a.name == "verify_cli" for a in node.names))]
    assert upward == []


def test_the_import_graph_has_no_new_cycle() -> None:
    found = cycles(import_graph(module_files()))
    assert found - KNOWN_CYCLES == set(), "break the new import cycle (see tests/test_import_graph.py)"
    assert KNOWN_CYCLES - found == set(), "a known cycle is gone: remove it from KNOWN_CYCLES"


def test_the_mutation_operators_import_in_one_direction() -> None:
    graph = import_graph(module_files())
    mutation = {m for m in graph if m.startswith("verify_cli.checks.mutation")}
    assert not [c for c in cycles(graph) if c & mutation]
    assert graph["verify_cli.checks.mutation.js_tokens"] & mutation == set()


def test_the_scan_sees_a_cycle_hidden_under_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import B\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from pkg.a import A\nclass B: ...\n")
    (pkg / "c.py").write_text("def f():\n    from pkg.a import A\n")
    (pkg / "d.py").write_text("from . import c\n")
    graph = import_graph(module_files(pkg))
    assert graph["pkg.d"] == {"pkg.c"} and graph["pkg.c"] == set()
    assert cycles(graph) == {frozenset({"pkg.a", "pkg.b"})}
