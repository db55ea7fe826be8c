"""Trajectories out to TRL's and verl's multi-turn formats (``trajectories export``); one-shot
runs go to TRL through :mod:`verify_cli.rollout.export`, to verl here (their messages as they are).

Both take the episode as OpenAI-style chat messages rebuilt from the ``turns`` column: the
system and user messages, then per turn the assistant message with its ``tool_calls``
(``{"id", "type": "function", "function": {"name", "arguments"}}``, arguments as JSON text) and
one ``tool`` message per observation (``tool_call_id``, ``name``, the observation as the model
saw it), or a ``user`` message for the hint after a reply with no valid call.

- ``trl``: ``prompt`` (the messages before the first assistant turn) and ``completion`` (the
  rest), conversational, plus ``tools`` (the tools' JSON schemas) and the reward, advantage and
  identity columns.
- ``verl``: ``messages`` (the whole conversation) and ``tools`` (verl's multi-turn data reads
  them with ``data.multiturn.messages_key=messages`` and ``tools_key=tools``), plus the same
  columns; in Parquet, ``tools`` is JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from verify_cli.agents.tools import TOOLS
from verify_cli.errors import UsageError
from verify_cli.rollout.export import EXTRA_COLUMNS
from verify_cli.rollout.shards import read_run, run_schema, write_atomic

FORMATS = ("trl", "verl")


def tool_schemas() -> list[dict[str, Any]]:
    """The tools as an agent got them (OpenAI function schemas)."""
    return [t.openai() for t in TOOLS]


def episode_messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The episode of an agent row as chat messages with tool calls and tool results."""
    first = [dict(m) for m in row["messages"] if m["role"] in ("system", "user")][:2]
    messages: list[dict[str, Any]] = [{"role": m["role"], "content": m["content"]} for m in first]
    for turn in row["turns"] or ():
        assistant: dict[str, Any] = {"role": "assistant", "content": turn["text"]}
        if turn["tool_calls"]:
            assistant["tool_calls"] = [{"id": c["id"], "type": "function",
                                        "function": {"name": c["name"], "arguments": c["arguments"]}}
                                       for c in turn["tool_calls"]]
        messages.append(assistant)
        for obs in turn["observations"]:
            if obs["tool_call_id"]:
                messages.append({"role": "tool", "tool_call_id": obs["tool_call_id"], "name": obs["name"],
                                 "content": obs["text"]})
            else:
                messages.append({"role": "user", "content": obs["text"]})
    return messages


def agent_records(run_dir: Path, fmt: str, *, include_masked: bool = False) -> list[dict[str, Any]]:
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    agent = is_agent_run(run_dir)
    extra = ["turns", "end_reason"] if agent else []
    table = read_run(run_dir, columns=["messages", *extra, *EXTRA_COLUMNS, "masked"])
    tools = tool_schemas() if agent else []
    out = []
    for row in table.to_pylist():
        if row["masked"] and not include_masked:
            continue
        messages = episode_messages(row) if agent else [dict(m) for m in row["messages"]]
        if fmt == "trl":
            first = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
            record: dict[str, Any] = {"prompt": messages[:first], "completion": messages[first:], "tools": tools}
        else:
            record = {"messages": messages, "tools": tools}
        record.update({k: row[k] for k in EXTRA_COLUMNS})
        if agent:
            record["end_reason"] = row["end_reason"]
        out.append(record)
    return out


def is_agent_run(run_dir: Path) -> bool:
    return "turns" in run_schema(run_dir).names


def export_agent(run_dir: Path, dest: Path, fmt: str, *, include_masked: bool = False) -> int:
    """Write a run's trajectories (an agent run's with their tool calls) to ``dest`` (.jsonl or .parquet) in ``fmt``."""
    records = agent_records(run_dir, fmt, include_masked=include_masked)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.suffix == ".jsonl":
        write_atomic(dest, "".join(json.dumps(r) + "\n" for r in records).encode())
    elif dest.suffix == ".parquet":
        flat = [{**r, "tools": json.dumps(r["tools"])} for r in records]
        tmp = dest.with_name(f".{dest.name}.tmp")
        pq.write_table(pa.Table.from_pylist(flat), tmp)
        tmp.replace(dest)
    else:
        raise UsageError(f"{dest}: unknown export format", hint="name the file *.jsonl or *.parquet")
    return len(records)


__all__ = ["FORMATS", "agent_records", "episode_messages", "export_agent", "is_agent_run", "tool_schemas"]
