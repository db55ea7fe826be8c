"""The replay backend reads stored completions (JSONL or Parquet) in file order."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from verify_cli.errors import UsageError
from verify_cli.models import create_model_backend
from verify_cli.models.base import Prompt, SamplingParams


def test_jsonl_rows_replay_in_order_from_first_sample(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    rows = [{"task_id": "a", "completion": "one"}, {"task_id": "b", "files": {"x.py": "X"}},
            {"task_id": "a", "completion": "two"}, {"task_id": "a", "completion": "three"}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    backend = create_model_backend("replay", model=str(f))
    assert backend.samples_available("a") == 3 and backend.samples_available("zzz") == 0
    out = backend.generate([Prompt("a", ""), Prompt("b", ""), Prompt("a", "", first_sample=2)], SamplingParams(n=2))
    assert [c.text for c in out[0]] == ["one", "two"]
    assert out[1][0].files == {"x.py": "X"}
    assert [c.text for c in out[2]] == ["three"]
    assert backend.model_id.startswith("replay:c.jsonl:")


def test_parquet_rows_with_files_as_a_map(tmp_path: Path) -> None:
    f = tmp_path / "c.parquet"
    table = pa.table({"task_id": ["a", "a"], "completion": [None, "raw"],
                      "files": pa.array([[("x.py", "X = 1\n")], None], type=pa.map_(pa.string(), pa.string()))})
    pq.write_table(table, f)
    out = create_model_backend("replay", model=str(f)).generate([Prompt("a", "")], SamplingParams(n=5))[0]
    assert out[0].files == {"x.py": "X = 1\n"} and out[1].files is None and out[1].text == "raw"


def test_bad_rows_say_where(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text('{"task_id": "a", "completion": "x"}\n{"task_id": "a"}\n')
    with pytest.raises(UsageError, match=r"c.jsonl:2: a row needs 'completion'"):
        create_model_backend("replay", model=str(f))
    with pytest.raises(UsageError, match="no such file"):
        create_model_backend("replay", model=str(tmp_path / "none.jsonl"))
