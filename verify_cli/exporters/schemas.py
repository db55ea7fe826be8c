"""The exported tables' schemas, declared once (writers and tests use these)."""

from __future__ import annotations

import pyarrow as pa

#: verl's RL data set layout (what its RLHFDataset and reward managers read).
VERL_SCHEMA = pa.schema([
    pa.field("data_source", pa.string(), nullable=False,
             metadata={"doc": "where the task came from; verl picks a reward function by it"}),
    pa.field("prompt", pa.list_(pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())])),
             nullable=False, metadata={"doc": "chat messages verify-cli sends a model: its system message, "
                                               "then the task (prompt.md, starter files, visible tests, answer "
                                               "format)"}),
    pa.field("ability", pa.string(), nullable=False, metadata={"doc": "the task's domain"}),
    pa.field("reward_model", pa.struct([pa.field("style", pa.string()), pa.field("ground_truth", pa.string())]),
             nullable=False, metadata={"doc": "style 'rule'; ground_truth is JSON (stdio: inputs/outputs)"}),
    pa.field("extra_info", pa.struct([
        pa.field("index", pa.int64()),
        pa.field("split", pa.string()),
        pa.field("task_id", pa.string()),
        pa.field("kind", pa.string()),
        pa.field("entry_point", pa.string()),
        pa.field("solution", pa.string()),
        pa.field("difficulty", pa.string()),
        pa.field("difficulty_bucket", pa.string()),
        pa.field("verify_cli_task", pa.string()),
    ]), nullable=False, metadata={"doc": "task id, split, reference solution, difficulty (JSON) and "
                                         "the whole task folder (JSON) for a lossless import"}),
])

#: The generic row (JSONL and datasets exports).
ROW_SCHEMA = pa.schema([
    pa.field("id", pa.string(), nullable=False),
    pa.field("task_id", pa.string(), nullable=False, metadata={"doc": "the id again: the column TRL's reward "
                                                                      "function reads (task_column)"}),
    pa.field("title", pa.string()),
    pa.field("domain", pa.string()),
    pa.field("language", pa.string()),
    pa.field("kind", pa.string()),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("prompt", pa.string(), metadata={"doc": "the user message verify-cli sends a model for the task"}),
    pa.field("messages", pa.list_(pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string())])),
             metadata={"doc": "the same as chat messages, with verify-cli's system message"}),
    pa.field("prompt_md", pa.string(), metadata={"doc": "the task's prompt.md alone"}),
    pa.field("entry_point", pa.string()),
    pa.field("solution", pa.string()),
    pa.field("ground_truth", pa.string(), metadata={"doc": "JSON, as in the verl export"}),
    pa.field("difficulty", pa.string(), metadata={"doc": "JSON of the measured difficulty, or null"}),
    pa.field("difficulty_bucket", pa.string()),
    pa.field("data_source", pa.string()),
    pa.field("split", pa.string()),
    pa.field("verify_cli_task", pa.string(), metadata={"doc": "JSON of the whole task folder"}),
])
