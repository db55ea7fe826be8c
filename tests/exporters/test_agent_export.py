"""Tasks as agent training data: verl's tool-agent Parquet and TRL's environment rows, repository
tasks included (listed, never pasted whole; hidden tests never shown)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from tests.conftest import SAMPLE_TASKS
from verify_cli.agents.tools import TOOLS
from verify_cli.cli.app import main
from verify_cli.exporters.agent import VERL_AGENT_SCHEMA
from verify_cli.tasks import load_task_set


def _hidden_lines() -> list[str]:
    """Lines only the hidden tests hold (an import or a `with pytest.raises` both may share)."""
    visible = {ln.strip() for p in SAMPLE_TASKS.glob("*/tests/**/*.py") for ln in p.read_text().splitlines()}
    visible |= {ln.strip() for p in SAMPLE_TASKS.glob("*/starter/**/*") if p.is_file()
                for ln in p.read_text(errors="replace").splitlines()}
    return [ln.strip() for p in SAMPLE_TASKS.glob("*/hidden_tests/**/*.py") for ln in p.read_text().splitlines()
            if len(ln.strip()) > 30 and ln.strip() not in visible]


def test_verl_agent_rows_carry_the_first_messages_and_each_tools_task(tmp_path: Path) -> None:
    out = tmp_path / "agent.parquet"
    assert main(["export", str(SAMPLE_TASKS), "--format", "verl-agent", "--out", str(out)]) == 0
    table = pq.read_table(out)
    assert table.schema.equals(VERL_AGENT_SCHEMA, check_metadata=False)
    rows = table.to_pylist()
    ids = sorted(t.id for t in load_task_set(SAMPLE_TASKS))  # type: ignore[union-attr]
    assert sorted(r["extra_info"]["task_id"] for r in rows) == ids
    hidden = _hidden_lines()
    for r in rows:
        assert r["agent_name"] == "tool_agent" and r["reward_model"]["ground_truth"] == r["extra_info"]["task_id"]
        assert [m["role"] for m in r["prompt"]] == ["system", "user"]
        kwargs = r["extra_info"]["tools_kwargs"]
        assert set(kwargs) == {t.name for t in TOOLS}
        assert all(v["create_kwargs"]["task_id"] == r["extra_info"]["task_id"] for v in kwargs.values())
        assert not any(line in r["prompt"][1]["content"] for line in hidden)
    repo = next(r for r in rows if r["extra_info"]["task_id"] == "repository/inventory-package")
    assert "## The work folder (14 files)" in repo["prompt"][1]["content"]  # listed, not pasted


def test_trl_agent_rows_name_the_task_for_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "agent.jsonl"
    assert main(["export", str(SAMPLE_TASKS / "repo-orders-etl"), "--format", "trl-agent", "--out", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["task_id"] == "repository/orders-etl" and row["prompt"][0]["role"] == "system"
    assert "run_tests" in row["prompt"][1]["content"]
