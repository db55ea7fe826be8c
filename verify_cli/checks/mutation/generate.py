"""From source files to a sampled, compile-checked set of mutants."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from verify_cli.checks.mutation.equivalence import python_equivalent
from verify_cli.checks.mutation.js_check import javascript_compiles
from verify_cli.checks.mutation.js_ops import JS_OPERATORS, js_edits
from verify_cli.checks.mutation.model import Edit, LineIndex, Mutant, MutantSet
from verify_cli.checks.mutation.python_ops import PYTHON_OPERATORS, python_compiles, python_edits
from verify_cli.errors import UsageError

#: Above this many edits (with a sample size asked for), mutants are drawn before they are built
#: and checked: each drawn one is built, compiled and proven distinct until the sample is full.
#: Below it every mutant is built and checked first, so the counts are exact.
DRAW_FIRST_ABOVE = 2000

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


@dataclass(frozen=True)
class _Site:
    """One edit an operator proposes, located and named, with its file not yet rewritten (a
    real project's module has tens of thousands: building each whole mutated file first costs
    gigabytes)."""

    rank: int  # the operator's place in listing order
    id: str
    path: str
    operator: str
    line: int
    col: int
    edit: Edit
    source: str

    def build(self) -> Mutant:
        return Mutant(id=self.id, path=self.path, operator=self.operator, line=self.line, col=self.col,
                      description=self.edit.description, original_source=self.source,
                      mutated_source=self.edit.apply(self.source))


def _file_sites(
    path: str, source: str, edits: Mapping[str, list[Edit]], operators: Sequence[str]
) -> list[_Site]:
    """The file's edits in operator order; ids number each operator's edits of a line in
    source order."""
    index = LineIndex(source)
    sites: list[_Site] = []
    for rank, operator in enumerate(operators):
        per_line: dict[int, int] = {}
        for edit in sorted(edits[operator], key=lambda e: (e.start, e.end)):
            line, col = index.position(edit.start)
            k = per_line.get(line, 0)
            per_line[line] = k + 1
            sites.append(_Site(rank, f"{path}:{line}:{operator}:{k}", path, operator, line, col, edit, source))
    return sites


def _file_mutants(sites: Sequence[_Site]) -> list[Mutant]:
    """One file's mutants in source order; ids are numbered before duplicates are dropped."""
    seen = {site.source for site in sites[:1]}
    unique: list[tuple[int, int, Mutant]] = []
    for site in sites:  # in operator order, so the earlier operator keeps a duplicate
        mutant = site.build()
        if mutant.mutated_source not in seen:
            seen.add(mutant.mutated_source)
            unique.append((site.edit.start, site.rank, mutant))
    unique.sort(key=lambda item: (item[0], item[1]))
    return [mutant for _, _, mutant in unique]


_Drawn = TypeVar("_Drawn", Mutant, "_Site")


def _per_operator(
    items: Sequence[_Drawn], rng: random.Random, max_per_operator: int | None
) -> tuple[dict[str, list[_Drawn]], list[str]]:
    """``items`` grouped by operator (names sorted), each group cut to ``max_per_operator``."""
    groups: dict[str, list[_Drawn]] = {}
    for item in items:
        groups.setdefault(item.operator, []).append(item)
    names = sorted(groups)
    if max_per_operator is not None:
        for name in names:
            if len(groups[name]) > max_per_operator:
                groups[name] = rng.sample(groups[name], max_per_operator)
    return groups, names


def _sample(
    mutants: list[Mutant],
    rng: random.Random,
    max_per_operator: int | None,
    max_mutants: int | None,
) -> list[Mutant]:
    groups, names = _per_operator(mutants, rng, max_per_operator)
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
    sites: dict[str, list[_Site]] = {}
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
        sites[path] = _file_sites(path, source, edits, selected)
    if max_mutants is not None and sum(map(len, sites.values())) > DRAW_FIRST_ABOVE:
        return _drawn_first(spec, originals, [s for path in sorted(sites) for s in sites[path]], selected,
                            random.Random(seed), max_per_operator, max_mutants, skipped)
    candidates = [mutant for path in sorted(sites) for mutant in _file_mutants(sites[path])]

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


def _drawn_first(
    spec: Language,
    originals: Mapping[str, str],
    sites: list[_Site],
    operators: Sequence[str],
    rng: random.Random,
    max_per_operator: int | None,
    max_mutants: int,
    skipped: list[str],
) -> MutantSet:
    """The sample of a large set of edits (a real project's modules): edits are drawn as
    :func:`_sample` draws mutants (an equal share per operator, round-robin over shuffled
    operators), and each drawn one is built, compile-checked and proven distinct in batches until
    ``max_mutants`` are kept. ``by_operator`` then counts edits, not compilable mutants, and
    ``dropped_uncompilable`` only the drawn ones that failed."""
    groups, names = _per_operator(sites, rng, max_per_operator)
    queues = [rng.sample(groups[name], len(groups[name])) for name in rng.sample(names, len(names))]
    drawn = (site for site in itertools.chain.from_iterable(itertools.zip_longest(*queues)) if site is not None)
    seen = {path: {source} for path, source in originals.items()}
    chosen: list[Mutant] = []
    equivalent: list[Mutant] = []
    unchecked: set[int] = set()
    dropped = 0
    while len(chosen) < max_mutants:
        batch: list[Mutant] = []
        for site in itertools.islice(drawn, 2 * (max_mutants - len(chosen)) + 8):
            mutant = site.build()
            if mutant.mutated_source not in seen[mutant.path]:
                seen[mutant.path].add(mutant.mutated_source)
                batch.append(mutant)
        if not batch:
            break
        verdicts = spec.check_compiles(originals, [(m.path, m.mutated_source) for m in batch])
        for mutant, ok in zip(batch, verdicts, strict=True):
            if ok is False:
                dropped += 1
            elif spec.equivalent is not None and spec.equivalent(mutant.path, mutant.original_source,
                                                                 mutant.mutated_source):
                equivalent.append(mutant)
            elif len(chosen) < max_mutants:
                chosen.append(mutant)
                if ok is None:
                    unchecked.add(id(mutant))
    by_operator = dict.fromkeys(operators, 0)
    for site in sites:
        by_operator[site.operator] += 1
    order = {site.id: n for n, site in enumerate(sorted(sites, key=lambda s: (s.path, s.edit.start, s.rank)))}
    chosen.sort(key=lambda m: order[m.id])
    return MutantSet(mutants=chosen, equivalent=equivalent, dropped_uncompilable=dropped, by_operator=by_operator,
                     compile_unchecked=sum(1 for m in chosen if id(m) in unchecked), skipped_files=skipped,
                     drawn_first=True)
