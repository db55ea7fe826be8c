"""The Parquet schemas of difficulty's outputs, declared once; writers, readers and tests use these."""

from __future__ import annotations

import pyarrow as pa

from verify_cli.sampling.status import SampleStatus, describe


def _f(name: str, type_: pa.DataType, doc: str, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


#: difficulty.parquet: one row per task.
DIFFICULTY_SCHEMA = pa.schema([
    _f("task_id", pa.string(), "The task's id (task.toml).", nullable=False),
    _f("path", pa.string(), "The task folder."),
    _f("bucket", pa.string(), "unsolved, hard, medium, easy, solved, defective, unsampled or prompt_too_long.",
       nullable=False),
    _f("n", pa.int32(), "Samples graded (infrastructure errors excluded).", nullable=False),
    _f("correct", pa.int32(), "Samples that passed every test.", nullable=False),
    _f("pass_rate", pa.float64(), "correct / n (null when n is 0)."),
    _f("wilson_low", pa.float64(), "Lower end of the Wilson score interval of the pass rate.", nullable=False),
    _f("wilson_high", pa.float64(), "Upper end of the Wilson score interval of the pass rate.", nullable=False),
    _f("confidence", pa.float64(), "Confidence level of the interval (0.95).", nullable=False),
    _f("pass_at_k", pa.map_(pa.int32(), pa.float64()),
       "Unbiased pass@k (Chen et al. 2021) for each k asked; null where n < k."),
    _f("mean_score", pa.float64(), "Mean partial-credit score of the samples (the task's scoring policy)."),
    _f("visible_pass_rate", pa.float64(), "Pass rate on the visible tests alone (null when not known)."),
    _f("visible_pass_hidden_fail", pa.int32(),
       "Samples that passed every visible test and failed a hidden one (weak visible tests).", nullable=False),
    _f("passed", pa.int32(), "Samples with status passed.", nullable=False),
    _f("failed", pa.int32(), "Samples with status failed.", nullable=False),
    _f("timeout", pa.int32(), "Samples with status timeout.", nullable=False),
    _f("parse_error", pa.int32(), "Samples from which no file could be extracted.", nullable=False),
    _f("infra_error", pa.int32(), "Sandbox failures that persisted after retries (never counted in n).",
       nullable=False),
    _f("prompt_too_long", pa.int32(),
       "Samples never generated: the prompt does not fit the model's context (never counted in n).",
       nullable=False),
    _f("prompt_tokens", pa.int32(), "The prompt's length in the model's tokens (null where not counted)."),
    _f("stopped_early", pa.bool_(), "Adaptive sampling stopped once the bucket was decided.", nullable=False),
    _f("defect", pa.string(), "Why the task is defective (check-tasks), else empty."),
    _f("model", pa.string(), "The model (backend's model id).", nullable=False),
])

#: samples.parquet: one row per graded sample (reusable as training data).
SAMPLES_SCHEMA = pa.schema([
    _f("task_id", pa.string(), "The task's id.", nullable=False),
    _f("sample_index", pa.int32(), "Index of the sample within its task.", nullable=False),
    _f("completion", pa.string(), "The model's raw completion.", nullable=False),
    _f("files", pa.map_(pa.string(), pa.string()), "Files extracted from the completion (path to text)."),
    _f("status", pa.string(), f"{describe(tuple(SampleStatus))}.", nullable=False),
    _f("score", pa.float64(), "Partial-credit score (null for infra errors)."),
    _f("passed", pa.bool_(), "Every test passed.", nullable=False),
    _f("visible_passed", pa.bool_(), "Every visible test passed (null when not known)."),
    _f("tests", pa.list_(pa.struct([("id", pa.string()), ("outcome", pa.string())])), "Per-test outcomes."),
    _f("problems", pa.list_(pa.string()), "What grading or extraction found wrong."),
    _f("finish_reason", pa.string(), "Why generation stopped (stop, length)."),
    _f("token_ids", pa.list_(pa.int32()), "Generated token ids, where the backend gives them."),
    _f("gen_seconds", pa.float64(), "Generation time attributed to this sample."),
    _f("grade_seconds", pa.float64(), "Grading time, retries included."),
    _f("attempts", pa.int32(), "Grading attempts (infra errors are retried; 0 for parse errors)."),
    _f("model", pa.string(), "The model (backend's model id).", nullable=False),
])
