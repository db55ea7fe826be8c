"""The acceptance of issue 20 section 1, pinned: nothing outside a kind's own module branches on
the kind (``framework ==``, ``kind is TaskKind.X``), and nothing outside the sandbox backends'
own modules branches on a backend's name (``== "docker"``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from verify_cli.kinds import BUILTIN_KINDS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "verify_cli"
#: Where kinds may be named: the kinds themselves, and the task format's reader, which maps the
#: old form to a kind and checks the [stdio]/[calls] tables the format defines.
KIND_OWNERS = ("verify_cli/kinds/", "verify_cli/tasks/loader.py")
#: Where backend names may be compared: the sandbox backends (each its own module and registry).
BACKEND_OWNERS = ("verify_cli/sandbox/",)
BACKENDS = {"docker", "bwrap", "process"}


def _sources(*, scripts: bool = True) -> Iterator[tuple[str, ast.AST]]:
    for path in sorted([*PACKAGE.rglob("*.py"), *((ROOT / "scripts").rglob("*.py") if scripts else ())]):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("verify_cli/harness/"):
            continue  # code that runs inside the sandbox: each file is one kind's harness
        yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=rel)


def _sides(node: ast.Compare) -> list[ast.expr]:
    return [node.left, *node.comparators]


def _names_framework(e: ast.expr) -> bool:
    return (isinstance(e, ast.Attribute) and e.attr == "framework") or (
        isinstance(e, ast.Name) and e.id == "framework")


def _names_kind_member(e: ast.expr) -> bool:
    if isinstance(e, ast.Tuple | ast.List | ast.Set):
        return any(_names_kind_member(x) for x in e.elts)
    return isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "TaskKind"


def _compares_kind_to_a_name(node: ast.Compare) -> bool:
    """``task.kind == "pytest"`` (or ``in ("calls", "stdio")``): a kind named by its value."""
    sides = _sides(node)
    names = {"tests", *BUILTIN_KINDS}

    def is_name(e: ast.expr) -> bool:
        if isinstance(e, ast.Tuple | ast.List | ast.Set):
            return any(is_name(x) for x in e.elts)
        return isinstance(e, ast.Constant) and e.value in names

    return any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides) and any(map(is_name, sides))


def _names_backend(e: ast.expr) -> bool:
    if isinstance(e, ast.Tuple | ast.List | ast.Set):
        return any(_names_backend(x) for x in e.elts)
    return isinstance(e, ast.Constant) and e.value in BACKENDS


def _findings(owners: tuple[str, ...], test: object, *, scripts: bool = True) -> list[str]:
    out: list[str] = []
    for rel, tree in _sources(scripts=scripts):
        if rel.startswith(owners):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(test(s) for s in _sides(node)):  # type: ignore[operator]
                out.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_no_framework_comparison_outside_the_kinds() -> None:
    assert _findings(KIND_OWNERS, _names_framework) == []


def test_no_task_kind_branch_outside_the_kinds() -> None:
    assert _findings(KIND_OWNERS, _names_kind_member) == []


def test_no_kind_named_by_value_outside_the_kinds() -> None:
    out = [f"{rel}:{n.lineno}: {ast.unparse(n)}" for rel, tree in _sources() if not rel.startswith(KIND_OWNERS)
           for n in ast.walk(tree) if isinstance(n, ast.Compare) and _compares_kind_to_a_name(n)]
    assert out == []


def test_no_backend_name_branch_outside_the_backends() -> None:
    found = _findings(BACKEND_OWNERS, _names_backend, scripts=False)  # benchmarks pick backends by name
    assert found == []


def test_the_scan_finds_what_it_looks_for() -> None:
    """The scan is not blind: each pattern is found in a line written to match it."""
    sample = ast.parse('if task.test.framework == "pytest" or kind is TaskKind.STDIO or name == "docker": pass')
    (compare,) = [n for n in ast.walk(sample) if isinstance(n, ast.BoolOp)]
    a, b, c = compare.values
    assert isinstance(a, ast.Compare) and any(_names_framework(s) for s in _sides(a))
    assert isinstance(b, ast.Compare) and any(_names_kind_member(s) for s in _sides(b))
    assert isinstance(c, ast.Compare) and any(_names_backend(s) for s in _sides(c))
    (by_value,) = [n for n in ast.walk(ast.parse('x = task.kind in ("calls", "stdio")')) if isinstance(n, ast.Compare)]
    assert _compares_kind_to_a_name(by_value)


def test_sandbox_knows_nothing_of_pytest() -> None:
    """The sandbox contract and the warm hosts speak of warm jobs, not of a test framework."""
    for rel in ("verify_cli/sandbox/base.py",):
        assert "pytest" not in (ROOT / rel).read_text(encoding="utf-8").lower(), rel
    old = ("PytestInvocation", "run_pytest", "hosts_builtin_runners", "run_warm_pytest")
    named = sorted(f"{p.relative_to(ROOT).as_posix()}: {name}" for p in (PACKAGE / "sandbox").rglob("*.py")
                   for name in old if name in p.read_text(encoding="utf-8"))
    assert named == []
