"""Export to verl Parquet, JSONL and datasets folders; read back with ``datasets``; import again."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from verify_cli.exporters import export_tasks
from verify_cli.exporters.schemas import VERL_SCHEMA
from verify_cli.importers import import_rows
from verify_cli.tasks.metadata import difficulty_bucket, difficulty_record
from verify_cli.tasks.paths import list_files

ROWS = [
    {"problem_id": 7, "question": "Print the sum.", "solutions": json.dumps(["print(sum(map(int, input().split())))"]),
     "input_output": json.dumps({"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}),
     "difficulty": "interview"},
    {"problem_id": 8, "question": "Echo the line.", "solutions": json.dumps(["print(input())"]),
     "input_output": json.dumps({"inputs": ["héllo\n"], "outputs": ["héllo\n"]})},
]
MBPP = [{"task_id": 3, "text": "Double a number.", "code": "def double(x):\n    return 2 * x\n",
         "test_list": ["assert double(2) == 4"], "test_setup_code": ""}]


@pytest.fixture
def task_set(tmp_path: Path) -> Path:
    src = tmp_path / "apps.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    out = tmp_path / "set"
    assert not import_rows(str(src), out, preset="stdio").failures
    mbpp = tmp_path / "mbpp.jsonl"
    mbpp.write_text(json.dumps(MBPP[0]) + "\n", encoding="utf-8")
    assert not import_rows(str(mbpp), out, preset="asserts", merge=True).failures
    # A measured difficulty carried in with the row (as `difficulty` writes its records).
    source = out / "mbpp" / "3" / "source.json"
    record = {"pass_rate": 0.25, "bucket": "hard", "n": 16, "model": "tiny", "date": "2026-11-30"}
    doc = {**json.loads(source.read_text()), "difficulty": record}
    source.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")  # as the importer writes it
    # Files that are not UTF-8 text (a binary fixture, Latin-1 data) must come back byte for byte.
    (out / "apps" / "7" / "hidden_tests" / "fixture.bin").write_bytes(bytes(range(256)))
    (out / "apps" / "7" / "hidden_tests" / "latin1.txt").write_bytes("café\r\n".encode("latin-1"))
    return out


def test_a_written_back_difficulty_record_is_read_from_task_toml(tmp_path: Path) -> None:
    """`verify-cli difficulty --write-back` adds [difficulty] to task.toml; it wins over the row's."""
    (tmp_path / "task.toml").write_text('id = "x"\n\n[difficulty]\npass_rate = 0.9\nbucket = "easy"\nn = 8\n')
    (tmp_path / "source.json").write_text(json.dumps({"difficulty": {"pass_rate": 0.1}}))
    assert difficulty_record(tmp_path) == {"pass_rate": 0.9, "bucket": "easy", "n": 8}
    assert difficulty_bucket({"pass_rate": 0.5}) == "medium"
    assert difficulty_bucket(None) == "unmeasured"


def folder_bytes(root: Path) -> dict[str, bytes]:
    return {rel: p.read_bytes() for rel, p in list_files(root).items()}


def test_verl_export_reads_back_with_datasets(task_set: Path, tmp_path: Path) -> None:
    import datasets

    report = export_tasks(task_set, "verl", tmp_path / "verl")
    assert sorted(report.exported) == ["apps/7", "apps/8", "mbpp/3"]
    ds = datasets.load_dataset("parquet", data_files=str(report.out), split="train")
    assert ds.features == datasets.Features.from_arrow_schema(VERL_SCHEMA)
    assert set(ds.column_names) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    by_id = {row["extra_info"]["task_id"]: row for row in ds}
    row = by_id["apps/7"]
    assert row["data_source"] == "apps" and row["ability"] == "coding"
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["prompt"][1]["content"].startswith("Print the sum.")  # prompt.md first, then the rest
    assert row["reward_model"]["style"] == "rule"
    truth = json.loads(row["reward_model"]["ground_truth"])
    assert truth["inputs"] == ["1 2\n", "3 4\n"] and truth["outputs"] == ["3\n", "7\n"]
    assert row["extra_info"]["split"] == "train" and row["extra_info"]["index"] in range(3)
    assert json.loads(row["extra_info"]["difficulty"]) == {"value": "interview"}
    measured = by_id["mbpp/3"]["extra_info"]
    assert json.loads(measured["difficulty"])["pass_rate"] == 0.25
    assert measured["difficulty_bucket"] == "hard"
    assert by_id["mbpp/3"]["extra_info"]["entry_point"] == "double"
    table = pa.parquet.read_table(report.out)
    assert table.schema.equals(VERL_SCHEMA, check_metadata=False)


@pytest.mark.parametrize(("fmt", "preset"), [("verl", "verl"), ("jsonl", "verify"), ("datasets", "verify")])
def test_import_export_import_is_lossless(task_set: Path, tmp_path: Path, fmt: str, preset: str) -> None:
    report = export_tasks(task_set, fmt, tmp_path / f"out-{fmt}")
    back = tmp_path / f"back-{fmt}"
    again = import_rows(str(report.out), back, preset=preset)
    assert not again.failures and sorted(again.written) == ["apps/7", "apps/8", "mbpp/3"]
    assert folder_bytes(back) == folder_bytes(task_set)
    assert difficulty_bucket(difficulty_record(back / "mbpp" / "3")) == "hard"


def test_jsonl_rows_hold_the_generic_fields(task_set: Path, tmp_path: Path) -> None:
    report = export_tasks(task_set, "jsonl", tmp_path / "tasks.jsonl")
    rows = [json.loads(line) for line in report.out.read_text(encoding="utf-8").splitlines()]
    row = next(r for r in rows if r["id"] == "apps/8")
    assert row["kind"] == "stdio" and row["solution"] == "print(input())"
    assert json.loads(row["ground_truth"])["inputs"] == ["héllo\n"]
    assert row["difficulty"] is None and row["difficulty_bucket"] == "unmeasured"


def test_a_verl_export_without_the_task_payload_keeps_difficulty_and_split(task_set: Path, tmp_path: Path) -> None:
    """A verl file that went through other tools (the task folder column dropped) imports from
    its verl columns: the measured difficulty (JSON in extra_info.difficulty) comes back as a
    record, with its bucket, and the split as extra_info.split says."""
    import pyarrow.parquet as pq

    dest = export_tasks(task_set, "verl", tmp_path / "v.parquet", split="test").out
    table = pq.read_table(dest)
    info = table.column("extra_info").combine_chunks()
    names = [f.name for f in info.type if f.name != "verify_cli_task"]
    stripped = pa.StructArray.from_arrays([info.field(n) for n in names], names=names)
    table = table.set_column(table.schema.get_field_index("extra_info"), "extra_info", stripped)
    pq.write_table(table, tmp_path / "stripped.parquet")

    report = import_rows(str(tmp_path / "stripped.parquet"), tmp_path / "back", preset="verl",
                         mapping={"solution": "extra_info.solution"})
    assert "mbpp/3" not in report.written  # a calls task's ground truth is its test code, not i/o pairs
    [failure] = [f for f in report.failures if f.id == "mbpp/3"]
    assert "holds a function-call task's test code, not inputs and outputs" in failure.reason
    assert "'extra_info.verify_cli_task'" in failure.reason and "needs lists" not in failure.reason
    back = tmp_path / "back" / "apps" / "7"
    assert difficulty_bucket(difficulty_record(back)) == "interview"
    source = json.loads((back / "source.json").read_text())
    assert source["split"] == "test"

    # A stdio task with a measured record: the record itself comes back, not its JSON text.
    record = {"pass_rate": 0.25, "bucket": "hard", "n": 8, "model": "tiny", "date": "2026-11-30"}
    toml = task_set / "apps" / "8" / "task.toml"
    table_text = "".join(f"{k} = {json.dumps(v)}\n" for k, v in record.items())
    toml.write_text(toml.read_text() + "\n[difficulty]\n" + table_text)
    assert not export_tasks(task_set, "verl", tmp_path / "v2.parquet").skipped
    table = pq.read_table(tmp_path / "v2.parquet")
    info = table.column("extra_info").combine_chunks()
    stripped = pa.StructArray.from_arrays([info.field(n) for n in names], names=names)
    pq.write_table(table.set_column(table.schema.get_field_index("extra_info"), "extra_info", stripped),
                   tmp_path / "stripped2.parquet")
    import_rows(str(tmp_path / "stripped2.parquet"), tmp_path / "back2", preset="verl")
    assert difficulty_record(tmp_path / "back2" / "apps" / "8") == record


@pytest.mark.parametrize("bad_id", ["../../victim", "ABSOLUTE", "Upper/../x"])
def test_an_exported_row_cannot_write_outside_the_out_folder(task_set: Path, tmp_path: Path, bad_id: str) -> None:
    """The id in an exported row's task.toml names the folder the import writes (and replaces):
    a doctored row is that row's failure, and nothing outside --out is touched."""
    victim = tmp_path / "victim"
    victim.mkdir()
    absolute = tmp_path / "abs-victim"
    bad_id = bad_id.replace("ABSOLUTE", str(absolute))
    (victim / "keep.txt").write_text("precious")
    dest = export_tasks(task_set, "jsonl", tmp_path / "e.jsonl").out
    rows = [json.loads(line) for line in dest.read_text().splitlines()]
    payload = json.loads(rows[0]["verify_cli_task"])
    payload["task_toml"] = payload["task_toml"].replace(f'id = "{rows[0]["id"]}"', f'id = "{bad_id}"', 1)
    rows[0]["verify_cli_task"] = json.dumps(payload)
    payload = json.loads(rows[1]["verify_cli_task"])
    payload["task_toml"] = payload["task_toml"].replace('kind = "stdio"', 'kind = "bogus"', 1)
    rows[1]["verify_cli_task"] = json.dumps(payload)
    doctored = tmp_path / "doctored.jsonl"
    doctored.write_text("".join(json.dumps(r) + "\n" for r in rows))

    out = tmp_path / "a" / "b" / "out"
    report = import_rows(str(doctored), out, preset="verify")
    failed = {f.index: f.reason for f in report.failures}
    assert set(failed) == {0, 1} and failed[0].startswith("/id:") and failed[1].startswith("/kind:")
    assert (victim / "keep.txt").read_text() == "precious" and not absolute.exists()
    assert [p.name for p in victim.iterdir()] == ["keep.txt"]


def test_exports_carry_the_prompt_verify_cli_sends_and_a_task_id(tmp_path: Path) -> None:
    """The verl and JSONL rows hold the messages difficulty and train build (prompt.md, starter
    files, visible tests, answer format), not prompt.md alone, and a task_id column."""
    import datasets

    from tests.conftest import SAMPLE_TASKS
    from verify_cli.models.prompts import build_prompt
    from verify_cli.tasks import load_task

    task = load_task(SAMPLE_TASKS / "repo-orders-etl")
    sent = [dict(m) for m in build_prompt(task).messages]
    assert len(sent[-1]["content"]) > 3 * len(task.prompt)  # far more than prompt.md (1,033 of 14,648)
    verl = export_tasks(SAMPLE_TASKS / "repo-orders-etl", "verl", tmp_path / "verl")
    (vrow,) = datasets.load_dataset("parquet", data_files=str(verl.out), split="train")
    assert vrow["prompt"] == sent and vrow["extra_info"]["task_id"] == task.id
    jsonl = export_tasks(SAMPLE_TASKS / "repo-orders-etl", "jsonl", tmp_path / "tasks.jsonl")
    (jrow,) = [json.loads(line) for line in jsonl.out.read_text(encoding="utf-8").splitlines()]
    assert jrow["prompt"] == sent[-1]["content"] and jrow["messages"] == sent
    assert jrow["task_id"] == task.id and jrow["prompt_md"] == task.prompt
