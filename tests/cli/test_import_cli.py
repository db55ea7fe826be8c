"""``verify-cli import``, ``export`` and ``tasks list/stats`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verify_cli.cli.app import main

ROWS = [
    {"task_id": 1, "text": "Add one.", "code": "def inc(x):\n    return x + 1\n",
     "test_list": ["assert inc(1) == 2"], "test_setup_code": ""},
    {"task_id": 2, "text": "No tests at all.", "code": "def f():\n    return 0\n", "test_list": [],
     "test_setup_code": ""},
]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return path


def test_import_reports_the_broken_row_and_exits_1(source: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["import", str(source), "--preset", "asserts", "--out", str(tmp_path / "set"),
                 "--json", str(tmp_path / "import.json")])
    assert code == 1
    out = capsys.readouterr()
    assert "imported 1 of 2 rows" in out.out and "Traceback" not in out.out + out.err
    doc = json.loads((tmp_path / "import.json").read_text())
    assert doc["imported"] == 1
    assert doc["failed"] == [{"index": 1, "id": "2", "reason": "the list of asserts is empty"}]
    assert (tmp_path / "set" / "rows" / "1" / "task.toml").is_file()
    # The console's table names the row by its index and by its own id, as the JSON does; it is a
    # diagnostic, so it goes to stderr (the result line stays on stdout: docs/cli.md).
    assert "the list of asserts is empty" not in out.out
    row = next(line for line in out.err.splitlines() if "the list of asserts is empty" in line)
    assert row.split()[:4] == ["│", "1", "│", "2"]


def test_import_into_a_non_empty_folder_needs_merge(source: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "set"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    assert main(["import", str(source), "--preset", "asserts", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the output folder is not empty" in err and "--merge" in err and "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # nothing written
    assert main(["import", str(source), "--preset", "asserts", "--out", str(out), "--merge"]) == 1
    assert (out / "rows" / "1" / "task.toml").is_file() and (out / "notes.txt").read_text() == "mine\n"
    assert main(["import", str(source), "--preset", "asserts", "--out", str(tmp_path / "new")]) == 1


def test_map_takes_several_fields_after_one_option(tmp_path: Path) -> None:
    path = tmp_path / "custom.jsonl"
    path.write_text(json.dumps({"q": "Echo.", "sol": "print(input())",
                                "io": {"inputs": ["a\n"], "outputs": ["a\n"]}}) + "\n", encoding="utf-8")
    code = main(["import", str(path), "--map", "prompt=q", "solution=sol", "tests=io", "--out", str(tmp_path / "o")])
    assert code == 0
    assert (tmp_path / "o" / "custom" / "0" / "hidden_tests" / "cases" / "001.in").read_text() == "a\n"


def test_unknown_preset_and_missing_source_are_usage_errors(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "rows.jsonl", "--preset", "nope", "--out", str(tmp_path)]) == 2
    assert main(["import", str(tmp_path / "missing.jsonl"), "--preset", "stdio", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown preset 'nope'" in err and "no such file" in err and "Traceback" not in err


def test_tasks_stats_and_list(source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["import", str(source), "--preset", "asserts", "--out", str(tmp_path / "set")])
    report = tmp_path / "checks.json"
    report.write_text(json.dumps({"tasks": [{"task_id": "rows/1", "verdict": "sound"}]}))
    capsys.readouterr()
    assert main(["tasks", "stats", str(tmp_path / "set"), "--checks", str(report), "--json", "-"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["tasks"] == 1 and stats["kind"] == {"calls": 1} and stats["check"] == {"sound": 1}
    assert stats["difficulty"] == {"unmeasured": 1} and stats["language"] == {"python": 1}
    assert main(["tasks", "list", str(tmp_path / "set"), "--json", "-", "--sandbox", "process"]) == 0
    listed = json.loads(capsys.readouterr().out)["tasks"]
    assert [(t["id"], t["kind"], t["check"]) for t in listed] == [("rows/1", "calls", "unchecked")]


def test_tasks_stats_reads_check_status_from_the_check_tasks_cache(
        source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["import", str(source), "--preset", "asserts", "--out", str(tmp_path / "set")])
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert main(["check-tasks", str(tmp_path / "set"), "--sandbox", "process", "--repeats", "2", *cache]) == 0
    capsys.readouterr()
    main(["tasks", "stats", str(tmp_path / "set"), "--sandbox", "process", "--repeats", "2", *cache, "--json", "-"])
    assert json.loads(capsys.readouterr().out)["check"] == {"sound": 1}
    (tmp_path / "set" / "rows" / "1" / "solution" / "solution.py").write_text("def inc(x):\n    return x\n")
    main(["tasks", "stats", str(tmp_path / "set"), "--sandbox", "process", "--repeats", "2", *cache, "--json", "-"])
    assert json.loads(capsys.readouterr().out)["check"] == {"unchecked": 1}  # changed since it was checked


def test_export_command_writes_verl_parquet(source: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    main(["import", str(source), "--preset", "asserts", "--out", str(tmp_path / "set")])
    assert main(["export", str(tmp_path / "set"), "--format", "verl", "--out", str(tmp_path / "v.parquet")]) == 0
    table = pq.read_table(tmp_path / "v.parquet")
    assert table.num_rows == 1 and table.column("data_source").to_pylist() == ["rows"]
    assert main(["export", str(tmp_path / "set"), "--format", "csv", "--out", str(tmp_path / "x")]) == 2
