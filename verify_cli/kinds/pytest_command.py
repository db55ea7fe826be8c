"""Which task commands can go warm: a command recognised as exactly one pytest run.

Only commands that are recognisably ``python -m pytest ARGS`` or ``pytest ARGS`` (one plain
command, no shell syntax that could change what runs) go warm; anything else runs cold.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from typing import Any

from verify_cli.sandbox.base import WarmInvocation

_PYTHON_NAME = re.compile(r"python(3(\.\d+)?)?")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNQUOTED_SPECIAL = set(";&|<>()`\\*?[]{}~#\n\r")
_SPLITTING = set(" \t\n*?[")


# Which commands go warm


def split_simple_command(command: str, env: Mapping[str, str]) -> list[str] | None:
    """The words ``sh`` would run for ``command``, or None unless it is one plain command.

    Accepted: words, single and double quotes, ``$NAME`` and ``${NAME}``. Refused (None): lists,
    pipes, redirections, subshells, backslashes, globs, tildes, comments, command substitution,
    and unquoted expansions that would be split, globbed or vanish.
    """
    words: list[str] = []
    cur: list[str] = []
    started = False
    i, n = 0, len(command)

    def expand(j: int) -> tuple[str, int] | None:
        # command[j] == "$"
        if command.startswith("${", j):
            end = command.find("}", j + 2)
            name = command[j + 2:end] if end > 0 else ""
            if not _VAR.fullmatch(name):
                return None
            return env.get(name, ""), end + 1
        m = _VAR.match(command, j + 1)
        if m is None:
            return None
        return env.get(m.group(0), ""), m.end()

    while i < n:
        c = command[i]
        if c in " \t":
            if started:
                words.append("".join(cur))
                cur, started = [], False
            i += 1
        elif c == "'":
            end = command.find("'", i + 1)
            if end < 0:
                return None
            cur.append(command[i + 1:end])
            started, i = True, end + 1
        elif c == '"':
            i += 1
            while i < n and command[i] != '"':
                ch = command[i]
                if ch in "`\\":
                    return None
                if ch == "$":
                    got = expand(i)
                    if got is None:
                        return None
                    cur.append(got[0])
                    i = got[1]
                else:
                    cur.append(ch)
                    i += 1
            if i >= n:
                return None
            started, i = True, i + 1
        elif c == "$":
            got = expand(i)
            if got is None or not got[0] or any(ch in _SPLITTING for ch in got[0]):
                return None
            cur.append(got[0])
            started, i = True, got[1]
        elif c in _UNQUOTED_SPECIAL:
            return None
        else:
            cur.append(c)
            started, i = True, i + 1
    if started:
        words.append("".join(cur))
    return words or None


def _which(word: str, path: str) -> str | None:
    if "/" in word:
        return word if os.access(word, os.X_OK) and os.path.isfile(word) else None
    return shutil.which(word, path=path)


def parse_pytest_command(command: str, env: Mapping[str, str]) -> WarmInvocation | None:
    """``command`` as one pytest run, or None when it is anything else (it then runs cold)."""
    words = split_simple_command(command, env)
    if not words or "=" in words[0]:
        return None
    path = env.get("PATH", "")
    first = os.path.basename(words[0])
    if _PYTHON_NAME.fullmatch(first) and words[1:3] == ["-m", "pytest"]:
        interpreter = _which(words[0], path)
        if interpreter is None:
            return None
        return WarmInvocation("module", interpreter, "", words[0], tuple(words[3:]))
    if first in ("pytest", "py.test"):
        script = _which(words[0], path)
        if script is None:
            return None
        try:
            with open(script, "rb") as fh:
                line = fh.readline(512).decode("utf-8", "replace").strip()
        except OSError:
            return None
        shebang = line[2:].strip() if line.startswith("#!") else ""
        if not shebang or " " in shebang or not os.access(shebang, os.X_OK):
            return None
        return WarmInvocation("script", shebang, script, words[0], tuple(words[1:]))
    return None


def parse_pytest_words(command: str, env: Mapping[str, str]) -> tuple[str, str, tuple[str, ...]] | None:
    """``command`` as (mode, first word, pytest's arguments) without looking for the programs on
    this machine (the docker backend finds them in the container, as the command's shell would).

    Only variables ``env`` holds may be expanded: one it lacks (the image may set it) is refused.
    """
    missing: list[str] = []

    class _Known(dict[str, str]):
        def get(self, key: str, default: Any = None) -> Any:
            if key not in self:
                missing.append(key)
            return super().get(key, default)

    words = split_simple_command(command, _Known(env))
    if not words or missing or "=" in words[0] or ("/" in words[0] and not words[0].startswith("/")):
        return None
    first = os.path.basename(words[0])
    if _PYTHON_NAME.fullmatch(first) and words[1:3] == ["-m", "pytest"]:
        return "module", words[0], tuple(words[3:])
    if first in ("pytest", "py.test"):
        return "script", words[0], tuple(words[1:])
    return None


__all__ = ["WarmInvocation", "parse_pytest_command", "parse_pytest_words", "split_simple_command"]
