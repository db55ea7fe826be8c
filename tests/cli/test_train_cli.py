"""``verify-cli train`` and ``verify-cli trajectories`` from the command line (replayed completions:
no model needed), and their usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verify_cli.cli.app import main

REPO = Path(__file__).resolve().parent.parent.parent
TOY_TASKS = REPO / "tests" / "fixtures" / "toy_sums"


def replay_file(tmp_path: Path) -> Path:
    rows = [{"task_id": f"toy/sum-{a}-plus-x-is-{b}", "completion": c}
            for a, b, good in ((1, 8, "7"), (2, 5, "3"), (4, 5, "1"), (6, 8, "2")) for c in (good, "5", "")]
    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def train(tmp_path: Path, *extra: str) -> int:
    return main(["train", str(TOY_TASKS), "--backend", "replay", "--model", str(replay_file(tmp_path)),
                 "--out", str(tmp_path / "run"), "-G", "3", "-B", "2", "--steps", "2", "--sandbox", "process",
                 "--no-system-prompt", *extra])


def test_train_writes_shards_and_inspect_and_export_read_them(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert train(tmp_path, "--format-penalty", "0.1") == 0
    run = tmp_path / "run"
    assert (run / "_manifest.jsonl").is_file() and len(list((run / "shards").glob("*.parquet"))) == 2
    capsys.readouterr()
    assert main(["trajectories", "inspect", str(run), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 12 and summary["steps"] == 2 and summary["integrity_problems"] == []
    assert summary["status_counts"] == {"ok": 4, "wrong": 4, "parse_error": 4}
    # An empty answer is a parse error with the format penalty as a separate component.
    assert [p["reward_mean"] for p in summary["reward_curve"]] == pytest.approx([(1 + 0.5 - 0.1) / 3] * 2)
    assert main(["trajectories", "export", str(run), "-o", str(tmp_path / "out.jsonl")]) == 0
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 12


def test_an_existing_run_needs_resume_and_resume_needs_the_same_options(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert train(tmp_path) == 0
    capsys.readouterr()
    assert train(tmp_path) == 2
    assert "--resume" in capsys.readouterr().err
    assert train(tmp_path, "--resume", "--seed", "5") == 2
    err = capsys.readouterr().err
    assert "seed" in err and "Traceback" not in err
    assert train(tmp_path, "--resume") == 0  # nothing left to do: the run is complete
    assert main(["train", str(TOY_TASKS), "--out", str(tmp_path / "x"), "--update", "sgd"]) == 2


def test_resume_on_a_folder_holding_no_run_is_a_usage_error(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert train(tmp_path, "--resume") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "holds no run to resume" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "run.json").exists()  # no new run was started in its place
    (tmp_path / "run").mkdir()
    assert train(tmp_path, "--resume") == 2


def test_a_group_larger_than_the_replayed_rows_is_a_usage_error(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert train(tmp_path, "-G", "4") == 2  # the file has 3 rows per task
    err = " ".join(capsys.readouterr().err.split())
    assert "--group-size 4:" in err and "only 3 row(s)" in err and "Traceback" not in err
