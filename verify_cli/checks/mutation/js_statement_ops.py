"""JavaScript statement and call mutants: statements removed, last call arguments dropped.

Statements are found on tokens: a statement starts after ``;``, ``{``, ``}``, an ``if``/``for``/
``while`` header, ``else``/``do``, or a line break where automatic semicolon insertion ends the
previous one. Only statements whose removal leaves valid code are removed: expression statements
that call, assign or update something, ``break``, ``continue`` and ``throw``. Declarations
(``const``, ``let``, ``function``, ...) are kept: removing one only breaks a later reference.
"""

from __future__ import annotations

from collections.abc import Iterator

from verify_cli.checks.mutation.js_tokens import JsSource, Kind, ends_operand
from verify_cli.checks.mutation.model import Edit, shorten

_NOT_EXPRESSION_START = frozenset({
    "const", "let", "var", "function", "class", "if", "for", "while", "do", "return", "switch",
    "try", "catch", "finally", "else", "import", "export", "case", "default", "async", "yield",
    "await", "break", "continue", "throw", "debugger", "with", "in", "of", "instanceof", "typeof",
    "void", "delete", "new", "static", "get", "set",
})  # fmt: skip
_ASSIGNMENTS = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "**=", "<<=", ">>=", ">>>=", "&=",
                          "|=", "^=", "&&=", "||=", "??=", "++", "--"})
_HEADERS = frozenset({"if", "for", "while", "with"})
_NOT_CALLEES = _HEADERS | {"switch", "catch", "function", "return", "typeof", "void", "delete",
                           "await", "yield", "in", "of", "new", "else", "do", "case"}


def _starts_statement(src: JsSource, index: int) -> bool:
    if index == 0:
        return True
    previous = src.tokens[index - 1]
    if previous.kind is Kind.PUNCT and previous.text in (";", "{", "}"):
        if previous.text == "}":
            opener = src.pairs.get(index - 1)
            # ``}`` of a block, not of an object literal or a template's substitution.
            return opener is not None and not src.is_punct(opener - 1, "=", "(", ",", ":", "?", "return")
        return previous.text != "{" or not src.is_punct(index + 1, ":")  # not an object literal
    if src.is_name(index - 1, "else", "do") and not src.is_property(index - 1):
        return True
    if previous.kind is Kind.PUNCT and previous.text == ")":
        opener = src.pairs.get(index - 1)
        return opener is not None and src.is_name(opener - 1, *_HEADERS) and not src.is_property(opener - 1)
    token = src.tokens[index]
    return token.newline_before and ends_operand(previous)


def _statement_end(src: JsSource, first: int) -> int:
    """Index of the last token of the statement starting at ``first`` (its ``;`` included)."""
    tokens = src.tokens
    depth = 0
    index = first
    while index < len(tokens):
        token = tokens[index]
        if depth == 0 and index > first and token.newline_before and ends_operand(tokens[index - 1]) \
                and token.kind in (Kind.NAME, Kind.NUMBER, Kind.STRING, Kind.TEMPLATE) \
                and token.text not in ("in", "of", "instanceof"):
            return index - 1  # automatic semicolon insertion
        if token.kind is Kind.PUNCT:
            if token.text in ("(", "[", "{"):
                depth += 1
            elif token.text in (")", "]", "}"):
                if depth == 0:
                    return index - 1
                depth -= 1
            elif token.text == ";" and depth == 0:
                return index
        index += 1
    return len(tokens) - 1


def _has_effect(src: JsSource, first: int, last: int) -> bool:
    """A call, an assignment or an update at the statement's top level."""
    depth = 0
    for index in range(first, last + 1):
        token = src.tokens[index]
        if token.kind is not Kind.PUNCT:
            continue
        if token.text in _ASSIGNMENTS and depth == 0:
            return True
        if token.text == "(" and index > first and ends_operand(src.token(index - 1)):
            return True
        if token.text in ("(", "[", "{"):
            depth += 1
        elif token.text in (")", "]", "}"):
            depth -= 1
    return False


def stmt_delete(src: JsSource) -> Iterator[Edit]:
    """An expression statement that calls, assigns or updates, ``break``, ``continue`` or
    ``throw`` replaced by an empty statement."""
    for index, token in enumerate(src.tokens):
        if token.kind not in (Kind.NAME, Kind.PUNCT) or src.is_property(index):
            continue
        if token.kind is Kind.PUNCT and token.text not in ("++", "--", "(", "["):
            continue
        if not _starts_statement(src, index):
            continue
        last = _statement_end(src, index)
        if last < index:
            continue
        close = src.pairs.get(index + 1) if src.is_punct(index + 1, "(") else None
        if close is not None and src.is_punct(close + 1, "{"):
            continue  # a method definition in a class or object literal, not a call
        keyword = token.kind is Kind.NAME and token.text in ("break", "continue", "throw")
        if not keyword and (token.text in _NOT_EXPRESSION_START or not _has_effect(src, index, last)):
            continue
        start, end = token.start, src.tokens[last].end
        text = src.source[start:end]
        yield Edit(start, end, ";", f"deleted statement '{shorten(text)}'")


def arg_change(src: JsSource) -> Iterator[Edit]:
    """Drop the last argument of a call with two or more (no spread)."""
    for index, token in enumerate(src.tokens):
        if not (token.kind is Kind.PUNCT and token.text == "(") or index not in src.pairs:
            continue
        callee = src.token(index - 1)
        if callee is None or not ends_operand(callee):
            continue
        if callee.kind is Kind.NAME and callee.text in _NOT_CALLEES and not src.is_property(index - 1):
            continue
        close = src.pairs[index]
        if src.is_punct(close + 1, "{", "=>"):
            continue  # a parameter list
        commas = [i for i in range(index + 1, close) if src.enclosing.get(i) == index
                  and src.is_punct(i, ",")]
        if not commas or any(src.is_punct(i, "...") and src.enclosing.get(i) == index
                             for i in range(index + 1, close)):
            continue
        last_comma = commas[-1]
        if last_comma == close - 1:  # a trailing comma: the argument before it is the last
            if len(commas) < 2:
                continue
            last_comma = commas[-2]
        text = src.source[src.tokens[last_comma + 1].start : src.tokens[close - 1].end]
        yield Edit(src.tokens[last_comma].start, src.tokens[close - 1].end, "",
                   f"dropped last argument '{shorten(text)}'")
