"""Bad input to ``import`` / ``export``: a clear error naming the file and what to do, an exit
code from the one table, never a traceback."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from verify_cli.cli.app import main

ROW = {"problem_id": 1, "question": "Echo.", "solutions": json.dumps(["print(input())"]),
       "input_output": json.dumps({"inputs": ["a\n"], "outputs": ["a\n"]})}


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text
    return code, text


def test_a_damaged_source_file_is_named_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad_gz = tmp_path / "rows.jsonl.gz"
    bad_gz.write_bytes(b"not gzip at all")
    code, text = _run(["import", str(bad_gz), "--preset", "stdio", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and f"{bad_gz}: cannot read it" in text

    whole = gzip.compress("".join(json.dumps({**ROW, "problem_id": i}) + "\n" for i in range(50)).encode())
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: len(whole) - 40])
    code, text = _run(["import", str(cut), "--preset", "stdio", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "cannot read past row" in text


def test_a_damaged_parquet_file_or_datasets_folder_is_named(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    whole = tmp_path / "whole.parquet"
    pq.write_table(pa.Table.from_pylist([{**ROW, "problem_id": i} for i in range(200)]), whole)
    data = whole.read_bytes()
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(data[:8] + bytes(len(data) // 2) + data[8 + len(data) // 2:])
    code, text = _run(["import", str(damaged), "--preset", "stdio", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and f"{damaged}: cannot read" in text


def test_a_line_that_is_not_utf8_is_that_rows_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "rows.jsonl"
    source.write_bytes(json.dumps(ROW).encode() + b"\n" + b'{"question": "\xff\xfe"}\n')
    code, _ = _run(["import", str(source), "--preset", "stdio", "--out", str(tmp_path / "o"),
                       "--json", str(tmp_path / "r.json")], capsys)
    assert code == 1
    failed = json.loads((tmp_path / "r.json").read_text())["failed"]
    assert [f["index"] for f in failed] == [1] and "not UTF-8" in failed[0]["reason"]


def test_an_out_that_is_a_file_or_unwritable_is_a_usage_error(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "rows.jsonl"
    source.write_text(json.dumps(ROW) + "\n")
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    code, text = _run(["import", str(source), "--preset", "stdio", "--out", str(a_file)], capsys)
    assert code == 2 and "is a file, not a folder" in text
    code, text = _run(["import", str(source), "--preset", "stdio", "--out", str(a_file / "below")], capsys)
    assert code == 2 and "cannot make the output folder" in text


@pytest.fixture
def task_set(tmp_path: Path) -> Path:
    source = tmp_path / "rows.jsonl"
    source.write_text(json.dumps(ROW) + "\n")
    assert main(["import", str(source), "--preset", "stdio", "--out", str(tmp_path / "set")]) == 0
    return tmp_path / "set"


@pytest.mark.parametrize("fmt", ["verl", "jsonl", "datasets"])
def test_export_to_a_file_where_a_folder_goes_is_a_usage_error(task_set: Path, tmp_path: Path, fmt: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "taken.txt"
    a_file.write_text("x")
    code, text = _run(["export", str(task_set), "--format", fmt, "--out", str(a_file)], capsys)
    assert code == 2 and f"{a_file}: a file, where the {fmt} export writes a folder" in text
    code, text = _run(["export", str(task_set), "--format", fmt, "--out", str(a_file / "below")], capsys)
    assert code == 2 and "cannot write the export" in text


def test_a_datasets_export_over_the_task_set_is_refused(task_set: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run(["export", str(task_set), "--format", "datasets", "--out", str(task_set)], capsys)
    assert code == 2 and "holds tasks" in text
    assert not (task_set / "dataset_dict.json").exists()


def test_tasks_with_an_unknown_sandbox_is_a_usage_error(task_set: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("list", "stats"):
        code, text = _run(["tasks", command, str(task_set), "--sandbox", "bogus"], capsys)
        assert code == 2 and "unknown sandbox backend 'bogus'" in text


def test_strict_names_the_file_and_the_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "rows.jsonl"
    source.write_text(json.dumps(ROW) + "\n" + json.dumps({**ROW, "input_output": "{nope"}) + "\n")
    code, text = _run(["import", str(source), "--preset", "stdio", "--out", str(tmp_path / "o"), "--strict"], capsys)
    assert code == 2 and f"{source}: row 1: input_output is not valid JSON" in text


def test_export_names_a_task_that_does_not_load_and_exits_1(task_set: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    broken = task_set / "rows" / "broken"
    broken.mkdir()
    (broken / "task.toml").write_text('id = "rows/broken"\n')
    code, text = _run(["export", str(task_set), "--format", "jsonl", "--out", str(tmp_path / "e.jsonl"),
                       "--json", str(tmp_path / "r.json")], capsys)
    assert code == 1 and "skipped" in text and "rows/broken" in text
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["exported"] == 1 and [s["path"] for s in doc["skipped"]] == [str(broken)]
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == 1
