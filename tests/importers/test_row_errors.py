"""Rows that cannot be converted: the reason names the row's own column (what --map changes),
and the other rows still import. No sandbox needed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from verify_cli.importers import import_rows

GOOD = {"problem_id": 1, "question": "Echo.", "solutions": json.dumps(["print(input())"]),
        "input_output": json.dumps({"inputs": ["a\n"], "outputs": ["a\n"]})}


def _import(tmp_path: Path, rows: list[dict[str, object]], preset: str, **kw: object) -> dict[int, str]:
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    shutil.rmtree(tmp_path / "out", ignore_errors=True)  # each import into a new --out
    report = import_rows(str(source), tmp_path / "out", preset=preset, **kw)  # type: ignore[arg-type]
    return {f.index: f.reason for f in report.failures}


def test_a_failure_names_the_column_not_the_field(tmp_path: Path) -> None:
    failed = _import(tmp_path, [GOOD, {**GOOD, "problem_id": 2, "question": ""},
                                {**GOOD, "problem_id": 3, "question": 5},
                                {**GOOD, "problem_id": 4, "question": None},
                                {**GOOD, "problem_id": 5, "input_output": None}], "stdio")
    assert failed == {
        1: "column 'question' (prompt) is empty",
        2: "column 'question' (prompt) is int, not text",
        3: "column 'question' (prompt) is missing or null; map another with --map prompt=COLUMN",
        4: "column 'input_output' (tests) is missing or null; map another with --map tests=COLUMN",
    }
    mapped = _import(tmp_path, [{"q": 7, "s": "print(1)", "io": {"inputs": ["\n"], "outputs": ["1\n"]}}], "stdio",
                     mapping={"prompt": "q", "solution": "s", "tests": "io"})
    assert mapped == {0: "column 'q' (prompt) is int, not text"}


def test_a_reference_that_is_not_python_is_reported_at_import(tmp_path: Path) -> None:
    """The stdio preset takes the first solution that is valid Python 3 (APPS lists several,
    some Python 2) and reports a row with none; the function preset reports a reference that
    does not parse."""
    py2_then_py3 = {**GOOD, "solutions": json.dumps(["print 'x'", "print(input())"])}
    only_py2 = {**GOOD, "problem_id": 2, "solutions": json.dumps(["print 'x'", "print input()"])}
    nul = {**GOOD, "problem_id": 3, "solutions": json.dumps(["print(1)\x00"])}
    failed = _import(tmp_path, [py2_then_py3, only_py2, nul], "stdio")
    assert set(failed) == {1, 2}
    assert failed[1].startswith("none of the 2 solutions is valid Python 3 (first: line 1:")
    assert failed[2] == "the reference solution is not valid Python 3 (source code string cannot contain null bytes)"
    assert (tmp_path / "out" / "rows" / "1" / "solution" / "main.py").read_text() == "print(input())"

    row = {"task_id": "F/0", "prompt": "def add(a, b):\n", "canonical_solution": "    return a +\n",
           "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "entry_point": "add"}
    failed = _import(tmp_path, [row, {**row, "task_id": "F/1", "test": "def check(c):\n    pass\x00\n"}], "function")
    assert failed[0].startswith("the reference solution (prompt + canonical solution) is not valid Python")
    assert "not valid Python" in failed[1]


def test_ids_and_prefixes_become_safe_task_ids(tmp_path: Path) -> None:
    from verify_cli.importers.model import task_id

    assert task_id("HumanEval/32", "x") == "humaneval/32"
    assert task_id("7", "../x") == "x/7"
    assert task_id("7", "/abs/My Set/") == "abs/my-set/7"
    assert task_id("../../etc", "p") == "p/etc"
    rows = [{**GOOD, "problem_id": 1}]
    source = tmp_path / "rows.jsonl"
    source.write_text(json.dumps(rows[0]) + "\n")
    report = import_rows(str(source), tmp_path / "out", preset="stdio", id_prefix="../up")
    assert report.written == ["up/1"] and (tmp_path / "out" / "up" / "1" / "task.toml").is_file()


def test_deepcoder_test_lists_become_stdio_cases(tmp_path: Path) -> None:
    """DeepCoder's rows give their tests as a JSON list of {"input", "output", "testtype"}."""
    cases = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}, {"input": "2 2\n", "output": "4\n"}]
    functional = [{"input": "[1, 2]", "output": "3", "testtype": "functional"}]
    rows = [{"problem": "Add.", "solutions": ["print(sum(map(int, input().split())))"], "tests": json.dumps(cases)},
            {"problem": "Add.", "solutions": ["def f(a, b):\n    return a + b\n"], "tests": json.dumps(functional)}]
    failed = _import(tmp_path, rows, "stdio", mapping={"prompt": "problem", "tests": "tests"})
    assert list(failed) == [1] and "testtype 'functional'" in failed[1]
    case_dir = tmp_path / "out" / "rows" / "0" / "hidden_tests" / "cases"
    assert (case_dir / "002.in").read_text() == "2 2\n" and (case_dir / "002.out").read_text() == "4\n"


def test_input_output_without_its_lists_says_what_is_missing(tmp_path: Path) -> None:
    failed = _import(tmp_path, [GOOD, {**GOOD, "problem_id": 2, "input_output": json.dumps({"inputs": ["a\n"]})},
                                {**GOOD, "problem_id": 3, "input_output": json.dumps({"cases": [], "x": 1})},
                                {**GOOD, "problem_id": 4,
                                 "input_output": json.dumps({"inputs": "a\n", "outputs": ["a\n"]})}], "stdio")
    assert failed == {1: "input_output has no 'outputs' list (its keys: 'inputs')",
                      2: "input_output has no 'inputs' list (its keys: 'cases', 'x')",
                      3: "input_output's 'inputs' is str, not a list"}
