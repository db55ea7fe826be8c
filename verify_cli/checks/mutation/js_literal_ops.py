"""JavaScript literal mutants: numbers (integers and decimals), strings, regular expressions, and
the library calls whose mirror image is a likely slip (``startsWith``/``endsWith``, ``Math.min``/
``Math.max``, ...).

Every edit is a token-level splice; mutants that do not parse are dropped by the compile check.
Strings that name modules (``require('x')``, ``import ... from 'x'``) and directives
(``'use strict'``) are left alone: changing them proves nothing about the tests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from verify_cli.checks.mutation.js_tokens import JsSource, JsToken, Kind
from verify_cli.checks.mutation.model import Edit, shorten

_DECIMAL = re.compile(r"(0|[1-9]\d*)(n?)")
_FLOAT = re.compile(r"(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+")
_MODULE_CALLS = frozenset({"require", "import"})


def number_edits(token: JsToken) -> Iterator[Edit]:
    """Integers to n+1 and n-1 (0 to 1); decimals to x+1, x-1 and x/2 (0 to 1)."""
    decimal = _DECIMAL.fullmatch(token.text)
    if decimal is not None:
        value, suffix = int(decimal[1]), decimal[2]
        for new in (1,) if value == 0 else (value + 1, value - 1):
            text = f"{new}{suffix}"
            yield Edit(token.start, token.end, text, f"replaced {token.text} with {text}")
        return
    if _FLOAT.fullmatch(token.text) is None:
        return  # hex, octal, binary, separators: left alone
    number = float(token.text)
    if not math.isfinite(number):
        return
    options = (1.0,) if number == 0 else (number + 1.0, number - 1.0, number / 2)
    seen: set[float] = set()
    for other in options:
        if not math.isfinite(other) or other == number or other in seen:
            continue
        seen.add(other)
        text = repr(other)
        text = f"({text})" if text.startswith("-") else text
        yield Edit(token.start, token.end, text, f"replaced {token.text} with {text}")


def _is_module_name(src: JsSource, index: int) -> bool:
    if src.is_name(index - 1, "from") or src.is_name(index - 1, "import"):
        return True
    return src.is_punct(index - 1, "(") and src.is_name(index - 2, *_MODULE_CALLS)


def _is_directive(src: JsSource, index: int) -> bool:
    token = src.tokens[index]
    if token.text[1:-1] not in ("use strict", "use client", "use server"):
        return False
    return index == 0 or src.is_punct(index - 1, ";", "{")


def string_edits(src: JsSource, index: int) -> Iterator[Edit]:
    """A string literal to ``''`` (an empty one to ``'XX'``); a template literal without
    substitutions likewise."""
    token = src.tokens[index]
    if token.kind is Kind.TEMPLATE and "${" in token.text:
        return
    if _is_module_name(src, index) or _is_directive(src, index):
        return
    if src.is_punct(index + 1, ":") and src.is_punct(index - 1, "{", ","):
        return  # an object key: the same as a name key
    quote = token.text[0]
    empty = len(token.text) <= 2
    new = f"{quote}XX{quote}" if empty else f"{quote}{quote}"
    yield Edit(token.start, token.end, new, f"replaced {shorten(token.text)} with {new}")


# -- regular expressions ------------------------------------------------------------------------


def _regex_parts(text: str) -> tuple[str, str] | None:
    end = text.rfind("/")
    if end <= 0:
        return None
    return text[1:end], text[end + 1 :]


def _unescaped(body: str) -> Iterator[tuple[int, str, bool]]:
    """(index, character, inside a character class) of each character not escaped by ``\\``."""
    index = 0
    in_class = False
    while index < len(body):
        char = body[index]
        if char == "\\":
            index += 2
            continue
        yield index, char, in_class
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        index += 1


def regex_edits(token: JsToken) -> Iterator[Edit]:
    """Anchors dropped, character classes negated (``[a]``/``[^a]``, ``\\d``/``\\D``, ...),
    quantifiers ``+``, ``*`` and ``?`` dropped, flags dropped: one change each."""
    parts = _regex_parts(token.text)
    if parts is None:
        return
    body, flags = parts

    def edit(new_body: str, new_flags: str, what: str) -> Edit:
        return Edit(token.start, token.end, f"/{new_body}/{new_flags}", f"{what} in regex {shorten(token.text)}")

    chars = list(_unescaped(body))
    for i, char, in_class in chars:
        if in_class:
            continue  # inside [...]: its own characters
        if char == "^" and i == 0:
            yield edit(body[1:], flags, "dropped the '^' anchor")
        elif char == "$" and i == len(body) - 1:
            yield edit(body[:-1], flags, "dropped the '$' anchor")
        elif char == "[":
            if body[i + 1 : i + 2] == "^":
                yield edit(body[: i + 1] + body[i + 2 :], flags, "un-negated a character class")
            else:
                yield edit(body[: i + 1] + "^" + body[i + 1 :], flags, "negated a character class")
        elif char in "+*?" and i > 0 and body[i - 1] not in "(|":
            if char == "?" and body[i - 1] in "+*?}":
                continue  # a lazy marker, not a quantifier
            yield edit(body[:i] + body[i + 1 :], flags, f"dropped the quantifier '{char}'")
    for match in re.finditer(r"(?<!\\)((?:\\\\)*)\\([dwsDWS])", body):
        letter = match.group(2)
        swapped = letter.swapcase()
        at = match.start(2)
        yield edit(body[:at] + swapped + body[at + 1 :], flags, f"replaced '\\{letter}' with '\\{swapped}'")
    for k, flag in enumerate(flags):
        if flag in "gimsuy":
            yield edit(body, flags[:k] + flags[k + 1 :], f"dropped the '{flag}' flag")


# -- library calls --------------------------------------------------------------------------------

#: Methods and ``Math`` functions and what a slip turns each into.
METHOD_SWAPS: dict[str, tuple[str, ...]] = {
    "startsWith": ("endsWith",), "endsWith": ("startsWith",),
    "toUpperCase": ("toLowerCase",), "toLowerCase": ("toUpperCase",),
    "trim": ("trimStart", "trimEnd"), "trimStart": ("trimEnd",), "trimEnd": ("trimStart",),
    "padStart": ("padEnd",), "padEnd": ("padStart",),
    "some": ("every",), "every": ("some",),
    "indexOf": ("lastIndexOf",), "lastIndexOf": ("indexOf",),
    "find": ("findLast",), "findIndex": ("findLastIndex",),
    "min": ("max",), "max": ("min",), "floor": ("ceil",), "ceil": ("floor",), "round": ("floor",),
    "push": ("unshift",), "unshift": ("push",), "pop": ("shift",), "shift": ("pop",),
    "add": ("delete",), "has": ("delete",),
}  # fmt: skip
#: Calls whose removal leaves a value of the same kind: ``a.filter(f)`` to ``a``.
REMOVABLE_CALLS = frozenset({"filter", "sort", "reverse", "trim", "toLowerCase", "toUpperCase",
                             "slice", "substring", "map", "flat"})


def method_edits(src: JsSource, index: int) -> Iterator[Edit]:
    """``.name(`` swapped for its mirror image, or the whole ``.name(...)`` call removed."""
    token = src.tokens[index]
    if not src.is_property(index) or not src.is_punct(index + 1, "("):
        return
    for new in METHOD_SWAPS.get(token.text, ()):
        yield Edit(token.start, token.end, new, f"replaced .{token.text}() with .{new}()")
    close = src.pairs.get(index + 1)
    if token.text in REMOVABLE_CALLS and close is not None and not src.is_punct(index - 1, "?."):
        dot = src.tokens[index - 1]
        yield Edit(dot.start, src.tokens[close].end, "", f"removed the .{token.text}(...) call")
