"""Mutant generation: each operator's exact output, what is never touched, sampling, diffs."""

from __future__ import annotations

import shutil
from collections import Counter

import pytest

from verify_cli.checks.mutation import (
    Mutant,
    MutantSet,
    generate_mutants,
    operator_names,
)
from verify_cli.checks.mutation.js_tokens import Kind, tokenize_js
from verify_cli.errors import UsageError

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs node on PATH")


def python_mutants(source: str, operator: str | None = None) -> list[Mutant]:
    operators = None if operator is None else [operator]
    result = generate_mutants({"solution.py": source}, language="python", operators=operators)
    return result.mutants


def python_sources(source: str, operator: str) -> list[str]:
    return [m.mutated_source for m in python_mutants(source, operator)]


# -- Python operators ------------------------------------------------------------------------


def test_cmp_swap_flips_each_comparison() -> None:
    source = "def f(a, b, c):\n    return a < b and b is not None and c not in (a, b)\n"
    assert python_sources(source, "cmp_swap") == [
        "def f(a, b, c):\n    return a > b and b is not None and c not in (a, b)\n",
        "def f(a, b, c):\n    return a < b and b is None and c not in (a, b)\n",
        "def f(a, b, c):\n    return a < b and b is not None and c in (a, b)\n",
    ]


def test_cmp_swap_finds_the_operator_between_parenthesised_operands() -> None:
    source = "ok = (x)  ==  (y + 1)  # equal?\n"
    assert python_sources(source, "cmp_swap") == ["ok = (x)  !=  (y + 1)  # equal?\n"]


def test_cmp_boundary_moves_the_boundary() -> None:
    source = "inside = 0 <= i < n\n"
    assert python_sources(source, "cmp_boundary") == [
        "inside = 0 < i < n\n",
        "inside = 0 <= i <= n\n",
    ]


def test_arith_swap_covers_binary_and_augmented_operators() -> None:
    source = "total += a + b // 2\n"
    assert python_sources(source, "arith_swap") == [
        "total -= a + b // 2\n",
        "total += a - b // 2\n",
        "total += a + b * 2\n",
        "total += a + b / 2\n",
    ]


def test_bool_op_swaps_one_operator_at_a_time() -> None:
    source = "ready = a and b or c\n"
    assert python_sources(source, "bool_op") == [
        "ready = a or b or c\n",
        "ready = a and b and c\n",
    ]


def test_negate_cond_negates_if_while_ternary_and_removes_not() -> None:
    source = (
        "while n > 0:\n"
        "    if not done:\n"
        "        n = a if flag else b\n"
    )  # fmt: skip
    assert python_sources(source, "negate_cond") == [
        "while not (n > 0):\n    if not done:\n        n = a if flag else b\n",
        "while n > 0:\n    if done:\n        n = a if flag else b\n",
        "while n > 0:\n    if not done:\n        n = a if not (flag) else b\n",
    ]


def test_const_change_nudges_ints_and_flips_bools_and_strings() -> None:
    source = 'limit, start, debug, name, blank = 3, 0, True, "abc", ""\n'
    prefix = "limit, start, debug, name, blank = "
    assert python_sources(source, "const_change") == [
        prefix + '4, 0, True, "abc", ""\n',
        prefix + '2, 0, True, "abc", ""\n',
        prefix + '3, 1, True, "abc", ""\n',
        prefix + '3, 0, False, "abc", ""\n',
        prefix + '3, 0, True, "", ""\n',
        prefix + '3, 0, True, "abc", "XX"\n',
    ]


def test_empty_collection_empties_literals_but_not_assignment_targets() -> None:
    source = "a, b = [1], {2}\nc = {'k': 1}\nd = ()\n"
    assert python_sources(source, "empty_collection") == [
        "a, b = [], {2}\nc = {'k': 1}\nd = ()\n",
        "a, b = ()\nc = {'k': 1}\nd = ()\n",
        "a, b = [1], set()\nc = {'k': 1}\nd = ()\n",
        "a, b = [1], {2}\nc = {}\nd = ()\n",
    ]


def test_return_value_returns_none_and_negates_boolean_returns() -> None:
    source = "def f(x):\n    if x:\n        return x + 1\n    return x > 2\n"
    assert python_sources(source, "return_value") == [
        "def f(x):\n    if x:\n        return None\n    return x > 2\n",
        "def f(x):\n    if x:\n        return x + 1\n    return None\n",
        "def f(x):\n    if x:\n        return x + 1\n    return not (x > 2)\n",
    ]


def test_stmt_delete_replaces_whole_statements_with_pass_keeping_indentation() -> None:
    source = (
        "for x in xs:\n"
        "    log(\n"
        "        x,\n"
        "    )\n"
        "    if x:\n"
        "        break\n"
        "    total = x\n"
    )  # fmt: skip
    assert python_sources(source, "stmt_delete") == [
        "for x in xs:\n    pass\n    if x:\n        break\n    total = x\n",
        "for x in xs:\n    log(\n        x,\n    )\n    if x:\n        pass\n    total = x\n",
        "for x in xs:\n    log(\n        x,\n    )\n    if x:\n        break\n    pass\n",
    ]


def test_arg_change_drops_the_last_positional_argument() -> None:
    source = "r = f(a, (b + 1), key=2)\n"
    assert python_sources(source, "arg_change") == ["r = f(a, key=2)\n"]


def test_arg_change_shifts_and_removes_slice_bounds() -> None:
    source = "part = xs[i:-1]\n"
    assert python_sources(source, "arg_change") == [
        "part = xs[i + 1:-1]\n",
        "part = xs[:-1]\n",
        "part = xs[i:-2]\n",
        "part = xs[i:]\n",
    ]


def test_columns_count_characters_in_non_ascii_lines() -> None:
    [mutant] = python_mutants('s = "héllo" + name\n', "arith_swap")
    assert mutant.mutated_source == 's = "héllo" - name\n'
    assert (mutant.line, mutant.col) == (1, 13)


# -- what Python mutation never touches -----------------------------------------------------


def test_docstrings_main_guard_annotations_and_fstrings_are_untouched() -> None:
    source = (
        '"""Module doc with 1 < 2."""\n'
        "\n"
        "\n"
        "class C:\n"
        '    """Class doc."""\n'
        "\n"
        "    def f(self, x: Literal[1] = 5) -> list[int]:\n"
        '        """Function doc."""\n'
        '        return f"{x + 1}"\n'
        "\n"
        "\n"
        'if __name__ == "__main__":\n'
        "    print(C().f(2) + 3)\n"
    )
    changed = {(m.line, m.description) for m in python_mutants(source)}
    assert changed == {
        (7, "replaced 5 with 6"),
        (7, "replaced 5 with 4"),
        (9, "replaced return value 'f\"{x + 1}\"' with None"),
    }


def test_unparsable_python_is_skipped_and_other_files_are_ignored() -> None:
    files = {"bad.py": "def (:\n", "notes.txt": "a < b\n", "ok.py": "x = 1\n"}
    result = generate_mutants(files, language="python", operators=["const_change"])
    assert result.skipped_files == ["bad.py"]
    assert {m.path for m in result.mutants} == {"ok.py"}


def test_uncompilable_mutants_are_counted_not_returned() -> None:
    source = (
        "def outer():\n"
        "    count = 0\n"
        "\n"
        "    def bump():\n"
        "        nonlocal count\n"
        "        count += 1\n"
        "\n"
        "    bump()\n"
        "    return count\n"
    )
    result = generate_mutants({"solution.py": source}, language="python", operators=["stmt_delete"])
    assert result.dropped_uncompilable == 1  # without ``count = 0`` the nonlocal has no binding
    assert [m.line for m in result.mutants] == [6, 8]
    assert result.by_operator == {"stmt_delete": 2}


# -- ids, sampling and diffs -----------------------------------------------------------------

SAMPLING_SOURCE = (
    "def score(xs, lo, hi):\n"
    "    total = 0\n"
    "    for x in xs:\n"
    "        if lo < x <= hi and x != 7:\n"
    "            total += x * 2 - 1\n"
    "        elif x > hi or not x:\n"
    "            total -= [1, 2, 3][x % 3]\n"
    "    return total >= 10\n"
)


def sample(
    seed: int = 0, max_mutants: int | None = None, max_per_operator: int | None = None
) -> MutantSet:
    return generate_mutants(
        {"solution.py": SAMPLING_SOURCE},
        language="python",
        seed=seed,
        max_mutants=max_mutants,
        max_per_operator=max_per_operator,
    )


def test_ids_name_path_line_operator_and_are_stable() -> None:
    first, second = sample(), sample()
    ids = [m.id for m in first.mutants]
    assert ids == [m.id for m in second.mutants]
    assert len(set(ids)) == len(ids)
    assert "solution.py:4:cmp_swap:0" in ids
    assert all(m.id.startswith(f"{m.path}:{m.line}:{m.operator}:") for m in first.mutants)


def test_ids_do_not_depend_on_sampling_or_operator_choice() -> None:
    everything = {m.id: m.mutated_source for m in sample().mutants}
    sampled = sample(seed=3, max_mutants=5).mutants
    assert all(everything[m.id] == m.mutated_source for m in sampled)
    alone = generate_mutants(
        {"solution.py": SAMPLING_SOURCE}, language="python", operators=["arg_change"]
    )
    assert all(everything.get(m.id, m.mutated_source) == m.mutated_source for m in alone.mutants)


def test_max_per_operator_caps_each_operator_and_counts_come_before_sampling() -> None:
    full = sample()
    capped = sample(max_per_operator=2)
    assert capped.by_operator == full.by_operator
    counts = Counter(m.operator for m in capped.mutants)
    assert counts == {name: min(2, n) for name, n in full.by_operator.items() if n}


def test_max_mutants_spreads_the_budget_across_operators() -> None:
    full = sample()
    operators_present = [name for name, n in full.by_operator.items() if n]
    result = sample(max_mutants=len(operators_present))
    assert sorted(m.operator for m in result.mutants) == sorted(operators_present)
    assert len(sample(max_mutants=4, max_per_operator=1).mutants) == 4


def test_sampling_is_deterministic_per_seed_and_varies_between_seeds() -> None:
    def chosen(seed: int) -> list[str]:
        return [m.id for m in sample(seed=seed, max_mutants=6).mutants]

    assert chosen(1) == chosen(1)
    assert len({tuple(chosen(seed)) for seed in range(5)}) > 1


def test_sampled_mutants_stay_in_source_order() -> None:
    mutants = sample(seed=2, max_mutants=10).mutants
    positions = [(m.line, m.col) for m in mutants]
    assert positions == sorted(positions)


def test_bad_arguments_raise_usage_errors() -> None:
    with pytest.raises(UsageError, match="language 'cobol'"):
        generate_mutants({}, language="cobol")
    with pytest.raises(UsageError, match="no_such_op"):
        generate_mutants({}, language="python", operators=["no_such_op"])
    with pytest.raises(UsageError, match="max_mutants"):
        generate_mutants({}, language="python", max_mutants=-1)


def test_an_operator_of_another_language_yields_nothing() -> None:
    result = generate_mutants({"a.py": "x = 1\n"}, language="python", operators=["regex"])
    assert result.mutants == []
    assert "regex" not in operator_names("python")


def test_diff_has_headers_and_a_single_hunk_for_the_changed_expression() -> None:
    [mutant] = [m for m in sample().mutants if m.id == "solution.py:4:cmp_swap:0"]
    assert mutant.diff() == (
        "--- a/solution.py\n"
        "+++ b/solution.py\n"
        "@@ -1,7 +1,7 @@\n"
        " def score(xs, lo, hi):\n"
        "     total = 0\n"
        "     for x in xs:\n"
        "-        if lo < x <= hi and x != 7:\n"
        "+        if lo > x <= hi and x != 7:\n"
        "             total += x * 2 - 1\n"
        "         elif x > hi or not x:\n"
        "             total -= [1, 2, 3][x % 3]\n"
    )
    assert all(m.diff().count("\n@@ ") == 1 for m in sample().mutants)


def test_diff_marks_a_missing_final_newline() -> None:
    [mutant] = python_mutants("x = 1", "const_change")[:1]
    assert mutant.diff().endswith(
        "-x = 1\n\\ No newline at end of file\n+x = 2\n\\ No newline at end of file\n"
    )


# -- JavaScript ------------------------------------------------------------------------------

JS_CASES: dict[str, tuple[str, list[str]]] = {
    "cmp_swap": (
        "if (a === b && c < d) f();\n",
        ["if (a !== b && c < d) f();\n", "if (a === b && c > d) f();\n"],
    ),
    "cmp_boundary": ("while (i <= n) i++;\n", ["while (i < n) i++;\n"]),
    "arith_swap": (
        "let x = -a + b * c;\ni++;\n",
        [
            "let x = -a - b * c;\ni++;\n",
            "let x = -a + b / c;\ni++;\n",
            "let x = -a + b * c;\ni--;\n",
        ],
    ),
    "bool_op": ("ok = a && b || c;\n", ["ok = a || b || c;\n", "ok = a && b && c;\n"]),
    "negate_cond": (
        "if (x > 1 && !done) { go(); }\n",
        ["if (!(x > 1 && !done)) { go(); }\n", "if (x > 1 && done) { go(); }\n"],
    ),
    "const_change": (
        "const n = 10, on = true, r = 2.5, s = 'a', e = '';\n",
        [
            "const n = 11, on = true, r = 2.5, s = 'a', e = '';\n",
            "const n = 9, on = true, r = 2.5, s = 'a', e = '';\n",
            "const n = 10, on = false, r = 2.5, s = 'a', e = '';\n",
            "const n = 10, on = true, r = 3.5, s = 'a', e = '';\n",
            "const n = 10, on = true, r = 1.5, s = 'a', e = '';\n",
            "const n = 10, on = true, r = 1.25, s = 'a', e = '';\n",
            "const n = 10, on = true, r = 2.5, s = '', e = '';\n",
            "const n = 10, on = true, r = 2.5, s = 'a', e = 'XX';\n",
        ],
    ),
    "empty_collection": (
        "const xs = [1, 2];\nfunction f({a, b}) { return {a: 1}; }\n",
        [
            "const xs = [];\nfunction f({a, b}) { return {a: 1}; }\n",
            "const xs = [1, 2];\nfunction f({a, b}) { return {}; }\n",
        ],
    ),
    "stmt_delete": (
        "function f(xs) {\n  for (const x of xs) { if (!x) continue; out.push(x); n += 1 }\n  let y = 2\n}\n",
        [
            "function f(xs) {\n  for (const x of xs) { if (!x) ; out.push(x); n += 1 }\n  let y = 2\n}\n",
            "function f(xs) {\n  for (const x of xs) { if (!x) continue; ; n += 1 }\n  let y = 2\n}\n",
            "function f(xs) {\n  for (const x of xs) { if (!x) continue; out.push(x); ; }\n  let y = 2\n}\n",
        ],
    ),
    "arg_change": (
        "const s = t.slice(1, n);\nfunction g(a, b) { return h(a); }\n",
        ["const s = t.slice(1);\nfunction g(a, b) { return h(a); }\n"],
    ),
    "regex": (
        "ok = /^[a-z]+\\d$/i.test(s);\n",
        [
            "ok = /[a-z]+\\d$/i.test(s);\n",
            "ok = /^[^a-z]+\\d$/i.test(s);\n",
            "ok = /^[a-z]\\d$/i.test(s);\n",
            "ok = /^[a-z]+\\d/i.test(s);\n",
            "ok = /^[a-z]+\\D$/i.test(s);\n",
            "ok = /^[a-z]+\\d$/.test(s);\n",
        ],
    ),
    "method_swap": (
        "y = s.trim().startsWith(p) && Math.max(a, b);\n",
        [
            "y = s.startsWith(p) && Math.max(a, b);\n",
            "y = s.trimStart().startsWith(p) && Math.max(a, b);\n",
            "y = s.trimEnd().startsWith(p) && Math.max(a, b);\n",
            "y = s.trim().endsWith(p) && Math.max(a, b);\n",
            "y = s.trim().startsWith(p) && Math.min(a, b);\n",
        ],
    ),
    "return_value": (
        "function f(a, b) {\n  if (a) return a + b;\n  return a < b\n}\n",
        [
            "function f(a, b) {\n  if (a) return undefined;\n  return a < b\n}\n",
            "function f(a, b) {\n  if (a) return a + b;\n  return undefined\n}\n",
            "function f(a, b) {\n  if (a) return a + b;\n  return !(a < b)\n}\n",
        ],
    ),
}


@pytest.fixture(scope="module")
def js_result() -> MutantSet:
    """One run over every JavaScript case, so node is started once."""
    files = {f"{operator}.js": source for operator, (source, _) in JS_CASES.items()}
    return generate_mutants(files, language="javascript")


@pytest.mark.parametrize("operator", sorted(JS_CASES))
def test_js_operator_output(js_result: MutantSet, operator: str) -> None:
    _, expected = JS_CASES[operator]
    produced = [
        m.mutated_source
        for m in js_result.mutants
        if m.path == f"{operator}.js" and m.operator == operator
    ]
    assert produced == expected


def test_js_has_every_python_operator_and_more() -> None:
    assert set(operator_names("javascript")) == set(JS_CASES)
    assert set(operator_names("python")) < set(operator_names("javascript"))
    assert set(operator_names("javascript")) - set(operator_names("python")) == {"regex", "method_swap"}


SLUGIFY = """'use strict';

const MAX_LENGTH = 80;
const SEPARATOR = '-';

/** Turn a title into a URL slug. */
function slugify(text, options = {}) {
  if (typeof text !== 'string') {
    throw new TypeError('text must be a string');
  }
  const separator = options.separator ?? SEPARATOR;
  const limit = options.maxLength || MAX_LENGTH;
  let slug = text
    .normalize('NFKD')
    .replace(/[\\u0300-\\u036f]/g, '')
    .toLowerCase()
    .trim()
    .replace(/[^a-z0-9\\s-]/g, '')
    .replace(/[\\s_-]+/g, separator);
  if (slug.startsWith(separator)) {
    slug = slug.slice(separator.length);
  }
  if (slug.endsWith(separator)) {
    slug = slug.slice(0, -separator.length);
  }
  if (slug.length > limit) {
    slug = slug.slice(0, limit);
    const cut = slug.lastIndexOf(separator);
    if (cut > limit / 2) {
      slug = slug.slice(0, cut);
    }
  }
  return slug;
}

function isSlug(value) {
  return typeof value === 'string' && /^[a-z0-9]+(?:-[a-z0-9]+)*$/.test(value);
}

module.exports = { slugify, isSlug };
"""


@needs_node
def test_a_js_slugify_gets_as_thorough_a_set_of_mutants_as_python() -> None:
    """The 40-line slugify that got four mutants: now every operator reaches it, and every
    mutant parses (node checks each one)."""
    result = generate_mutants({"slugify.js": SLUGIFY}, language="javascript")
    counts = result.by_operator
    assert len(result.mutants) >= 60, counts
    assert result.dropped_uncompilable == 0
    assert result.compile_unchecked == 0
    assert all(counts[op] > 0 for op in operator_names("javascript")), counts
    # Deterministic: the same mutants, in the same order, every time.
    again = generate_mutants({"slugify.js": SLUGIFY}, language="javascript")
    assert [m.id for m in again.mutants] == [m.id for m in result.mutants]
    assert [m.mutated_source for m in again.mutants] == [m.mutated_source for m in result.mutants]


def test_js_never_mutates_module_names_directives_or_object_keys() -> None:
    source = "'use strict';\nconst fs = require('fs');\nimport x from 'y';\nconst o = {'k': v};\n"
    result = generate_mutants({"a.mjs": source}, language="javascript", operators=["const_change"])
    assert result.mutants == []


def test_js_operators_never_mutate_inside_strings_comments_templates_or_regexes() -> None:
    source = (
        "// a < b + 1\n"
        "/* x && y || true */\n"
        "s = 'a < b' + \"c === d\";\n"
        "t = `${`nested ${a > b}`} && ${c - 1}`;\n"
        "r = /a+b|c\\/d[/]/g;\n"
    )
    operators = ["cmp_swap", "cmp_boundary", "arith_swap", "bool_op", "negate_cond", "return_value"]
    result = generate_mutants({"a.js": source}, language="javascript", operators=operators)
    assert [m.description for m in result.mutants] == ["replaced '+' with '-'"]
    assert result.mutants[0].mutated_source.splitlines()[2] == "s = 'a < b' - \"c === d\";"


def test_js_tokenizer_tells_regex_from_division() -> None:
    tokens = tokenize_js("x = a / b / c; y = (/re/g).test(s);")
    assert [t.text for t in tokens if t.kind is Kind.REGEX] == ["/re/g"]
    assert [t.text for t in tokens if t.text == "/"] == ["/", "/"]


def test_js_only_script_files_are_mutated() -> None:
    files = {"a.mjs": "export const n = 1;\n", "b.cjs": "module.exports = 2;\n", "c.ts": "x = 3"}
    result = generate_mutants(files, language="javascript", operators=["const_change"])
    assert sorted({m.path for m in result.mutants}) == ["a.mjs", "b.cjs"]


@needs_node
def test_js_mutants_node_cannot_parse_are_counted_not_returned(js_result: MutantSet) -> None:
    # After ``)`` the tokenizer takes ``/`` for division, so it swaps the regex's slashes.
    source = "if (ok) /ab/.test(s);\n"
    result = generate_mutants({"a.js": source}, language="javascript", operators=["arith_swap"])
    assert result.dropped_uncompilable == 2
    assert result.mutants == []
    assert result.compile_unchecked == 0
    assert js_result.dropped_uncompilable == 0


def test_js_without_node_keeps_mutants_unchecked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    result = generate_mutants({"a.js": "x = 1;\n"}, language="javascript")
    assert result.compile_unchecked == len(result.mutants) == 3  # 1 to 2, 1 to 0, deleted
    assert result.dropped_uncompilable == 0


# -- floats and equivalent mutants ----------------------------------------------------------------

HUMANEVAL_2 = '''def truncate_number(number: float) -> float:
    """ Return the decimal part of a positive floating point number."""
    return number % 1.0
'''


def test_python_float_constants_are_mutated_and_every_mutant_compiles() -> None:
    result = generate_mutants({"h.py": HUMANEVAL_2}, language="python")
    assert [m.description for m in result.mutants] == [
        "replaced return value 'number % 1.0' with None",
        "replaced '%' with '*'",
        "replaced 1.0 with 2.0",
        "replaced 1.0 with 0.0",
        "replaced 1.0 with 0.5",
    ]
    source = "r = x * 0.25 + 0.0 - 2.5e-3 + 1e400\n"
    floats = [m.mutated_source for m in generate_mutants(
        {"f.py": source}, language="python", operators=["const_change"]).mutants]
    assert floats == [
        "r = x * 1.25 + 0.0 - 2.5e-3 + 1e400\n",
        "r = x * (-0.75) + 0.0 - 2.5e-3 + 1e400\n",
        "r = x * 0.125 + 0.0 - 2.5e-3 + 1e400\n",
        "r = x * 0.25 + 1.0 - 2.5e-3 + 1e400\n",
        "r = x * 0.25 + 0.0 - 1.0025 + 1e400\n",
        "r = x * 0.25 + 0.0 - (-0.9975) + 1e400\n",
        "r = x * 0.25 + 0.0 - 0.00125 + 1e400\n",
    ]  # infinity (1e400) is left alone
    for text in floats:
        compile(text, "f.py", "exec")


def test_mutants_that_compile_to_the_reference_bytecode_are_set_apart() -> None:
    source = (
        "def f(x):\n"
        "    if False:\n"
        "        return x + 1\n"
        "    return x * 2\n"
        "    print(x)\n"
    )
    result = generate_mutants({"m.py": source}, language="python")
    equivalent = {(m.line, m.description) for m in result.equivalent}
    # Everything in the dead branch and after the return compiles away.
    assert equivalent == {
        (3, "replaced return value 'x + 1' with None"),
        (3, "replaced '+' with '-'"),
        (3, "replaced 1 with 2"),
        (3, "replaced 1 with 0"),
        (5, "deleted statement 'print(x)'"),
    }
    assert not {m.id for m in result.equivalent} & {m.id for m in result.mutants}
    assert {m.line for m in result.mutants} == {2, 4}  # the live code is all still mutated
    assert result.by_operator["arith_swap"] == 3  # counted before the split


def test_equivalence_keeps_types_signs_and_names() -> None:
    from verify_cli.checks.mutation.equivalence import python_equivalent

    assert python_equivalent("m.py", "x = 1\n", "x = 1  # a comment\n\n")
    assert python_equivalent("m.py", "x = 2 * 3\n", "x = 6\n")  # folded by the compiler
    assert not python_equivalent("m.py", "x = 1\n", "x = 1.0\n")
    assert not python_equivalent("m.py", "x = 0.0\n", "x = -0.0\n")
    assert not python_equivalent("m.py", "def f(a):\n    return a\n", "def f(b):\n    return b\n")
    assert not python_equivalent("m.py", "x = a < b\n", "x = not (a >= b)\n")
    assert not python_equivalent("m.py", "x = 1\n", "x = (\n")  # does not compile


def test_js_statement_deletion_leaves_declarations_and_method_definitions() -> None:
    source = (
        "class A {\n  constructor() { this.n = 0; }\n  add(x) { this.n += x; return this; }\n}\n"
        "const o = { f(a) { return a; } };\nlet y = 1;\nfunction g() { h(); }\n"
    )
    result = generate_mutants({"a.js": source}, language="javascript", operators=["stmt_delete"])
    assert [m.description for m in result.mutants] == [
        "deleted statement 'this.n = 0;'", "deleted statement 'this.n += x;'", "deleted statement 'h();'"]
