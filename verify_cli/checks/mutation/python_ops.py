"""Mutation operators for Python: located with the AST, applied as exact text splices.

Each operator turns a :class:`PythonSource` into :class:`Edit` proposals, one change each. The
rest of the file keeps its formatting, so a mutant's diff shows only the changed expression.
Docstrings (and other bare string statements), ``if __name__ == "__main__":`` blocks, type
annotations and f-strings are never mutated.
"""

from __future__ import annotations

import ast
import io
import math
import re
import tokenize
import warnings
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType

from verify_cli.checks.mutation.model import Edit, shorten

_SKIPPED_TOKENS = frozenset(
    {
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.COMMENT,
        tokenize.ENDMARKER,
        tokenize.ENCODING,
    }
)


@dataclass(frozen=True)
class _Token:
    start: int
    end: int
    text: str


class PythonSource:
    """One parsed Python file: its text, its AST and the nodes operators may mutate.

    Raises ``SyntaxError`` (or ``ValueError`` for null bytes) when the source does not parse.
    """

    def __init__(self, source: str, filename: str = "<unknown>") -> None:
        self.source = source
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.tree = ast.parse(source, filename=filename)
        self._lines = source.split("\n")
        starts = [0]
        for line in self._lines[:-1]:
            starts.append(starts[-1] + len(line) + 1)
        self._line_starts = starts
        self.nodes: list[ast.AST] = list(_mutable_nodes(self.tree))

    def offset(self, lineno: int, col_offset: int) -> int:
        """Character offset of an AST position (whose column counts UTF-8 bytes)."""
        line = self._lines[lineno - 1]
        if not line.isascii():
            col_offset = len(line.encode()[:col_offset].decode("utf-8", errors="replace"))
        return self._line_starts[lineno - 1] + col_offset

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        return start, end

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    @cached_property
    def tokens(self) -> list[_Token]:
        """Significant tokens (no comments, newlines or indentation), in source order."""
        found: list[_Token] = []
        try:
            for tok in tokenize.generate_tokens(io.StringIO(self.source).readline):
                if tok.type in _SKIPPED_TOKENS:
                    continue
                start = self._line_starts[tok.start[0] - 1] + tok.start[1]
                end = self._line_starts[tok.end[0] - 1] + tok.end[1]
                found.append(_Token(start, end, tok.string))
        except (tokenize.TokenError, SyntaxError):
            return []
        return found

    @cached_property
    def _token_starts(self) -> list[int]:
        return [tok.start for tok in self.tokens]

    def operator_tokens(self, start: int, end: int) -> list[_Token]:
        """Tokens inside ``[start, end)`` other than grouping parentheses."""
        index = bisect_left(self._token_starts, start)
        found = []
        while index < len(self.tokens) and self.tokens[index].end <= end:
            if self.tokens[index].text not in ("(", ")"):
                found.append(self.tokens[index])
            index += 1
        return found

    def token_before(self, offset: int) -> _Token | None:
        index = bisect_left(self._token_starts, offset) - 1
        return self.tokens[index] if index >= 0 else None

    def paren_span(self, node: ast.AST) -> tuple[int, int]:
        """The node's span widened to the parentheses that wrap only it.

        Only valid where the node cannot be the sole argument of a call, whose parentheses
        would otherwise be counted as the node's own.
        """
        start, end = self.span(node)
        before = bisect_left(self._token_starts, start) - 1
        after = bisect_left(self._token_starts, end)
        tokens = self.tokens
        while (
            before >= 0
            and after < len(tokens)
            and tokens[before].text == "("
            and tokens[after].text == ")"
        ):
            start, end = tokens[before].start, tokens[after].end
            before -= 1
            after += 1
        return start, end

    def replace_operator(self, left: ast.AST, right: ast.AST, new: str) -> Iterator[Edit]:
        """Replace the operator written between two operands with ``new``."""
        tokens = self.operator_tokens(self.span(left)[1], self.span(right)[0])
        if not tokens:
            return
        old = " ".join(tok.text for tok in tokens)
        if old != new:
            yield Edit(tokens[0].start, tokens[-1].end, new, f"replaced '{old}' with '{new}'")


def parse_python(source: str, filename: str = "<unknown>") -> PythonSource | None:
    """The parsed file, or ``None`` when the original source does not parse."""
    try:
        return PythonSource(source, filename)
    except (SyntaxError, ValueError):
        return None


def python_compiles(path: str, source: str) -> bool:
    """Whether ``source`` compiles as a Python module (syntax and compile-time checks)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(source, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


# -- which nodes may be mutated ---------------------------------------------------------------

_ANNOTATION_FIELDS = frozenset({"annotation", "returns"})


def _is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    operands = [test.left, test.comparators[0]]
    names = [o.id for o in operands if isinstance(o, ast.Name)]
    values = [o.value for o in operands if isinstance(o, ast.Constant)]
    return names == ["__name__"] and values == ["__main__"]


def _is_inert_statement(node: ast.AST) -> bool:
    """A bare constant statement, such as a docstring: mutating it changes nothing."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _mutable_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        children: list[ast.AST] = []
        for name, value in ast.iter_fields(node):
            if name in _ANNOTATION_FIELDS:
                continue
            for item in value if isinstance(value, list) else [value]:
                if not isinstance(item, ast.AST) or isinstance(item, ast.JoinedStr):
                    continue
                if _is_inert_statement(item) or _is_main_guard(item):
                    continue
                children.append(item)
        stack.extend(reversed(children))


# -- operators --------------------------------------------------------------------------------

_CMP_SWAP: Mapping[type[ast.cmpop], str] = {
    ast.Lt: ">",
    ast.Gt: "<",
    ast.LtE: ">=",
    ast.GtE: "<=",
    ast.Eq: "!=",
    ast.NotEq: "==",
    ast.Is: "is not",
    ast.IsNot: "is",
    ast.In: "not in",
    ast.NotIn: "in",
}
_CMP_BOUNDARY: Mapping[type[ast.cmpop], str] = {
    ast.Lt: "<=",
    ast.LtE: "<",
    ast.Gt: ">=",
    ast.GtE: ">",
}
_ARITH_SWAP: Mapping[type[ast.operator], tuple[str, ...]] = {
    ast.Add: ("-",),
    ast.Sub: ("+",),
    ast.Mult: ("/", "//"),
    ast.Div: ("*",),
    ast.FloorDiv: ("*", "/"),
    ast.Mod: ("*",),
}
_EMPTY_LITERAL: Mapping[type[ast.AST], tuple[str, str]] = {
    ast.List: ("list", "[]"),
    ast.Tuple: ("tuple", "()"),
    ast.Set: ("set", "set()"),
    ast.Dict: ("dict", "{}"),
}
_BOOL_RETURNING_BUILTINS = frozenset(
    {"isinstance", "issubclass", "hasattr", "callable", "all", "any", "bool"}
)
_ATOMS = (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)


def _compare_edits(src: PythonSource, table: Mapping[type[ast.cmpop], str]) -> Iterator[Edit]:
    for node in src.nodes:
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
            new = table.get(type(op))
            if new is not None:
                yield from src.replace_operator(left, right, new)


def cmp_swap(src: PythonSource) -> Iterator[Edit]:
    """``<``/``>``, ``<=``/``>=``, ``==``/``!=``, ``is``/``is not``, ``in``/``not in``."""
    return _compare_edits(src, _CMP_SWAP)


def cmp_boundary(src: PythonSource) -> Iterator[Edit]:
    """``<``/``<=`` and ``>``/``>=``."""
    return _compare_edits(src, _CMP_BOUNDARY)


def arith_swap(src: PythonSource) -> Iterator[Edit]:
    """``+``/``-``, ``*``/``/``/``//``, ``%`` to ``*``, also in augmented assignments."""
    for node in src.nodes:
        if isinstance(node, ast.BinOp):
            for new in _ARITH_SWAP.get(type(node.op), ()):
                yield from src.replace_operator(node.left, node.right, new)
        elif isinstance(node, ast.AugAssign):
            for new in _ARITH_SWAP.get(type(node.op), ()):
                yield from src.replace_operator(node.target, node.value, new + "=")


def bool_op(src: PythonSource) -> Iterator[Edit]:
    """``and``/``or``, one operator at a time."""
    for node in src.nodes:
        if isinstance(node, ast.BoolOp):
            new = "or" if isinstance(node.op, ast.And) else "and"
            for left, right in zip(node.values, node.values[1:], strict=False):
                yield from src.replace_operator(left, right, new)


def _is_not(node: ast.AST) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)


def negate_cond(src: PythonSource) -> Iterator[Edit]:
    """``if``/``while``/ternary condition ``x`` to ``not (x)``; an existing ``not`` removed."""
    for node in src.nodes:
        if isinstance(node, ast.If | ast.While | ast.IfExp) and not _is_not(node.test):
            start, end = src.span(node.test)
            text = src.source[start:end]
            yield Edit(start, end, f"not ({text})", f"negated condition '{shorten(text)}'")
        elif _is_not(node):
            start, end = src.span(node)
            keyword = re.match(r"not\s*", src.source[start:end])
            if keyword is not None:
                yield Edit(start, start + keyword.end(), "", "removed 'not'")


def _int_neighbours(value: int) -> tuple[int, ...]:
    return (1,) if value == 0 else (value + 1, value - 1)


def _float_neighbours(value: float) -> tuple[float, ...]:
    """Other values for a float literal (always non-negative, as a literal is): 0.0 to 1.0; else
    x+1, x-1 (where that stays a different number) and x/2, in that order, without repeats."""
    if not math.isfinite(value):
        return ()
    if value == 0:
        return (1.0,)
    found: list[float] = []
    for new in (value + 1.0, value - 1.0, value / 2):
        if math.isfinite(new) and new != value and new not in found:
            found.append(new)
    return tuple(found)


def _float_text(value: float) -> str:
    text = repr(value)
    return f"({text})" if text.startswith("-") else text


def const_change(src: PythonSource) -> Iterator[Edit]:
    """Integers to n+1 and n-1 (0 to 1), floats to x+1, x-1 and x/2 (0.0 to 1.0),
    ``True``/``False``, strings to ``""`` or ``"XX"``."""
    for node in src.nodes:
        if not isinstance(node, ast.Constant):
            continue
        start, end = src.span(node)
        text = src.source[start:end]
        value = node.value
        if isinstance(value, bool):
            yield Edit(start, end, str(not value), f"replaced {text} with {not value}")
        elif isinstance(value, int):
            for new in _int_neighbours(value):
                yield Edit(start, end, str(new), f"replaced {text} with {new}")
        elif isinstance(value, float):
            for new_float in _float_neighbours(value):
                new_text = _float_text(new_float)
                yield Edit(start, end, new_text, f"replaced {text} with {new_text}")
        elif isinstance(value, str):
            new_text = '""' if value else '"XX"'
            yield Edit(start, end, new_text, f"replaced {shorten(text)} with {new_text}")


def _literal_size(node: ast.AST) -> int:
    if isinstance(node, ast.Dict):
        return len(node.keys)
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return len(node.elts)
    return 0


def empty_collection(src: PythonSource) -> Iterator[Edit]:
    """A non-empty list, tuple, set or dict literal to an empty one."""
    for node in src.nodes:
        kind = _EMPTY_LITERAL.get(type(node))
        if kind is None or _literal_size(node) == 0:
            continue
        if isinstance(node, ast.List | ast.Tuple) and not isinstance(node.ctx, ast.Load):
            continue  # an assignment target
        start, end = src.span(node)
        name, empty = kind
        yield Edit(start, end, empty, f"replaced {name} literal with {empty}")


def _is_boolean_ish(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare | ast.BoolOp):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _BOOL_RETURNING_BUILTINS
    )


def return_value(src: PythonSource) -> Iterator[Edit]:
    """``return x`` to ``return None``; boolean-ish ``return x`` also to ``return not (x)``."""
    for node in src.nodes:
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Constant) and value.value is None:
            continue
        start, end = src.span(value)
        text = src.source[start:end]
        yield Edit(start, end, "None", f"replaced return value '{shorten(text)}' with None")
        if _is_boolean_ish(value):
            yield Edit(start, end, f"not ({text})", f"negated return value '{shorten(text)}'")


def stmt_delete(src: PythonSource) -> Iterator[Edit]:
    """An assignment, call statement, ``raise``, ``continue`` or ``break`` to ``pass``."""
    for node in src.nodes:
        deletable = isinstance(
            node, ast.Assign | ast.AugAssign | ast.Raise | ast.Continue | ast.Break
        ) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await))
        if deletable:
            start, end = src.span(node)
            text = src.source[start:end]
            yield Edit(start, end, "pass", f"deleted statement '{shorten(text)}'")


def _int_literal(node: ast.expr) -> int | None:
    """The value of ``3`` or ``-3`` written as a literal, else ``None``."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _int_literal(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _shifted(src: PythonSource, node: ast.expr, delta: int) -> str:
    value = _int_literal(node)
    if value is not None:
        return str(value + delta)
    text = src.text(node)
    sign = "+" if delta > 0 else "-"
    operand = text if isinstance(node, _ATOMS) else f"({text})"
    return f"{operand} {sign} {abs(delta)}"


def _slice_edits(src: PythonSource, node: ast.Slice) -> Iterator[Edit]:
    bounds = (("start", node.lower, 1), ("end", node.upper, -1))
    for name, bound, delta in bounds:
        if bound is None:
            continue
        start, end = src.paren_span(bound)
        text = src.source[start:end]
        new = _shifted(src, bound, delta)
        yield Edit(start, end, new, f"replaced slice {name} '{shorten(text)}' with '{new}'")
        yield Edit(start, end, "", f"removed slice {name} '{shorten(text)}'")


def _drop_last_argument(src: PythonSource, node: ast.Call) -> Iterator[Edit]:
    last = node.args[-1]
    start, end = src.paren_span(last)
    comma = src.token_before(start)
    if comma is not None and comma.text == ",":
        yield Edit(comma.start, end, "", f"dropped last argument '{shorten(src.text(last))}'")


def arg_change(src: PythonSource) -> Iterator[Edit]:
    """Drop the last positional argument of a call with two or more; shift or drop slice bounds."""
    for node in src.nodes:
        if isinstance(node, ast.Call):
            if len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args):
                yield from _drop_last_argument(src, node)
        elif isinstance(node, ast.Slice):
            yield from _slice_edits(src, node)


PythonOperator = Callable[[PythonSource], Iterator[Edit]]

PYTHON_OPERATORS: Mapping[str, PythonOperator] = MappingProxyType(
    {
        "cmp_swap": cmp_swap,
        "cmp_boundary": cmp_boundary,
        "arith_swap": arith_swap,
        "bool_op": bool_op,
        "negate_cond": negate_cond,
        "const_change": const_change,
        "empty_collection": empty_collection,
        "return_value": return_value,
        "stmt_delete": stmt_delete,
        "arg_change": arg_change,
    }
)


def python_edits(path: str, source: str, operators: Sequence[str]) -> dict[str, list[Edit]] | None:
    """Every edit each named operator proposes for one file; ``None`` if it does not parse."""
    parsed = parse_python(source, path)
    if parsed is None:
        return None
    return {name: list(PYTHON_OPERATORS[name](parsed)) for name in operators}
