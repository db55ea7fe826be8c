"""From source files to a sampled, compile-checked set of mutants."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from verify_cli.checks.mutation.equivalence import python_equivalent
from verify_cli.checks.mutation.js_check import javascript_compiles
from verify_cli.checks.mutation.js_ops import JS_OPERATORS, js_edits
from verify_cli.checks.mutation.model import Edit, LineIndex, Mutant, MutantSet
from verify_cli.checks.mutation.python_ops import PYTHON_OPERATORS, python_compiles, python_edits
from verify_cli.errors import UsageError

FindEdits = Callable[[str, str, Sequence[str]], dict[str, list[Edit]] | None]
CheckCompiles = Callable[[Mapping[str, str], Sequence[tuple[str, str]]], list[bool | None]]


@dataclass(frozen=True)
class Language:
    """How mutants are made and checked for one language."""

    suffixes: tuple[str, ...]
    operators: tuple[str, ...]  # in the order their mutants are listed
    find_edits: FindEdits  # (path, source, operators) -> edits per operator; None: unparsable
    check_compiles: CheckCompiles  # (originals, [(path, mutated)]) -> True/False/None (unknown)
    #: (path, original, mutated) -> proven to behave as the original; None: never proven
    equivalent: Callable[[str, str, str], bool] | None = None


def _python_compile_all(
    originals: Mapping[str, str], mutants: Sequence[tuple[str, str]]
) -> list[bool | None]:
    del originals  # Python needs no hint from the original file
    return [python_compiles(path, source) for path, source in mutants]


LANGUAGES: Mapping[str, Language] = MappingProxyType(
    {
        "python": Language((".py",), tuple(PYTHON_OPERATORS), python_edits, _python_compile_all,
                           python_equivalent),
        "javascript": Language(
            (".js", ".mjs", ".cjs"), tuple(JS_OPERATORS), js_edits, javascript_compiles
        ),
    }
)


def operator_names(language: str) -> tuple[str, ...]:
    """The operators ``language`` supports, in listing order."""
    return _language(language).operators


def _language(language: str) -> Language:
    spec = LANGUAGES.get(language)
    if spec is None:
        raise UsageError(
            f"no mutation operators for language {language!r}",
            hint=f"use one of: {', '.join(LANGUAGES)}",
        )
    return spec


def _selected_operators(spec: Language, operators: Collection[str] | None) -> tuple[str, ...]:
    if operators is None:
        return spec.operators
    known = {name for lang in LANGUAGES.values() for name in lang.operators}
    unknown = sorted(set(operators) - known)
    if unknown:
        raise UsageError(
            f"unknown mutation operator(s): {', '.join(unknown)}",
            hint=f"known operators: {', '.join(sorted(known))}",
        )
    # An operator of another language only is allowed and yields nothing here.
    return tuple(name for name in spec.operators if name in operators)


def _check_limit(name: str, value: int | None) -> None:
    if value is not None and value < 0:
        raise UsageError(f"{name} must be 0 or more, not {value}")


def _file_mutants(
    path: str, source: str, edits: Mapping[str, list[Edit]], operators: Sequence[str]
) -> list[Mutant]:
    """The file's mutants in source order; ids are numbered before duplicates are dropped."""
    index = LineIndex(source)
    numbered: list[tuple[int, int, Mutant]] = []
    for rank, operator in enumerate(operators):
        per_line: dict[int, int] = {}
        for edit in sorted(edits[operator], key=lambda e: (e.start, e.end)):
            line, col = index.position(edit.start)
            k = per_line.get(line, 0)
            per_line[line] = k + 1
            mutant = Mutant(
                id=f"{path}:{line}:{operator}:{k}",
                path=path,
                operator=operator,
                line=line,
                col=col,
                description=edit.description,
                original_source=source,
                mutated_source=edit.apply(source),
            )
            numbered.append((rank, edit.start, mutant))
    seen = {source}
    unique: list[tuple[int, int, Mutant]] = []
    for item in numbered:  # in operator order, so the earlier operator keeps a duplicate
        if item[2].mutated_source not in seen:
            seen.add(item[2].mutated_source)
            unique.append(item)
    unique.sort(key=lambda item: (item[1], item[0]))
    return [mutant for _, _, mutant in unique]


def _sample(
    mutants: list[Mutant],
    rng: random.Random,
    max_per_operator: int | None,
    max_mutants: int | None,
) -> list[Mutant]:
    groups: dict[str, list[Mutant]] = {}
    for mutant in mutants:
        groups.setdefault(mutant.operator, []).append(mutant)
    names = sorted(groups)
    if max_per_operator is not None:
        for name in names:
            if len(groups[name]) > max_per_operator:
                groups[name] = rng.sample(groups[name], max_per_operator)
    chosen = [mutant for name in names for mutant in groups[name]]
    if max_mutants is not None and len(chosen) > max_mutants:
        # Round-robin over shuffled operators, so each gets an equal share while it lasts.
        queues = [
            rng.sample(groups[name], len(groups[name])) for name in rng.sample(names, len(names))
        ]
        rounds = itertools.chain.from_iterable(itertools.zip_longest(*queues))
        chosen = [mutant for mutant in rounds if mutant is not None][:max_mutants]
    position = {id(mutant): order for order, mutant in enumerate(mutants)}
    return sorted(chosen, key=lambda mutant: position[id(mutant)])


def generate_mutants(
    files: Mapping[str, str],
    *,
    language: str,
    seed: int = 0,
    max_mutants: int | None = None,
    max_per_operator: int | None = None,
    operators: Collection[str] | None = None,
) -> MutantSet:
    """The mutants of ``files`` (relative path to source) for ``language``.

    Only files with the language's suffixes are mutated (``.py``; ``.js``/``.mjs``/``.cjs``).
    Mutants that do not compile are dropped and counted; mutants proven equivalent to the
    original (Python: the same bytecode, positions aside) are returned apart, unsampled.
    Sampling is deterministic for a given ``seed``: at most ``max_per_operator`` per operator
    first, then at most ``max_mutants`` in all, shared evenly between operators. ``operators``
    restricts the operators used; a name
    no language knows raises :class:`UsageError`.
    """
    spec = _language(language)
    selected = _selected_operators(spec, operators)
    _check_limit("max_mutants", max_mutants)
    _check_limit("max_per_operator", max_per_operator)

    originals: dict[str, str] = {}
    candidates: list[Mutant] = []
    skipped: list[str] = []
    for path in sorted(files):
        if not path.endswith(spec.suffixes):
            continue
        source = files[path]
        edits = spec.find_edits(path, source, selected)
        if edits is None:
            skipped.append(path)
            continue
        originals[path] = source
        candidates.extend(_file_mutants(path, source, edits, selected))

    verdicts = spec.check_compiles(originals, [(m.path, m.mutated_source) for m in candidates])
    compilable = [m for m, ok in zip(candidates, verdicts, strict=True) if ok is not False]
    unchecked = {id(m) for m, ok in zip(candidates, verdicts, strict=True) if ok is None}

    by_operator = dict.fromkeys(selected, 0)
    for mutant in compilable:
        by_operator[mutant.operator] += 1
    # Proven equivalent mutants are set apart before sampling: they take no share of the budget.
    same = spec.equivalent
    equivalent = [m for m in compilable if same is not None
                  and same(m.path, m.original_source, m.mutated_source)]
    proven = {id(m) for m in equivalent}
    distinct = [m for m in compilable if id(m) not in proven]
    chosen = _sample(distinct, random.Random(seed), max_per_operator, max_mutants)
    return MutantSet(
        mutants=chosen,
        equivalent=equivalent,
        dropped_uncompilable=len(candidates) - len(compilable),
        by_operator=by_operator,
        compile_unchecked=sum(1 for m in chosen if id(m) in unchecked),
        skipped_files=skipped,
    )
