"""Trajectories out to TRL's prompt-completion format (task sets go out through ``verify-cli export``).

Each unmasked trajectory becomes one record: ``prompt`` (the messages before the model's first
turn) and ``completion`` (the rest of the episode: every model turn, and in multi-turn episodes the
feedback between them), both conversational (lists of ``{"role", "content"}``), plus the reward,
advantage and identity columns. Written as JSON Lines or Parquet (by the file's suffix), both of
which ``datasets.load_dataset`` reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from verify_cli.errors import UsageError
from verify_cli.rollout.shards import read_run, write_atomic

EXTRA_COLUMNS = ("reward", "advantage", "status", "task_id", "step", "group_id", "sample_index", "run_id")


def trl_records(run_dir: Path, *, include_masked: bool = False) -> list[dict[str, Any]]:
    table = read_run(run_dir, columns=["messages", *EXTRA_COLUMNS, "masked"])
    out = []
    for row in table.to_pylist():
        if row["masked"] and not include_masked:
            continue
        messages = row["messages"]
        first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
        record = {"prompt": messages[:first], "completion": messages[first:]}
        record.update({k: row[k] for k in EXTRA_COLUMNS})
        out.append(record)
    return out


def export_trl(run_dir: Path, dest: Path, *, include_masked: bool = False) -> int:
    """Write the run's trajectories to ``dest`` (.jsonl or .parquet); returns the record count."""
    records = trl_records(run_dir, include_masked=include_masked)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.suffix == ".jsonl":
        write_atomic(dest, "".join(json.dumps(r) + "\n" for r in records).encode())
    elif dest.suffix == ".parquet":
        tmp = dest.with_name(f".{dest.name}.tmp")
        pq.write_table(pa.Table.from_pylist(records), tmp)
        tmp.replace(dest)
    else:
        raise UsageError(f"{dest}: unknown export format", hint="name the file *.jsonl or *.parquet")
    return len(records)
