"""A small JavaScript tokenizer, good enough to find operators in ordinary code, and ``JsSource``:
one file's tokens with their bracket pairs, which every JavaScript operator reads.

Strings, template literals (with their ``${...}`` parts), comments and regular expression
literals each come out as one token, so nothing inside them is ever mutated. Whether ``/``
starts a regex is decided from the previous token, the usual heuristic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    NAME = "name"
    NUMBER = "number"
    STRING = "string"
    TEMPLATE = "template"
    REGEX = "regex"
    PRIVATE = "private"
    PUNCT = "punct"


@dataclass(frozen=True)
class JsToken:
    kind: Kind
    text: str
    start: int
    end: int
    newline_before: bool  # a line break separates it from the previous token


_PUNCTUATORS = sorted(
    [
        ">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=",
        "=>", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=",
        "/=", "%=", "&=", "|=", "^=", "**", "<<", ">>",
        "{", "}", "(", ")", "[", "]", ";", ",", "<", ">", "+", "-", "*", "/", "%", "&", "|",
        "^", "!", "~", "?", ":", "=", ".", "@",
    ],
    key=len,
    reverse=True,
)  # fmt: skip
_IDENTIFIER = re.compile(r"[A-Za-z_$\u0080-\uffff][\w$\u0080-\uffff]*")
_NUMBER = re.compile(
    r"(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+"
    r"|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d[\d_]*)?)n?"
)
_SPACE = frozenset(" \t\r\x0b\x0c\ufeff\xa0")
_LINE_BREAKS = frozenset("\n\u2028\u2029")

# Keywords after which an expression starts: a ``/`` there begins a regex, a ``+`` is unary.
EXPRESSION_KEYWORDS = frozenset(
    {
        "return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw",
        "case", "do", "else", "yield", "await", "extends",
    }
)  # fmt: skip
# Names after which a ``*`` belongs to a generator or an import, not a multiplication.
_NON_OPERAND_NAMES = EXPRESSION_KEYWORDS | {
    "function", "async", "static", "import", "export", "const", "let", "var", "class",
}  # fmt: skip


def ends_operand(token: JsToken | None) -> bool:
    """Whether a binary operator may follow this token (it closes a value)."""
    if token is None:
        return False
    if token.kind is Kind.NAME:
        return token.text not in _NON_OPERAND_NAMES
    if token.kind is Kind.PUNCT:
        return token.text in (")", "]", "++", "--")
    return True


def _regex_allowed(previous: JsToken | None) -> bool:
    if previous is None:
        return True
    if previous.kind is Kind.NAME:
        return previous.text in EXPRESSION_KEYWORDS
    if previous.kind is Kind.PUNCT:
        return previous.text not in (")", "]", "++", "--")
    return False


class _Lexer:
    def __init__(self, source: str) -> None:
        self.source = source
        self.pos = 0

    def lex(self, out: list[JsToken], *, until_close_brace: bool) -> None:
        """Append tokens from ``pos``; inside ``${`` stop after the brace that closes it."""
        source, length = self.source, len(self.source)
        depth = 0
        newline = False
        previous: JsToken | None = None
        while self.pos < length:
            char = source[self.pos]
            if char in _SPACE:
                self.pos += 1
                continue
            if char in _LINE_BREAKS:
                newline = True
                self.pos += 1
                continue
            if source.startswith("//", self.pos) or (self.pos == 0 and source.startswith("#!")):
                end = source.find("\n", self.pos)
                self.pos = length if end < 0 else end
                continue
            if source.startswith("/*", self.pos):
                end = source.find("*/", self.pos + 2)
                end = length if end < 0 else end + 2
                newline = newline or "\n" in source[self.pos : end]
                self.pos = end
                continue
            start = self.pos
            kind = self._scan(char, previous)
            text = source[start : self.pos]
            if until_close_brace and kind is Kind.PUNCT and text in ("{", "}"):
                if text == "}" and depth == 0:
                    return
                depth += 1 if text == "{" else -1
            previous = JsToken(kind, text, start, self.pos, newline)
            out.append(previous)
            newline = False

    def _scan(self, char: str, previous: JsToken | None) -> Kind:
        """Move ``pos`` past the token starting at ``char`` and say what it was."""
        source, pos = self.source, self.pos
        if char in "'\"":
            self.pos = self._string_end(pos, char)
            return Kind.STRING
        if char == "`":
            self._skip_template()
            return Kind.TEMPLATE
        if char.isdigit() or (char == "." and source[pos + 1 : pos + 2].isdigit()):
            number = _NUMBER.match(source, pos)
            self.pos = number.end() if number else pos + 1
            return Kind.NUMBER
        identifier = _IDENTIFIER.match(source, pos + 1 if char == "#" else pos)
        if identifier is not None and (char != "#" or identifier.start() == pos + 1):
            self.pos = identifier.end()
            return Kind.PRIVATE if char == "#" else Kind.NAME
        if char == "/" and _regex_allowed(previous):
            self.pos = self._regex_end(pos)
            return Kind.REGEX
        for punctuator in _PUNCTUATORS:
            if source.startswith(punctuator, pos):
                if punctuator == "?." and source[pos + 2 : pos + 3].isdigit():
                    continue  # ``a?.5:b`` is a conditional
                self.pos = pos + len(punctuator)
                return Kind.PUNCT
        self.pos = pos + 1
        return Kind.PUNCT

    def _string_end(self, pos: int, quote: str) -> int:
        source = self.source
        index = pos + 1
        while index < len(source):
            char = source[index]
            if char == "\\":
                index += 2
            elif char == quote:
                return index + 1
            elif char == "\n":
                return index  # unterminated: stop at the line end
            else:
                index += 1
        return len(source)

    def _skip_template(self) -> None:
        source = self.source
        self.pos += 1
        while self.pos < len(source):
            char = source[self.pos]
            if char == "\\":
                self.pos += 2
            elif char == "`":
                self.pos += 1
                return
            elif source.startswith("${", self.pos):
                self.pos += 2
                self.lex([], until_close_brace=True)  # stops past the closing brace
            else:
                self.pos += 1
        self.pos = min(self.pos, len(source))

    def _regex_end(self, pos: int) -> int:
        source = self.source
        index = pos + 1
        in_class = False
        while index < len(source):
            char = source[index]
            if char == "\\":
                index += 2
                continue
            if char == "\n":
                return index
            if in_class:
                in_class = char != "]"
            elif char == "[":
                in_class = True
            elif char == "/":
                index += 1
                break
            index += 1
        while index < len(source) and (source[index].isalnum() or source[index] in "_$"):
            index += 1
        return min(index, len(source))


def tokenize_js(source: str) -> list[JsToken]:
    """The tokens of ``source``, without comments; never raises on odd input."""
    tokens: list[JsToken] = []
    _Lexer(source).lex(tokens, until_close_brace=False)
    return tokens


_CLOSERS = {"(": ")", "[": "]", "{": "}"}


def match_brackets(tokens: list[JsToken]) -> tuple[dict[int, int], dict[int, int]]:
    """Bracket pairs (open index to close index and back) and each token's innermost opener.

    Unbalanced brackets are left out of the pairs.
    """
    pairs: dict[int, int] = {}
    enclosing: dict[int, int] = {}
    stack: list[int] = []
    for index, token in enumerate(tokens):
        if token.kind is not Kind.PUNCT:
            if stack:
                enclosing[index] = stack[-1]
            continue
        if stack and token.text == _CLOSERS.get(tokens[stack[-1]].text):
            opener = stack.pop()
            pairs[opener] = index
            pairs[index] = opener
        if stack:
            enclosing[index] = stack[-1]
        if token.text in _CLOSERS:
            stack.append(index)
    return pairs, enclosing


class JsSource:
    """One JavaScript file with its tokens and bracket pairs."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize_js(source)
        self.pairs, self.enclosing = match_brackets(self.tokens)

    def token(self, index: int) -> JsToken | None:
        return self.tokens[index] if 0 <= index < len(self.tokens) else None

    def is_punct(self, index: int, *texts: str) -> bool:
        token = self.token(index)
        return token is not None and token.kind is Kind.PUNCT and token.text in texts

    def is_name(self, index: int, *texts: str) -> bool:
        token = self.token(index)
        return token is not None and token.kind is Kind.NAME and token.text in texts

    def is_property(self, index: int) -> bool:
        """Whether the token follows ``.`` or ``?.`` (``a.if`` is a name, not a keyword)."""
        return self.is_punct(index - 1, ".", "?.")
