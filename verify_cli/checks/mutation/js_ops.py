"""Mutation operators for JavaScript, working on tokens rather than a syntax tree.

The names match the Python operators where the idea carries over. Without a parser some
mutants do not parse; those are caught by the compile check in ``js_check``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType

from verify_cli.checks.mutation.js_literal_ops import method_edits, number_edits, regex_edits, string_edits
from verify_cli.checks.mutation.js_statement_ops import arg_change, stmt_delete
from verify_cli.checks.mutation.js_tokens import JsSource, JsToken, Kind, ends_operand
from verify_cli.checks.mutation.model import Edit, shorten

# Adjacent characters that would fuse into another token (``a+-b`` to ``a--b``).
_FUSING = frozenset({("+", "+"), ("-", "-"), ("/", "/"), ("/", "*"), ("*", "/")})
_WORD = re.compile(r"[\w$]")
_BOOLEAN_OPERATORS = frozenset(
    {"<", ">", "<=", ">=", "==", "!=", "===", "!==", "&&", "||", "instanceof", "in"}
)
_NOT_BOOLEAN_RESULT = frozenset({"?", "=>", "=", ",", "+=", "-=", "??"})
_CONDITION_KEYWORDS = frozenset({"if", "while", "for", "switch", "with"})
_CONTINUING_NAMES = frozenset({"in", "instanceof", "of"})


def _edit(source: str, start: int, end: int, new: str, description: str) -> Edit:
    """An edit that keeps the neighbouring tokens apart."""
    before, after = source[start - 1 : start] if start else "", source[end : end + 1]
    if new and after and (new[-1], after) in _FUSING:
        new += " "
    if new and before and (before, new[0]) in _FUSING:
        new = " " + new
    if not new and _WORD.match(before) and _WORD.match(after):
        new = " "
    return Edit(start, end, new, description)


def _swap(
    src: JsSource, table: Mapping[str, tuple[str, ...]], binary: frozenset[str] = frozenset()
) -> Iterator[Edit]:
    for index, token in enumerate(src.tokens):
        if token.kind is not Kind.PUNCT or token.text not in table:
            continue
        if token.text in binary and not ends_operand(src.token(index - 1)):
            continue  # unary plus or minus, or a generator star
        for new in table[token.text]:
            description = f"replaced '{token.text}' with '{new}'"
            yield _edit(src.source, token.start, token.end, new, description)


_CMP_SWAP = {
    "<": (">",), ">": ("<",), "<=": (">=",), ">=": ("<=",),
    "===": ("!==",), "!==": ("===",), "==": ("!=",), "!=": ("==",),
}  # fmt: skip
_CMP_BOUNDARY = {"<": ("<=",), "<=": ("<",), ">": (">=",), ">=": (">",)}
_ARITH_SWAP = {
    "+": ("-",), "-": ("+",), "*": ("/",), "/": ("*",), "%": ("*",),
    "+=": ("-=",), "-=": ("+=",), "*=": ("/=",), "/=": ("*=",), "%=": ("*=",),
    "++": ("--",), "--": ("++",),
}  # fmt: skip
_BOOL_OP = {"&&": ("||",), "||": ("&&",), "&&=": ("||=",), "||=": ("&&=",), "??": ("||", "&&"),
            "??=": ("||=",)}


def cmp_swap(src: JsSource) -> Iterator[Edit]:
    """``<``/``>``, ``<=``/``>=``, ``===``/``!==``, ``==``/``!=``."""
    return _swap(src, _CMP_SWAP)


def cmp_boundary(src: JsSource) -> Iterator[Edit]:
    """``<``/``<=`` and ``>``/``>=``."""
    return _swap(src, _CMP_BOUNDARY)


def arith_swap(src: JsSource) -> Iterator[Edit]:
    """Binary ``+``/``-``, ``*``/``/``, ``%`` to ``*``, their assignments, ``++``/``--``."""
    return _swap(src, _ARITH_SWAP, binary=frozenset({"+", "-", "*", "/", "%"}))


def bool_op(src: JsSource) -> Iterator[Edit]:
    """``&&``/``||``, ``&&=``/``||=``, ``??`` to ``||`` and ``&&``."""
    return _swap(src, _BOOL_OP)


def negate_cond(src: JsSource) -> Iterator[Edit]:
    """``if (x)``/``while (x)`` to ``if (!(x))``; an existing ``!`` removed."""
    for index, token in enumerate(src.tokens):
        if src.is_name(index, "if", "while") and not src.is_property(index):
            close = src.pairs.get(index + 1)
            if close is None or not src.is_punct(index + 1, "("):
                continue
            start, end = src.tokens[index + 1].end, src.tokens[close].start
            inner = src.source[start:end]
            if inner.strip():
                yield Edit(start, end, f"!({inner})", f"negated condition '{shorten(inner)}'")
        elif token.kind is Kind.PUNCT and token.text == "!":
            yield _edit(src.source, token.start, token.end, "", "removed '!'")


def const_change(src: JsSource) -> Iterator[Edit]:
    """Integers to n+1 and n-1 (0 to 1), decimals to x+1, x-1 and x/2, ``true``/``false``,
    strings and plain template literals to ``''`` (an empty one to ``'XX'``)."""
    for index, token in enumerate(src.tokens):
        if token.kind is Kind.NUMBER:
            yield from number_edits(token)
        elif token.kind in (Kind.STRING, Kind.TEMPLATE):
            yield from string_edits(src, index)
        elif src.is_name(index, "true", "false") and not src.is_property(index):
            new_text = "false" if token.text == "true" else "true"
            yield Edit(token.start, token.end, new_text, f"replaced {token.text} with {new_text}")


def regex(src: JsSource) -> Iterator[Edit]:
    """Regex literals: anchors, character classes, quantifiers and flags, one change each."""
    for token in src.tokens:
        if token.kind is Kind.REGEX:
            yield from regex_edits(token)


def method_swap(src: JsSource) -> Iterator[Edit]:
    """``startsWith``/``endsWith``, ``Math.min``/``max``, ``some``/``every``, ...; calls such as
    ``.filter(...)``, ``.trim()`` or ``.sort()`` removed."""
    for index, token in enumerate(src.tokens):
        if token.kind is Kind.NAME:
            yield from method_edits(src, index)


def _in_parameter_list(src: JsSource, index: int) -> bool:
    opener = src.enclosing.get(index)
    if opener is None or not src.is_punct(opener, "(") or opener not in src.pairs:
        return False
    close = src.pairs[opener]
    if src.is_punct(close + 1, "=>"):
        return True
    return src.is_punct(close + 1, "{") and not src.is_name(opener - 1, *_CONDITION_KEYWORDS)


def empty_collection(src: JsSource) -> Iterator[Edit]:
    """A non-empty array or object literal after ``=``, ``(``, ``,`` or ``return`` to empty."""
    for index, token in enumerate(src.tokens):
        if not src.is_punct(index, "[", "{") or index not in src.pairs:
            continue
        close = src.pairs[index]
        if close == index + 1:
            continue
        after_value = src.is_punct(index - 1, "=", "(", ",") or src.is_name(index - 1, "return")
        if not after_value or src.is_punct(close + 1, "="):
            continue  # not a literal, or a destructuring target
        if src.is_punct(index - 1, "(", ",") and _in_parameter_list(src, index):
            continue  # a destructuring parameter
        opener = src.enclosing.get(index)
        if src.is_punct(index - 1, ",") and opener is not None and src.is_punct(opener, "{"):
            continue  # a computed key in an object literal
        empty, kind = ("[]", "array") if token.text == "[" else ("{}", "object")
        end = src.tokens[close].end
        yield Edit(token.start, end, empty, f"replaced {kind} literal with {empty}")


def _starts_statement(token: JsToken) -> bool:
    if token.kind is Kind.NAME:
        return token.text not in _CONTINUING_NAMES
    return token.kind in (Kind.NUMBER, Kind.STRING)


def _expression_end(src: JsSource, first: int) -> int:
    """Index of the last token of the expression starting at ``first``."""
    tokens = src.tokens
    depth = 0
    index = first
    while index < len(tokens):
        token = tokens[index]
        if depth == 0 and index > first and token.newline_before and _starts_statement(token):
            previous = tokens[index - 1]
            if ends_operand(previous) or previous.text == "}":
                break  # automatic semicolon insertion
        if token.kind is Kind.PUNCT:
            if token.text in ("(", "[", "{"):
                depth += 1
            elif token.text in (")", "]", "}"):
                if depth == 0:
                    break
                depth -= 1
            elif token.text == ";" and depth == 0:
                break
        index += 1
    return index - 1


def _is_boolean_ish(src: JsSource, first: int, last: int) -> bool:
    if src.is_punct(first, "!"):
        return False
    depth = 0
    boolean = False
    for token in src.tokens[first : last + 1]:
        if token.kind is Kind.PUNCT and token.text in ("(", "[", "{"):
            depth += 1
        elif token.kind is Kind.PUNCT and token.text in (")", "]", "}"):
            depth -= 1
        elif depth == 0 and token.kind in (Kind.PUNCT, Kind.NAME):
            if token.text in _NOT_BOOLEAN_RESULT:
                return False
            boolean = boolean or token.text in _BOOLEAN_OPERATORS
    return boolean


def return_value(src: JsSource) -> Iterator[Edit]:
    """``return x;`` to ``return undefined;``; boolean-ish ``x`` also to ``!(x)``."""
    for index in range(len(src.tokens)):
        if not src.is_name(index, "return") or src.is_property(index):
            continue
        head = src.token(index + 1)
        if head is None or head.newline_before or src.is_punct(index + 1, ";", "}", ")"):
            continue
        last = _expression_end(src, index + 1)
        if last <= index:
            continue
        start, end = head.start, src.tokens[last].end
        text = src.source[start:end]
        if text == "undefined":
            continue
        yield Edit(
            start, end, "undefined", f"replaced return value '{shorten(text)}' with undefined"
        )
        if _is_boolean_ish(src, index + 1, last):
            yield Edit(start, end, f"!({text})", f"negated return value '{shorten(text)}'")


JsOperator = Callable[[JsSource], Iterator[Edit]]

JS_OPERATORS: Mapping[str, JsOperator] = MappingProxyType(
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
        "regex": regex,
        "method_swap": method_swap,
    }
)


def js_edits(path: str, source: str, operators: Sequence[str]) -> dict[str, list[Edit]]:
    """Every edit each named operator proposes for one file (tokenizing never fails)."""
    del path  # the same tokens whatever the file is called
    parsed = JsSource(source)
    return {name: list(JS_OPERATORS[name](parsed)) for name in operators}
