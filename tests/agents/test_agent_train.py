"""``verify-cli train --agent``: groups of agent episodes, every turn in the shards (the agent
schema, the one-shot schema's bytes unchanged), exports in TRL's and verl's multi-turn forms,
token ids with observation tokens masked, and SIGKILL + --resume losing or duplicating nothing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.agents.conftest import PolicyServer
from tests.agents.test_agent_difficulty import TASKS, _reference_policy
from tests.rollout.conftest import TOY_TASKS
from verify_cli.cli.app import main
from verify_cli.rollout.schema import AGENT_TRAJECTORY_SCHEMA, TIMING_COLUMNS, TRAJECTORY_SCHEMA
from verify_cli.rollout.shards import read_manifest, read_run, verify_run
from verify_cli.tasks.loader import load_task

REPO = Path(__file__).resolve().parents[2]
CHILD = REPO / "tests" / "rollout" / "train_child.py"

#: The one-shot schema's serialised bytes, as they were before agent rows existed (but for the
#: docs of status and masked, which name the status prompt_too_long since issue 37, and of
#: sandbox_image, which names a built environment's env:IDENTITY since issue 34: field docs
#: only, the columns and types are those of before).
ONE_SHOT_SCHEMA_SHA256 = "96508339e7b1307b0b51d6e420229f70b7395bc22d88fa4a25fe651b565c406d"


def test_the_one_shot_schema_keeps_its_bytes_and_the_agent_schema_extends_it() -> None:
    assert hashlib.sha256(TRAJECTORY_SCHEMA.serialize().to_pybytes()).hexdigest() == ONE_SHOT_SCHEMA_SHA256
    assert AGENT_TRAJECTORY_SCHEMA.names[:len(TRAJECTORY_SCHEMA)] == TRAJECTORY_SCHEMA.names
    assert AGENT_TRAJECTORY_SCHEMA.names[len(TRAJECTORY_SCHEMA):] == ["turns", "end_reason"]
    assert all((f.metadata or {}).get(b"doc") for f in AGENT_TRAJECTORY_SCHEMA)


@pytest.mark.bwrap
def test_train_agent_writes_every_turn_and_exports_multi_turn(policy_server: PolicyServer, tmp_path: Path) -> None:
    tasks = [load_task(t) for t in TASKS]
    policy_server.policies["train-ref"] = _reference_policy(tasks)
    folder = tmp_path / "tasks"
    folder.mkdir()
    for t in TASKS:
        shutil.copytree(t, folder / t.name)
    run = tmp_path / "run"
    code = main(["train", str(folder), "--agent", "--backend", "openai", "--model", "train-ref", "--backend-option",
                 f"base_url={policy_server.base_url}", "-G", "2", "-B", "2", "--steps", "1", "-j", "2",
                 "--sandbox", "bwrap", "--max-turns", "5", "--out", str(run)])
    assert code == 0
    assert verify_run(run) == []
    shard = run / read_manifest(run)[0].shard
    assert pq.read_schema(shard).equals(AGENT_TRAJECTORY_SCHEMA, check_metadata=False)
    rows = read_run(run).to_pylist()
    assert len(rows) == 4
    for r in rows:
        assert r["status"] == "ok" and r["reward"] == 1.0 and r["end_reason"] == "submit" and r["num_turns"] == 3
        names = [[c["name"] for c in t["tool_calls"]] for t in r["turns"]]
        assert names[1:] == [["run_tests"], ["submit"]] and set(names[0]) == {"write_file"}
        assert " 0 failed" in r["turns"][1]["observations"][0]["text"]
        # The openai backend gives no token ids: the token columns stay empty.
        assert r["response_token_ids"] == [] and r["response_mask"] == []
        assert [m["role"] for m in r["messages"]].count("tool") == len(names[0]) + 2
    trl, verl = tmp_path / "trl.jsonl", tmp_path / "verl.jsonl"
    assert main(["trajectories", "export", str(run), "--out", str(trl)]) == 0
    assert main(["trajectories", "export", str(run), "--out", str(verl), "--format", "verl"]) == 0
    rec = json.loads(trl.read_text().splitlines()[0])
    assert [m["role"] for m in rec["prompt"]] == ["system", "user"]
    assert rec["completion"][0]["role"] == "assistant" and rec["completion"][0]["tool_calls"][0]["type"] == "function"
    assert {t["function"]["name"] for t in rec["tools"]} == {"bash", "read_file", "write_file", "run_tests", "submit"}
    v = json.loads(verl.read_text().splitlines()[0])
    assert v["messages"][:2] == rec["prompt"] and v["messages"][2:] == rec["completion"]
    tool = next(m for m in v["messages"] if m["role"] == "tool")
    assert tool["tool_call_id"].startswith("call_") and tool["content"]


def _child(args: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, str(CHILD), json.dumps(args)], env=env, text=True,
                          capture_output=True, timeout=600)


def _comparable(run: Path) -> list[dict[str, Any]]:
    rows = read_run(run).to_pylist()
    for r in rows:
        for col in (*TIMING_COLUMNS, "run_id"):
            del r[col]
        r["group_id"] = r["group_id"].split("/", 1)[1]
        for t in r["turns"]:
            t["generation_seconds"] = t["execution_seconds"] = 0.0
    return sorted(rows, key=lambda r: (r["step"], r["group_index"], r["sample_index"]))


AGENT_RUN = {"tasks": str(TOY_TASKS), "group_size": 2, "batch_size": 2, "steps": 2, "seed": 5, "max_tokens": 3,
             "update": "none", "max_rows_per_shard": 2, "agent": 2}


@pytest.mark.bwrap
@pytest.mark.slow
def test_an_agent_run_killed_mid_step_and_resumed_has_exactly_the_rows_of_an_uninterrupted_run(
        toy_model: Path, tmp_path: Path) -> None:
    whole = _child({**AGENT_RUN, "model": str(toy_model), "out": str(tmp_path / "whole")})
    assert whole.returncode == 0, whole.stderr[-3000:]
    common = {**AGENT_RUN, "model": str(toy_model), "out": str(tmp_path / "crashed")}
    crashed = _child({**common, "kill_at": 1, "kill_point": "between_shards"})
    assert crashed.returncode == -9, crashed.stderr[-3000:]
    assert {e.step for e in read_manifest(tmp_path / "crashed")} == {0}
    resumed = _child({**common, "resume": True})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert verify_run(tmp_path / "crashed") == []
    expected, got = _comparable(tmp_path / "whole"), _comparable(tmp_path / "crashed")
    assert len(got) == 2 * 2 * 2 and got == expected
    # hf gives token ids: the model's tokens of both turns (mask 1), the observation between (mask 0).
    for r in got:
        assert len(r["turns"]) == 2 and r["end_reason"] == "max_turns"
        mask = r["response_mask"]
        assert len(mask) == len(r["response_token_ids"]) > 0 and r["prompt_token_ids"]
        first = r["turns"][0]["response_tokens"]
        assert mask[:first] == [1] * first and 0 in mask
        assert sum(mask) == sum(t["response_tokens"] for t in r["turns"])

    # GRPO over these rows: the model's tokens of every turn are trained, observation tokens not;
    # stored log-probabilities are the sampling policy's (ratio 1 before the update).
    import torch
    from transformers import AutoModelForCausalLM

    from verify_cli.rollout.grpo import GRPOConfig, GRPOTrainer, TrainSample

    two = got[:2]
    for r in two:
        lps = r["response_logprobs"]
        assert lps is not None and all(lp == 0.0 for lp, m in zip(lps, r["response_mask"], strict=True) if m == 0)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(toy_model)
    stats = GRPOTrainer(model, GRPOConfig(lr=1e-2)).step(
        [TrainSample(r["prompt_token_ids"], r["response_token_ids"], r["response_mask"], r["response_logprobs"], adv)
         for r, adv in zip(two, (1.0, -1.0), strict=True)])
    assert stats.trained_tokens == sum(sum(r["response_mask"]) for r in two)
    assert abs(stats.ratio_mean - 1.0) < 1e-3
