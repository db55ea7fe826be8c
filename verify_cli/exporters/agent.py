"""Tasks as agent training data: verl's multi-turn tool-agent rows and TRL's environment rows.

Both carry the episode's first messages (the agent's system message and the task as
:func:`verify_cli.agents.episode.task_message` shows it: a repository is listed, not pasted) and
the task id the environment opens a session for; the reward comes from verify-cli's trusted
grade at ``submit`` (``verify-cli serve`` sessions, through :mod:`verify_cli.adapters`):

- ``verl-agent`` (Parquet): verl's layout plus ``agent_name = "tool_agent"`` and
  ``extra_info.tools_kwargs`` (each of the five tools' ``create_kwargs`` naming the task), the
  form verl's tool agent loop passes to :class:`verify_cli.adapters.VerifyCliTool`; write the
  tool config with :func:`verify_cli.adapters.tool_config`.
- ``trl-agent`` (JSONL): ``prompt`` (the messages) and ``task_id``, the columns TRL's
  environment mode hands to :class:`verify_cli.adapters.VerifyCliTaskEnvironment`'s ``reset``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from verify_cli.agents.episode import first_messages
from verify_cli.agents.tools import TOOLS
from verify_cli.tasks.model import Task

#: The agent loop verl runs these rows with.
VERL_AGENT_NAME = "tool_agent"

_MESSAGES = pa.list_(pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())]))
_TOOLS_KWARGS = pa.struct([
    pa.field(t.name, pa.struct([pa.field("create_kwargs", pa.struct([pa.field("task_id", pa.string())]))]))
    for t in TOOLS])

#: verl's multi-turn tool-agent data set layout, declared once.
VERL_AGENT_SCHEMA = pa.schema([
    pa.field("data_source", pa.string(), nullable=False, metadata={"doc": "verify-cli/<domain>"}),
    pa.field("prompt", _MESSAGES, nullable=False,
             metadata={"doc": "the episode's first messages: the agent's system message and the task"}),
    pa.field("ability", pa.string(), nullable=False, metadata={"doc": "the task's domain"}),
    pa.field("agent_name", pa.string(), nullable=False, metadata={"doc": "verl's agent loop: tool_agent"}),
    pa.field("reward_model", pa.struct([pa.field("style", pa.string()), pa.field("ground_truth", pa.string())]),
             nullable=False, metadata={"doc": "style 'verify-cli'; ground_truth is the task id (graded at submit)"}),
    pa.field("extra_info", pa.struct([
        pa.field("index", pa.int64()),
        pa.field("split", pa.string()),
        pa.field("task_id", pa.string()),
        pa.field("need_tools_kwargs", pa.bool_()),
        pa.field("tools_kwargs", _TOOLS_KWARGS),
    ]), nullable=False, metadata={"doc": "the task id, and each tool's create_kwargs (the session's task)"}),
])


def _messages(task: Task) -> list[dict[str, str]]:
    return [{"role": str(m["role"]), "content": str(m["content"])} for m in first_messages(task)]


def verl_agent_row(task: Task, index: int, split: str) -> dict[str, Any]:
    """One task as a row of :data:`VERL_AGENT_SCHEMA`."""
    return {
        "data_source": f"verify-cli/{task.domain}", "prompt": _messages(task), "ability": task.domain,
        "agent_name": VERL_AGENT_NAME, "reward_model": {"style": "verify-cli", "ground_truth": task.id},
        "extra_info": {"index": index, "split": split, "task_id": task.id, "need_tools_kwargs": True,
                       "tools_kwargs": {t.name: {"create_kwargs": {"task_id": task.id}} for t in TOOLS}},
    }


def trl_agent_row(task: Task, split: str) -> dict[str, Any]:
    """One task as a TRL environment-mode row."""
    return {"prompt": _messages(task), "task_id": task.id, "split": split, "domain": task.domain}


def write_verl_agent(tasks: Sequence[Task], out: Path, *, split: str = "train") -> Path:
    import pyarrow.parquet as pq

    dest = out if out.suffix == ".parquet" else out / "train.parquet"
    dest.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([verl_agent_row(t, i, split) for i, t in enumerate(tasks)],
                                 schema=VERL_AGENT_SCHEMA)
    pq.write_table(table, dest)
    return dest


def write_trl_agent(tasks: Sequence[Task], out: Path, *, split: str = "train") -> Path:
    dest = out if out.suffix in (".jsonl", ".ndjson") else out / "tasks.jsonl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with dest.open("w", encoding="utf-8") as fh:
        for t in tasks:
            fh.write(json.dumps(trl_agent_row(t, split), ensure_ascii=False) + "\n")
    return dest


__all__ = ["VERL_AGENT_NAME", "VERL_AGENT_SCHEMA", "trl_agent_row", "verl_agent_row", "write_trl_agent",
           "write_verl_agent"]
