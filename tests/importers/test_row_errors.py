"""Rows that cannot be converted: the reason names the row's own column (what --map changes),
and the other rows still import. No sandbox needed."""

from __future__ import annotations

import json
from pathlib import Path

from verify_cli.importers import import_rows

GOOD = {"problem_id": 1, "question": "Echo.", "solutions": json.dumps(["print(input())"]),
        "input_output": json.dumps({"inputs": ["a\n"], "outputs": ["a\n"]})}


def _import(tmp_path: Path, rows: list[dict[str, object]], preset: str, **kw: object) -> dict[int, str]:
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
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
