"""Reading Python source of a row: helpers defined beside the entry point, signatures, names."""

from __future__ import annotations

import ast

from verify_cli.importers.model import RowError


def parse(code: str, what: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as e:
        raise RowError(f"{what} is not valid Python (line {e.lineno}: {e.msg})") from None
    except ValueError as e:  # Python 3.11: a NUL byte in the source
        raise RowError(f"{what} is not valid Python ({e})") from None


def defines(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name for n in tree.body)


def helpers_besides(code: str, entry_point: str) -> str:
    """The imports, functions, classes and constants that ``code`` defines at top level, other
    than ``entry_point``: a pristine copy of the prompt's helpers for the test side (a test that
    calls ``poly`` must call the task's ``poly``, not one the candidate redefined)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ""
    keep: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == entry_point:
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                             ast.Assign, ast.AnnAssign)):
            segment = ast.get_source_segment(code, node, padded=True)
            if segment is not None:
                decorators = "".join(f"@{ast.get_source_segment(code, d)}\n"
                                     for d in getattr(node, "decorator_list", []))
                keep.append(decorators + segment)
    return "\n\n".join(keep)


def imports_of(code: str) -> str:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ""
    return "\n".join(ast.get_source_segment(code, n) or "" for n in tree.body
                     if isinstance(n, (ast.Import, ast.ImportFrom)))


def signature_stub(code: str | ast.Module, entry_point: str) -> str:
    """``def entry_point(<its parameters>): raise NotImplementedError``, from ``code``'s def."""
    tree = parse(code, "the solution") if isinstance(code, str) else code
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry_point:
            params = ast.unparse(node.args)
            return f"def {entry_point}({params}):\n    raise NotImplementedError(\"write {entry_point}\")\n"
    raise RowError(f"the solution defines no function {entry_point!r}")


def called_function(assert_source: str, defined: set[str]) -> str | None:
    """The first function defined by the solution that an assert statement calls."""
    try:
        tree = ast.parse(assert_source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defined:
            return node.func.id
    return None


def top_level_functions(code: str | ast.Module) -> set[str]:
    try:
        tree = ast.parse(code) if isinstance(code, str) else code
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
