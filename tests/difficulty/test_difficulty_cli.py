"""verify-cli difficulty end to end with the replay backend: completions of known correctness
give exactly the expected pass rates, intervals, pass@k and buckets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import pyarrow.parquet as pq
import pytest

from verify_cli.cli.app import main
from verify_cli.difficulty.schema import DIFFICULTY_SCHEMA, SAMPLES_SCHEMA
from verify_cli.difficulty.stats import pass_at_k, wilson_interval
from verify_cli.tasks.loader import load_task

TaskSet = Callable[..., tuple[Path, Path]]

RIGHT = "```python solution.py\ndef total(values):\n    return sum(values)\n```\n"
HALF = "```python\ndef total(values):\n    return 0\n```\n"  # passes test_empty only
WRONG = "def total(values):\n    return -1\n"  # a bare answer: the single editable file
UNPARSEABLE = ""

PLAN = {
    "never": [WRONG, WRONG, UNPARSEABLE, HALF],
    "rarely": [RIGHT, WRONG, WRONG, WRONG],
    "half": [RIGHT, HALF, RIGHT, WRONG],
    "often": [RIGHT, RIGHT, RIGHT, HALF],
    "always": [RIGHT, RIGHT, RIGHT, RIGHT],
}


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["difficulty", *args, "--json", "-"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_replay_gives_exact_statistics_and_buckets(task_set: TaskSet, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    tasks, replay = task_set(PLAN)
    out = tmp_path / "out"
    code, summary = run([str(tasks), "-b", "replay", "-m", str(replay), "-n", "4", "--out", str(out),
                         "--sandbox", "process", "-j", "2", "--k", "1,2,5", "--cache-dir", str(tmp_path / "c")],
                        capsys)
    assert code == 0
    assert summary["buckets"] == {"unsolved": 1, "hard": 1, "medium": 1, "easy": 1, "solved": 1}
    table = pq.read_table(out / "difficulty.parquet")
    assert table.schema.equals(DIFFICULTY_SCHEMA, check_metadata=False)
    rows = {r["task_id"]: r for r in table.to_pylist()}
    expected = {"never": (0, "unsolved"), "rarely": (1, "hard"), "half": (2, "medium"), "often": (3, "easy"),
                "always": (4, "solved")}
    for name, (correct, bucket) in expected.items():
        row = rows[f"set/{name}"]
        assert (row["n"], row["correct"], row["bucket"]) == (4, correct, bucket)
        assert row["pass_rate"] == correct / 4
        assert (row["wilson_low"], row["wilson_high"]) == pytest.approx(wilson_interval(correct, 4))
        assert dict(row["pass_at_k"]) == {1: pytest.approx(correct / 4), 2: pytest.approx(pass_at_k(4, correct, 2)),
                                          5: None}
    # Partial credit: HALF passes one of two tests under the 'fraction' policy.
    assert rows["set/half"]["mean_score"] == pytest.approx((1 + 0.5 + 1 + 0) / 4)
    assert rows["set/never"]["mean_score"] == pytest.approx(0.5 / 4)
    assert (rows["set/never"]["parse_error"], rows["set/never"]["failed"]) == (1, 3)
    assert rows["set/never"]["infra_error"] == 0

    samples = pq.read_table(out / "samples.parquet")
    assert samples.schema.equals(SAMPLES_SCHEMA, check_metadata=False)
    assert samples.num_rows == 20
    right = next(r for r in samples.to_pylist() if r["task_id"] == "set/always")
    assert dict(right["files"]) == {"solution.py": "def total(values):\n    return sum(values)\n"}
    assert {t["outcome"] for t in right["tests"]} == {"passed"} and right["status"] == "passed"

    dd = datasets.load_from_disk(str(out / "dataset"))
    assert sorted(dd) == ["easy", "hard", "medium", "solved", "unsolved"]
    assert dd["medium"][0]["task_id"] == "set/half" and dd["medium"][0]["pass_rate"] == 0.5
    assert "Implement `total(values)`" in dd["medium"][0]["prompt"]
    assert pq.read_table(out / "buckets" / "easy.parquet").column("task_id").to_pylist() == ["set/often"]
    assert (out / "pass_rates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_keep_drop_extremes_and_write_back(task_set: TaskSet, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    tasks, replay = task_set(PLAN)
    toml = tasks / "half" / "task.toml"
    toml.write_text("# hand-written comment\n" + toml.read_text() + "\n[difficulty]\npass_rate = 0.9\n"
                    "bucket = 'easy'\nn = 1\nmodel = 'old'\ndate = '2020-01-01'\n")
    before = toml.read_text()
    out = tmp_path / "out"
    code, summary = run([str(tasks), "-b", "replay", "-m", str(replay), "-n", "4", "--out", str(out),
                         "--sandbox", "process", "--drop-extremes", "--write-back", "--no-cache"], capsys)
    assert code == 0
    assert sorted(datasets.load_from_disk(str(out / "dataset"))) == ["easy", "hard", "medium"]
    after = toml.read_text()
    assert after.startswith(before.split("[difficulty]")[0])  # the rest of the file is untouched
    task = load_task(tasks / "half")  # still valid against the task schema
    assert task.difficulty is not None
    assert {k: task.difficulty[k] for k in ("pass_rate", "bucket", "n")} == {"pass_rate": 0.5, "bucket": "medium",
                                                                           "n": 4}
    assert task.difficulty["model"] == summary["model"]
    code, _ = run([str(tasks), "-b", "replay", "-m", str(replay), "-n", "4", "--out", str(tmp_path / "o2"),
                   "--sandbox", "process", "--keep", "hard,medium", "--no-cache", "--no-plot"], capsys)
    assert sorted(datasets.load_from_disk(str(tmp_path / "o2" / "dataset"))) == ["hard", "medium"]
    assert not (tmp_path / "o2" / "pass_rates.png").exists() and (out / "pass_rates.png").is_file()


def test_defective_tasks_are_bucketed_defective_never_unsolved(task_set: TaskSet, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    tasks, replay = task_set({"fine": [RIGHT, WRONG], "broken": [WRONG, WRONG]})
    # The reference solution of 'broken' fails its own tests: check-tasks finds it defective.
    (tasks / "broken" / "solution" / "solution.py").write_text("def total(values):\n    return 42\n")
    (tasks / "unloadable").mkdir()
    (tasks / "unloadable" / "task.toml").write_text("id = 'set/unloadable'\n")
    code, summary = run([str(tasks), "-b", "replay", "-m", str(replay), "-n", "2", "--out", str(tmp_path / "o"),
                         "--sandbox", "process", "--check", "--cache-dir", str(tmp_path / "c")], capsys)
    assert code == 0
    by_id = {t["task_id"]: t for t in summary["tasks"]}
    assert by_id["set/broken"]["bucket"] == "defective" and by_id["set/broken"]["n"] == 0
    assert by_id["set/fine"]["bucket"] == "medium"
    assert by_id["unloadable"]["bucket"] == "defective"
    row = [r for r in pq.read_table(tmp_path / "o" / "difficulty.parquet").to_pylist() if r["task_id"] == "set/broken"]
    assert "reference" in row[0]["defect"]


def test_visible_pass_hidden_fail_is_a_curation_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        sample_tasks_dir: Path) -> None:
    import shutil

    shutil.copytree(sample_tasks_dir / "coding-roman-numerals", tmp_path / "roman")
    solution = (tmp_path / "roman" / "solution" / "roman.py").read_text()
    # Accepts bools: passes the visible tests, fails the hidden type checks.
    lax = solution.replace("isinstance(n, bool)", "False") if "isinstance(n, bool)" in solution else None
    if lax is None or lax == solution:
        pytest.skip("the sample solution changed shape")
    replay = tmp_path / "r.jsonl"
    replay.write_text("".join(json.dumps({"task_id": "coding/roman-numerals", "files": {"roman.py": s}}) + "\n"
                              for s in (solution, lax)))
    code, summary = run([str(tmp_path / "roman"), "-b", "replay", "-m", str(replay), "-n", "2",
                         "--out", str(tmp_path / "o"), "--sandbox", "process", "--no-cache"], capsys)
    assert code == 0
    row = pq.read_table(tmp_path / "o" / "difficulty.parquet").to_pylist()[0]
    assert (row["correct"], row["visible_pass_rate"], row["visible_pass_hidden_fail"]) == (1, 1.0, 1)
    assert "curation finding" in capsys.readouterr().err or summary["tasks"][0]["visible_pass_hidden_fail"] == 1


def test_a_task_without_visible_tests_shows_no_visible_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           sample_tasks_dir: Path) -> None:
    """A task whose tests are all hidden has no visible pass rate: null in the table and ``-`` on
    the console, not 0.00 (which reads as "every sample failed the visible tests")."""
    import shutil

    shutil.copytree(sample_tasks_dir / "coding-roman-numerals", tmp_path / "roman")
    for test in (tmp_path / "roman" / "tests").iterdir():
        test.rename(tmp_path / "roman" / "hidden_tests" / test.name)
    (tmp_path / "roman" / "tests").rmdir()
    toml = tmp_path / "roman" / "task.toml"
    toml.write_text(toml.read_text().replace(" tests hidden_tests'", " hidden_tests'"))
    solution = (tmp_path / "roman" / "solution" / "roman.py").read_text()
    replay = tmp_path / "r.jsonl"
    replay.write_text("".join(json.dumps({"task_id": "coding/roman-numerals", "files": {"roman.py": s}}) + "\n"
                              for s in (solution, "def broken(:\n")))
    code = main(["difficulty", str(tmp_path / "roman"), "-b", "replay", "-m", str(replay), "-n", "2",
                 "--out", str(tmp_path / "o"), "--sandbox", "process", "--no-cache"])
    assert code == 0
    row = pq.read_table(tmp_path / "o" / "difficulty.parquet").to_pylist()[0]
    assert (row["n"], row["correct"], row["visible_pass_rate"]) == (2, 1, None)
    line = next(t for t in capsys.readouterr().out.splitlines() if "roman" in t)
    cells = [c.strip() for c in line.split("│")]
    assert cells[7] == "-", line  # the visible column (task, bucket, n, rate, interval, score, visible)


def test_a_data_set_of_task_paths_is_measured_again(task_set: TaskSet, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    tasks, replay = task_set(PLAN)
    common = ["-b", "replay", "-m", str(replay), "-n", "4", "--sandbox", "process", "--no-cache"]
    code, _ = run([str(tasks), *common, "--out", str(tmp_path / "first"), "--drop-extremes"], capsys)
    assert code == 0
    code, again = run([str(tmp_path / "first" / "buckets" / "medium.parquet"), *common,
                       "--out", str(tmp_path / "again")], capsys)
    assert code == 0 and [t["task_id"] for t in again["tasks"]] == ["set/half"]
    code, whole = run([str(tmp_path / "first" / "dataset"), *common, "--out", str(tmp_path / "whole")], capsys)
    assert code == 0 and sorted(t["task_id"] for t in whole["tasks"]) == ["set/half", "set/often", "set/rarely"]


def test_data_sets_without_paths_or_unreadable_are_usage_errors(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "tasks.jsonl"
    rows.write_text(json.dumps({"id": "x", "prompt": "p", "files": {}}) + "\n")
    assert main(["difficulty", str(rows), "-b", "replay", "-m", str(rows), "--out", str(tmp_path / "o")]) == 2
    assert "not built yet" in " ".join(capsys.readouterr().err.split())
    broken = tmp_path / "tasks.parquet"
    broken.write_bytes(b"PAR1")
    assert main(["difficulty", str(broken), "-b", "replay", "-m", str(rows), "--out", str(tmp_path / "o")]) == 2
    assert "cannot read the data set" in " ".join(capsys.readouterr().err.split())


def test_replay_rows_naming_no_task_and_tasks_with_no_rows_are_warned_about(
        task_set: TaskSet, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks, replay = task_set({"fine": [RIGHT, WRONG], "bare": []})
    with replay.open("a") as fh:
        fh.write(json.dumps({"task_id": "set/typo", "completion": RIGHT}) + "\n")
    code = main(["difficulty", str(tasks), "-b", "replay", "-m", str(replay), "-n", "2", "--out",
                 str(tmp_path / "o"), "--sandbox", "process", "--no-cache", "--json", str(tmp_path / "s.json")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0
    assert "1 task id(s) match no task and their rows are ignored: 'set/typo'" in err
    assert "1 task(s) have no rows and get no samples: 'set/bare'" in err
    summary = json.loads((tmp_path / "s.json").read_text())
    assert len(summary["warnings"]) == 2
    assert {t["task_id"]: t["bucket"] for t in summary["tasks"]} == {"set/bare": "unsampled", "set/fine": "medium"}


def test_a_replay_file_naming_none_of_the_tasks_is_a_usage_error(task_set: TaskSet, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    tasks, _ = task_set({"fine": [RIGHT]})
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"task_id": "humaneval/0", "completion": RIGHT}) + "\n")
    code = main(["difficulty", str(tasks), "-b", "replay", "-m", str(other), "-n", "1", "--out", str(tmp_path / "o"),
                 "--sandbox", "process", "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and "none of its 1 task id(s) names one of the 1 task(s)" in " ".join(err.split())
    assert "Traceback" not in err and not (tmp_path / "o" / "difficulty.parquet").exists()


def test_more_samples_than_replay_rows_is_a_usage_error_not_a_smaller_n(task_set: TaskSet, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    tasks, replay = task_set({"few": [RIGHT] * 8, "many": [RIGHT] * 9})
    code = main(["difficulty", str(tasks), "-b", "replay", "-m", str(replay), "-n", "9", "--out", str(tmp_path / "o"),
                 "--sandbox", "process", "--no-cache"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "--samples 9:" in err and "only 8 row(s) for task 'set/few'" in err
    assert "--samples 8" in err and "Traceback" not in err
