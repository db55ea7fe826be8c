"""A real project's module has tens of thousands of mutation sites (more-itertools' more.py: audit
stalled for minutes building and compiling a whole mutated file for each before sampling 50).
Above DRAW_FIRST_ABOVE edits, mutants are drawn first and only the drawn ones built and checked."""

from __future__ import annotations

import pytest

from verify_cli.checks.mutation import generate_mutants
from verify_cli.checks.mutation.generate import DRAW_FIRST_ABOVE
from verify_cli.checks.mutation.model import Edit
from verify_cli.checks.mutation.python_ops import python_compiles


def big_module(functions: int) -> str:
    body = ("def f{i}(a, b, items):\n"
            "    total = 0\n"
            "    for x in items:\n"
            "        if x > a and x < b or x == {i}:\n"
            "            total += x * 2 - 1\n"
            "    return total if total >= 0 else -total\n\n")
    return "".join(body.format(i=i) for i in range(functions))


def test_a_large_module_is_sampled_without_building_every_mutant(monkeypatch: pytest.MonkeyPatch) -> None:
    source = big_module(120)
    files = {"pkg/big.py": source}
    built: list[int] = []
    apply = Edit.apply

    def counted(edit: Edit, text: str) -> str:
        built.append(1)
        return apply(edit, text)

    monkeypatch.setattr(Edit, "apply", counted)
    result = generate_mutants(files, language="python", seed=3, max_mutants=50)
    edits = sum(result.by_operator.values())
    assert result.drawn_first and edits > DRAW_FIRST_ABOVE, edits
    # each whole mutated file built holds len(source) characters: every edit's made gigabytes
    # of a real module, and took minutes to compile-check before 50 were sampled
    assert len(built) < 4 * 50, f"{len(built)} mutated files built for a sample of 50 of {edits} edits"
    assert len(result.mutants) == 50
    assert len({m.mutated_source for m in result.mutants}) == 50
    for m in result.mutants:
        assert m.mutated_source != source and python_compiles(m.path, m.mutated_source), m.id
    # an equal share per operator, as the exact path gives
    per_operator: dict[str, int] = {}
    for m in result.mutants:
        per_operator[m.operator] = per_operator.get(m.operator, 0) + 1
    assert len(per_operator) >= 5, per_operator
    # listed in source order, and the same seed draws the same mutants
    assert [(m.line, m.col) for m in result.mutants] == sorted((m.line, m.col) for m in result.mutants)
    again = generate_mutants(files, language="python", seed=3, max_mutants=50)
    assert [m.id for m in again.mutants] == [m.id for m in result.mutants]


def test_a_small_module_keeps_the_exact_counts() -> None:
    result = generate_mutants({"m.py": big_module(3)}, language="python", seed=0, max_mutants=5)
    assert not result.drawn_first
    assert sum(result.by_operator.values()) < DRAW_FIRST_ABOVE
    assert len(result.mutants) == 5
