"""A tiny random model through the whole pipeline on the sample tasks: every sample is
generated, extracted and graded in a sandbox (or found unreadable), and every task comes out
unsolved."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest

from verify_cli.cli.app import main


@pytest.mark.slow
def test_tiny_hf_model_end_to_end_on_the_sample_tasks(tiny_model: Path, sample_tasks_dir: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["difficulty", str(sample_tasks_dir), "-b", "hf", "-m", str(tiny_model), "--device", "cpu",
                 "-n", "2", "--max-tokens", "16", "--no-tests-in-prompt", "--out", str(out), "--sandbox", "process",
                 "-j", "2",
                 "--cache-dir", str(tmp_path / "cache"), "--json", "-"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert summary["buckets"] == {"unsolved": 11}
    assert summary["infra_errors"] == 0 and summary["generated"] == 22
    samples = pq.read_table(out / "samples.parquet").to_pylist()
    assert len(samples) == 22
    for s in samples:
        # Random text with no fence is a parse error where the file is Python and does not parse,
        # or where the task has several editable files (a repository task: nothing names the
        # file); in a JavaScript task (no parser here) it is taken as the file and graded: it fails.
        assert s["status"] in ("failed", "timeout", "parse_error")
        assert 0 < len(s["token_ids"]) <= 16
        if s["status"] == "parse_error":
            assert s["attempts"] == 0
            assert ("not valid Python" in s["problems"][0] if not s["task_id"].startswith("repository/")
                    else "no fenced code block" in s["problems"][0])
        else:
            assert s["attempts"] == 1 and s["grade_seconds"] > 0
    js = [s for s in samples if s["task_id"].endswith("-js")]
    assert len(js) == 4 and all(s["status"] in ("failed", "timeout") for s in js)
    assert any(s["status"] == "parse_error" for s in samples)
    assert list(datasets.load_from_disk(str(out / "dataset"))) == ["unsolved"]
