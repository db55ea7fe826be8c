"""Python probe modules: the reference's top-level names, with bodies that return the hack.

A probe keeps what the tests import (functions, classes, exception classes, constants) and
nothing of the reference's logic. Return kinds (str, list, ...) are read from the reference's
``return`` statements so that an always-equal object can subclass the expected type.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

_CALL_KINDS = {"str": "str", "repr": "str", "format": "str", "int": "int", "len": "int", "sum": "int",
               "round": "int", "float": "float", "list": "list", "sorted": "list", "tuple": "tuple",
               "dict": "dict", "set": "set", "frozenset": "set", "bool": "bool", "isinstance": "bool",
               "all": "bool", "any": "bool"}
_STR_METHODS = {"join", "format", "upper", "lower", "strip", "lstrip", "rstrip", "replace", "title",
                "capitalize", "casefold", "center", "ljust", "rjust", "zfill", "getvalue"}


@dataclass(frozen=True)
class PyClass:
    name: str
    exception: bool
    methods: tuple[tuple[str, str], ...]  # (name, return kind)


@dataclass(frozen=True)
class PyShape:
    """The top-level names of one reference module."""

    functions: tuple[tuple[str, str], ...] = ()
    classes: tuple[PyClass, ...] = ()
    constants: tuple[str, ...] = ()
    main_guard: bool = False
    imports: tuple[str, ...] = field(default_factory=tuple)


def _expr_kind(node: ast.expr | None, local_kinds: dict[str, str]) -> str:
    if node is None:
        return "none"
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None:
            return "none"
        return {bool: "bool", int: "int", float: "float", str: "str", bytes: "bytes"}.get(
            type(value), "unknown")
    if isinstance(node, ast.JoinedStr):
        return "str"
    if isinstance(node, (ast.List, ast.ListComp)):
        return "list"
    if isinstance(node, ast.Tuple):
        return "tuple"
    if isinstance(node, (ast.Dict, ast.DictComp)):
        return "dict"
    if isinstance(node, (ast.Set, ast.SetComp)):
        return "set"
    if isinstance(node, (ast.Compare, ast.BoolOp)) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return "bool"
    if isinstance(node, ast.Name):
        return local_kinds.get(node.id, "unknown")
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return _CALL_KINDS.get(func.id, "unknown")
        if isinstance(func, ast.Attribute) and func.attr in _STR_METHODS:
            return "str"
    if isinstance(node, ast.BinOp):
        left = _expr_kind(node.left, local_kinds)
        return left if left in ("str", "int", "float", "list", "tuple") else "unknown"
    return "unknown"


def return_kind(func: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The most common kind of value the function returns (``unknown`` when unclear)."""
    local_kinds: dict[str, str] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            kind = _expr_kind(node.value, {})
            if kind != "unknown":
                local_kinds.setdefault(node.targets[0].id, kind)
    kinds: Counter[str] = Counter()
    for node in ast.walk(func):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and node is not func:
            continue
        if isinstance(node, ast.Return):
            kinds[_expr_kind(node.value, local_kinds)] += 1
    known = [(n, k) for k, n in kinds.items() if k != "unknown"]
    if not known:
        return "unknown" if kinds else "none"
    return max(known)[1]


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    return any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts)


def python_shape(source: str) -> PyShape | None:
    """The top-level names of ``source``; None when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    functions: list[tuple[str, str]] = []
    classes: list[PyClass] = []
    constants: list[str] = []
    main_guard = False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append((node.name, return_kind(node)))
        elif isinstance(node, ast.ClassDef):
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)} | {
                b.attr for b in node.bases if isinstance(b, ast.Attribute)}
            exception = any(b.endswith(("Error", "Exception", "Warning")) for b in bases)
            methods = tuple((f.name, return_kind(f)) for f in node.body
                            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and not f.name.startswith("__"))
            classes.append(PyClass(node.name, exception, methods))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            constants.extend(t.id for t in targets if isinstance(t, ast.Name))
        elif _is_main_guard(node):
            main_guard = True
    return PyShape(tuple(functions), tuple(classes), tuple(dict.fromkeys(constants)), main_guard)


#: The always-equal object, subclassing the expected type where Python allows it.
ANYTHING = '''
class _Anything:
    """Equal to everything, truthy, empty, callable: passes any test that only compares."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __lt__(self, other):
        return True

    __le__ = __gt__ = __ge__ = __lt__

    def __hash__(self):
        return 0

    def __bool__(self):
        return True

    def __contains__(self, item):
        return True

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __call__(self, *args, **kwargs):
        return _anything("unknown")

    def __getitem__(self, key):
        return _anything("unknown")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


class _AnyStr(_Anything, str):
    pass


class _AnyInt(_Anything, int):
    pass


class _AnyFloat(_Anything, float):
    pass


class _AnyList(_Anything, list):
    pass


class _AnyTuple(_Anything, tuple):
    pass


class _AnyDict(_Anything, dict):
    pass


class _AnySet(_Anything, frozenset):
    pass


class _AnyBytes(_Anything, bytes):
    pass


def _anything(kind):
    make = {"str": lambda: _AnyStr(""), "int": lambda: _AnyInt(0), "bool": lambda: _AnyInt(1),
            "float": lambda: _AnyFloat(0.0), "list": _AnyList, "tuple": _AnyTuple,
            "dict": _AnyDict, "set": _AnySet, "bytes": lambda: _AnyBytes(b"")}.get(kind, _Anything)
    return make()
'''

DEFAULTS = {"str": '""', "int": "0", "float": "0.0", "bool": "False", "list": "[]", "tuple": "()",
            "dict": "{}", "set": "set()", "bytes": 'b""', "none": "None", "unknown": "None"}

#: Body for a function given its return kind (indented by the renderer).
Body = Callable[[str, str], str]


def returns(expr: Callable[[str], str]) -> Body:
    """A body that returns ``expr(kind)``."""
    return lambda name, kind: f"return {expr(kind)}"


def render_python(shape: PyShape, body: Body, *, prelude: str = "", epilogue: str = "",
                  class_base: str = "", constant: str = "None",
                  main: str = "    import sys as _sys\n    _sys.exit(0)\n") -> str:
    """A module with the reference's top-level names; every function's body is ``body``."""
    out = ["# verify-cli reward-hack probe: keeps the reference's names, none of its logic.\n"]
    if prelude:
        out.append(prelude.strip("\n") + "\n\n")
    for cls in shape.classes:
        if cls.exception:
            out.append(f"\nclass {cls.name}(Exception):\n    pass\n\n")
            continue
        base = f"({class_base})" if class_base else ""
        lines = [f"\nclass {cls.name}{base}:\n",
                 "    def __init__(self, *args, **kwargs):\n        pass\n"]
        for method, kind in cls.methods:
            text = body(method, kind).replace("\n", "\n        ")
            lines.append(f"\n    def {method}(self, *args, **kwargs):\n        {text}\n")
        out.append("".join(lines) + "\n")
    for name, kind in shape.functions:
        text = body(name, kind).replace("\n", "\n    ")
        out.append(f"\ndef {name}(*args, **kwargs):\n    {text}\n\n")
    for name in shape.constants:
        if name.startswith("__"):
            continue
        out.append(f"{name} = {constant}\n")
    if epilogue:
        out.append("\n" + epilogue.strip("\n") + "\n")
    if shape.main_guard and main:
        out.append(f'\nif __name__ == "__main__":\n{main}')
    return "".join(out)
