"""Trajectory shards: the declared schema, the manifest, atomic commits and crash recovery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from verify_cli.rollout.schema import TRAJECTORY_SCHEMA, field_docs
from verify_cli.rollout.shards import (
    MANIFEST,
    ShardWriter,
    committed_steps,
    read_manifest,
    read_run,
    recover,
    split_groups,
    verify_run,
)


def make_row(step: int, group: int, sample: int) -> dict[str, Any]:
    return {
        "run_id": "r", "step": step, "task_id": f"t{group}", "group_id": f"r/{step}/{group}",
        "group_index": group, "sample_index": sample, "policy_version": 0, "model": "m",
        "sampling": {"n": 2, "temperature": 1.0, "top_p": 1.0, "max_tokens": 4, "seed": 7},
        "sandbox_backend": "process", "sandbox_image": "python", "prompt_token_ids": [1, 2],
        "response_token_ids": [3], "response_mask": [1], "response_logprobs": [-0.5], "prompt": "p",
        "response": "x", "messages": [{"role": "user", "content": "p"}], "num_turns": 1,
        "finish_reason": "stop", "reward": 1.0,
        "reward_components": {"score": 1.0, "format_penalty": 0.0, "length_penalty": 0.0},
        "status": "ok", "masked": False, "tests_passed": 1, "tests_total": 1, "grade_attempts": 1,
        "problems": [], "advantage": 0.0, "group_reward_mean": 1.0, "group_reward_std": 0.0,
        "generation_seconds": 0.1, "grading_seconds": 0.1,
    }


def test_every_column_is_documented() -> None:
    docs = field_docs()
    assert set(docs) == set(TRAJECTORY_SCHEMA.names)
    assert all(docs.values())


def test_a_row_with_a_missing_column_is_refused(tmp_path: Path) -> None:
    row = make_row(0, 0, 0)
    del row["advantage"]
    with pytest.raises(ValueError, match="advantage"):
        ShardWriter(tmp_path).write_step(0, [row])


def test_groups_are_never_split_across_shards(tmp_path: Path) -> None:
    rows = [make_row(0, g, s) for g in range(5) for s in range(3)]
    assert [len(p) for p in split_groups(rows, 7)] == [6, 6, 3]
    entries = ShardWriter(tmp_path, max_rows_per_shard=7, row_group_rows=2).write_step(0, rows)
    assert [e.rows for e in entries] == [6, 6, 3] and {e.parts for e in entries} == {3}
    seen: dict[str, str] = {}
    for e in entries:
        table = pq.read_table(tmp_path / e.shard)
        for gid in table.column("group_id").to_pylist():
            assert seen.setdefault(gid, e.shard) == e.shard
        assert pq.ParquetFile(tmp_path / e.shard).metadata.num_row_groups == (e.rows + 1) // 2
    assert verify_run(tmp_path) == []
    assert read_run(tmp_path).num_rows == 15
    assert read_run(tmp_path).schema.equals(TRAJECTORY_SCHEMA, check_metadata=False)


def test_checksum_mismatch_is_reported(tmp_path: Path) -> None:
    (entry,) = ShardWriter(tmp_path).write_step(0, [make_row(0, 0, 0)])
    with (tmp_path / entry.shard).open("ab") as f:
        f.write(b"x")
    assert any("checksum" in p for p in verify_run(tmp_path))


def test_recover_keeps_committed_steps_only(tmp_path: Path) -> None:
    w = ShardWriter(tmp_path, max_rows_per_shard=2)
    w.write_step(0, [make_row(0, g, 0) for g in range(2)])
    w.write_step(1, [make_row(1, g, 0) for g in range(4)])  # two parts
    manifest = tmp_path / MANIFEST
    lines = manifest.read_text().splitlines(keepends=True)
    # A crash after the first shard line of step 1 and halfway through the second.
    manifest.write_text(lines[0] + lines[1] + lines[2][:20])
    (tmp_path / "shards" / ".step-000002-000.parquet.tmp").write_bytes(b"half")
    assert committed_steps(tmp_path) == [0]
    entries = recover(tmp_path)
    assert [e.step for e in entries] == [0]
    assert manifest.read_text() == lines[0]
    assert sorted(p.name for p in (tmp_path / "shards").iterdir()) == ["step-000000-000.parquet"]
    assert read_manifest(tmp_path) == entries
