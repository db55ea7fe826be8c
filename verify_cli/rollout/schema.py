"""The one declaration of a trajectory row: a pyarrow schema with a doc on every field.

Writers, readers, the inspector, the TRL export and the tests all use :data:`TRAJECTORY_SCHEMA`.
One row is one sampled episode (all its turns) for one task in one group of one step.
Token columns hold everything an RL trainer needs to replay the sample token for token; the
text columns are for people and for trainers that re-tokenise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from verify_cli.sampling.status import TRAJECTORY_LABELS, describe

SCHEMA_VERSION = 1


def _f(name: str, type_: pa.DataType, doc: str, *, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


SAMPLING_TYPE = pa.struct([
    _f("n", pa.int32(), "group size G: completions sampled per task"),
    _f("temperature", pa.float32(), "sampling temperature"),
    _f("top_p", pa.float32(), "nucleus sampling threshold"),
    _f("max_tokens", pa.int32(), "most new tokens per turn"),
    _f("seed", pa.int64(), "the seed the group was sampled under (derived from the run seed and the step)"),
])

MESSAGE_TYPE = pa.struct([
    _f("role", pa.string(), "system, user (prompt, feedback) or assistant (model output)"),
    _f("content", pa.string(), "the message text"),
])

COMPONENTS_TYPE = pa.struct([
    _f("score", pa.float64(), "the task's partial-credit score from per-test outcomes, hidden tests "
                             "included (0 for parse errors)", nullable=True),
    _f("format_penalty", pa.float64(), "shaping: <= 0 when the completion could not be parsed"),
    _f("length_penalty", pa.float64(), "shaping: <= 0 when the response ran past the soft length"),
])

TRAJECTORY_SCHEMA = pa.schema([
    # identity
    _f("run_id", pa.string(), "the run this row belongs to (stable across --resume)"),
    _f("step", pa.int32(), "the rollout step (0-based)"),
    _f("task_id", pa.string(), "the task's id from task.toml"),
    _f("group_id", pa.string(), "run/step/group: all rows sharing it form one GRPO group"),
    _f("group_index", pa.int32(), "position of the group within its step"),
    _f("sample_index", pa.int32(), "position of the sample within its group"),
    # provenance
    _f("policy_version", pa.int64(), "number of policy updates applied before this sample was drawn"),
    _f("model", pa.string(), "the model backend and model name"),
    _f("sampling", SAMPLING_TYPE, "sampling parameters of this sample, seed included"),
    _f("sandbox_backend", pa.string(), "the sandbox backend that graded this sample"),
    _f("sandbox_image", pa.string(),
       "the task's environment: env:IDENTITY of a built one, else the Docker image or local runtime"),
    # tokens
    _f("prompt_token_ids", pa.list_(pa.int32()), "token ids of the first prompt"),
    _f("response_token_ids", pa.list_(pa.int32()),
       "token ids after the prompt: every model turn and, between them, every feedback turn"),
    _f("response_mask", pa.list_(pa.int8()),
       "1 for a token the model generated (trained on), 0 for feedback tokens (not trained on)"),
    _f("response_logprobs", pa.list_(pa.float32()),
       "per-token log-probability under the sampling policy, aligned with response_token_ids "
       "(0 where the mask is 0); null when the backend gives none", nullable=True),
    # text
    _f("prompt", pa.string(), "the first prompt as text"),
    _f("response", pa.string(), "the model's final turn as text"),
    _f("messages", pa.list_(MESSAGE_TYPE), "the whole episode as chat messages (multi-turn)"),
    _f("num_turns", pa.int32(), "model turns in the episode"),
    _f("finish_reason", pa.string(), "why the last turn stopped: stop or length"),
    # reward
    _f("reward", pa.float64(), "total reward (score + shaping); null when masked", nullable=True),
    _f("reward_components", COMPONENTS_TYPE, "the reward's parts, reported separately"),
    _f("status", pa.string(), describe(TRAJECTORY_LABELS)),
    _f("masked", pa.bool_(), "true when the sample must not be trained on (sandbox_error, prompt_too_long)"),
    _f("tests_passed", pa.int32(), "tests passed in the final grading, hidden tests included"),
    _f("tests_total", pa.int32(), "tests reported in the final grading, hidden tests included"),
    _f("grade_attempts", pa.int32(), "sandbox runs of the final turn (retries after infra errors)"),
    _f("problems", pa.list_(pa.string()), "what grading found wrong with the evidence, if anything"),
    # advantage
    _f("advantage", pa.float64(), "GRPO advantage; null when masked", nullable=True),
    _f("group_reward_mean", pa.float64(), "mean reward over the group's unmasked samples", nullable=True),
    _f("group_reward_std", pa.float64(), "std of the group's unmasked rewards (Bessel-corrected)",
       nullable=True),
    # timing
    _f("generation_seconds", pa.float64(), "time spent generating this sample's turns"),
    _f("grading_seconds", pa.float64(), "time spent grading this sample (all turns and retries)"),
], metadata={"verify_cli.schema": "trajectory", "verify_cli.schema_version": str(SCHEMA_VERSION)})

TOOL_CALL_TYPE = pa.struct([
    _f("id", pa.string(), "the call's id (the observation answering it names it)"),
    _f("name", pa.string(), "the tool: bash, read_file, write_file, run_tests or submit"),
    _f("arguments", pa.string(), "the arguments as JSON text, as the model wrote them"),
])

OBSERVATION_TYPE = pa.struct([
    _f("tool_call_id", pa.string(), "the call it answers (empty: a hint after a reply with no valid call)"),
    _f("name", pa.string(), "the tool that ran"),
    _f("text", pa.string(), "the observation exactly as the model saw it (truncated head and tail)"),
    _f("error", pa.bool_(), "true for a malformed call or a failed tool"),
    _f("truncated_chars", pa.int64(), "characters cut from the observation"),
])

TURN_TYPE = pa.struct([
    _f("index", pa.int32(), "the turn (0-based)"),
    _f("text", pa.string(), "the model's reply text"),
    _f("tool_calls", pa.list_(TOOL_CALL_TYPE), "the reply's tool calls, in order"),
    _f("observations", pa.list_(OBSERVATION_TYPE), "what the tools returned, as the model saw it"),
    _f("finish_reason", pa.string(), "why the reply stopped: stop, length or tool_calls"),
    _f("generation_seconds", pa.float64(), "time the model took for the reply"),
    _f("execution_seconds", pa.float64(), "time the reply's tool calls took in the session"),
    _f("prompt_tokens", pa.int32(), "tokens of the prompt the reply was generated from (0: not given)"),
    _f("response_tokens", pa.int32(), "tokens the model generated in the reply (0: not given)"),
])

#: An agent trajectory row: every column of :data:`TRAJECTORY_SCHEMA` (one-shot shards keep its
#: bytes), then every turn and how the episode ended. In agent rows ``messages`` holds the
#: conversation (tool results as ``tool`` messages); the token columns hold the model's tokens
#: of every turn (mask 1) and the observation/template tokens between them (mask 0), empty where
#: the backend gives no token ids.
AGENT_TRAJECTORY_SCHEMA = pa.schema([
    *TRAJECTORY_SCHEMA,
    _f("turns", pa.list_(TURN_TYPE), "every model turn of the agent episode with its tool calls and observations"),
    _f("end_reason", pa.string(), "how the episode ended: submit, max_turns, token_budget, wall, session_dead "
                                  "or infra_error"),
], metadata={"verify_cli.schema": "agent-trajectory", "verify_cli.schema_version": str(SCHEMA_VERSION)})

#: Columns that measure the machine rather than the policy: excluded when comparing runs.
TIMING_COLUMNS = ("generation_seconds", "grading_seconds")


def field_docs() -> dict[str, str]:
    """Every top-level column and its doc."""
    return {f.name: (f.metadata or {}).get(b"doc", b"").decode() for f in TRAJECTORY_SCHEMA}


def rows_to_table(rows: Sequence[Mapping[str, Any]], schema: pa.Schema = TRAJECTORY_SCHEMA) -> pa.Table:
    """A table in the declared schema (one-shot or agent); a missing or extra column is an error, not a guess."""
    names = schema.names
    for i, row in enumerate(rows):
        if set(row) != set(names):
            missing = sorted(set(names) - set(row))
            extra = sorted(set(row) - set(names))
            raise ValueError(f"trajectory row {i} does not match the schema: missing {missing}, extra {extra}")
    return pa.Table.from_pylist([dict(r) for r in rows], schema=schema)
