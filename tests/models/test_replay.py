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


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_replay_holds_positions_not_completions(tmp_path: Path, suffix: str) -> None:
    """A file of many completions costs a few bytes a row in memory: the backend keeps where each
    row is and reads the completion again when it is generated, the same rows in the same order."""
    import gc

    from verify_cli.models.base import Completion
    from verify_cli.models.replay import read_replay_rows

    rows = [{"task_id": f"t{i % 7}", "completion": f"answer {i} " + "é" * (i % 5) + "\n" * (i % 3)}
            for i in range(300)]
    f = tmp_path / f"c{suffix}"
    if suffix == ".jsonl":
        f.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" + "\n" * (i % 2) for i, r in enumerate(rows)))
    else:
        pq.write_table(pa.Table.from_pylist(rows), f, row_group_size=64)
    backend = create_model_backend("replay", model=str(f))
    gc.collect()
    assert [o for o in gc.get_objects() if type(o) is Completion] == []
    prompts = [Prompt(f"t{k}", "", first_sample=1) for k in range(7)]
    out = backend.generate(prompts, SamplingParams(n=100))
    expected: dict[str, list[str]] = {}
    for task_id, completion in read_replay_rows(f):
        expected.setdefault(task_id, []).append(completion.text)
    assert [[c.text for c in got] for got in out] == [expected[f"t{k}"][1:101] for k in range(7)]


def test_a_file_changed_while_it_is_replayed_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text('{"task_id": "a", "completion": "x"}\n{"task_id": "b", "completion": "y"}\n')
    backend = create_model_backend("replay", model=str(f))
    f.write_text('{"task_id": "b", "completion": "y"}\n{"task_id": "a", "completion": "x"}\n')
    with pytest.raises(UsageError, match="changed while it was being replayed"):
        backend.generate([Prompt("a", "")], SamplingParams(n=1))


def test_a_line_that_is_not_utf8_says_where(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_bytes(b'{"task_id": "a", "completion": "x"}\n{"task_id": "a", "completion": "\xff"}\n')
    with pytest.raises(UsageError, match=r"c.jsonl:2: not UTF-8 text"):
        create_model_backend("replay", model=str(f))
