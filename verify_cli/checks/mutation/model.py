"""What a mutant is: one small, located change to one source file."""

from __future__ import annotations

import difflib
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

_NO_NEWLINE = "\\ No newline at end of file\n"


@dataclass(frozen=True)
class Edit:
    """One text splice an operator proposes: replace ``source[start:end]`` with ``replacement``.

    Offsets count characters of the whole file. ``description`` is the human text of the change.
    """

    start: int
    end: int
    replacement: str
    description: str

    def apply(self, source: str) -> str:
        return source[: self.start] + self.replacement + source[self.end :]


@dataclass(frozen=True)
class Mutant:
    """One mutated version of one file.

    ``id`` is ``"<path>:<line>:<operator>:<k>"``, where ``k`` numbers the mutants of that operator
    on that line in source order; it is the same on every run over the same files, whatever the
    sampling. ``line`` and ``col`` are 1-based and locate the start of the change.
    """

    id: str
    path: str
    operator: str
    line: int
    col: int
    description: str
    original_source: str
    mutated_source: str

    def diff(self) -> str:
        """The change as a unified diff with ``a/<path>`` and ``b/<path>`` headers."""
        lines = difflib.unified_diff(
            self.original_source.splitlines(keepends=True),
            self.mutated_source.splitlines(keepends=True),
            fromfile=f"a/{self.path}",
            tofile=f"b/{self.path}",
        )
        return "".join(line if line.endswith("\n") else f"{line}\n{_NO_NEWLINE}" for line in lines)


@dataclass(frozen=True)
class MutantSet:
    """The mutants chosen for a set of files, with what was counted on the way.

    ``by_operator`` counts the compilable mutants of each operator before sampling;
    ``dropped_uncompilable`` counts mutants that failed to compile and were discarded;
    ``compile_unchecked`` counts returned mutants that could not be compile-checked (for
    JavaScript when ``node`` is missing or cannot parse the original file);
    ``skipped_files`` lists files of the language whose original source did not parse;
    ``equivalent`` holds the mutants proven to behave as the original (never to be graded).
    ``drawn_first``: there were too many edits to build and check every one (a real project's
    modules), so mutants were drawn first and only the drawn ones checked: ``by_operator`` then
    counts edits, and ``dropped_uncompilable`` and ``equivalent`` only drawn mutants.
    """

    mutants: list[Mutant]
    equivalent: list[Mutant] = field(default_factory=list)
    dropped_uncompilable: int = 0
    by_operator: dict[str, int] = field(default_factory=dict)
    compile_unchecked: int = 0
    skipped_files: list[str] = field(default_factory=list)
    drawn_first: bool = False


class LineIndex:
    """Converts character offsets of one source text to 1-based (line, column)."""

    def __init__(self, source: str) -> None:
        self._starts: Sequence[int] = [0, *(m.end() for m in re.finditer("\n", source))]

    def line_start(self, line: int) -> int:
        return self._starts[line - 1]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1


def shorten(text: str, limit: int = 40) -> str:
    """One-line excerpt of source text for a description."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
