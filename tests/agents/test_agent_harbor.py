"""Agents in Harbor tasks: ``agent run`` opens the episode in the task's own environment (its
image, at its workdir), gives the instruction as the prompt, and grades the workdir's changes
with the isolated verifier: the oracle's changes earn 1.0, submitting at once earns 0, and the
classic hacks played by an agent earn 0."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import PolicyServer, scripted
from verify_cli.checks.probes.harbor_probes import REWARD_REWRITER, TROJAN_PYTHON3
from verify_cli.cli.app import main
from verify_cli.rollout.shards import read_run

pytestmark = pytest.mark.docker

SOUND = Path(__file__).resolve().parents[1] / "fixtures" / "harbor" / "sound"


def _run(policy_server: PolicyServer, name: str, task: Path, out: Path,
         sandbox: str = "docker") -> tuple[int, dict[str, object]]:
    code = main(["agent", "run", str(task), "--backend", "openai", "--model", name, "--base-url",
                 policy_server.base_url, "--sandbox", sandbox, "--json", str(out)])
    return code, json.loads(out.read_text())


@pytest.mark.parametrize("task_name", ["fix-sum", "partial-credit"])
def test_an_agent_doing_the_oracles_work_earns_1_and_one_submitting_at_once_earns_0(
        task_name: str, policy_server: PolicyServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = SOUND / task_name
    oracle = (task / "solution" / "solve.sh").read_text()
    policy_server.policies[f"oracle-{task_name}"] = scripted([[("bash", {"command": "pwd; ls"})],
                                                              [("bash", {"command": oracle})]])
    code, doc = _run(policy_server, f"oracle-{task_name}", task, tmp_path / "oracle.json")
    assert code == 0, capsys.readouterr().out
    assert doc["status"] == "passed" and doc["score"] == 1.0
    first = next(r for r in policy_server.requests if r["model"] == f"oracle-{task_name}")
    prompt = json.dumps(first["messages"])
    assert (task / "instruction.md").read_text().split()[1] in prompt  # the instruction is the prompt
    pwd = next(r for r in policy_server.requests if r["model"] == f"oracle-{task_name}" and len(r["messages"]) > 2)
    assert "/app" in json.dumps(pwd["messages"][-1])  # the session works where the task says

    policy_server.policies[f"idle-{task_name}"] = scripted([])
    code, doc = _run(policy_server, f"idle-{task_name}", task, tmp_path / "idle.json")
    assert code == 1 and doc["score"] == 0.0


def test_an_agent_playing_the_classic_hacks_earns_0(policy_server: PolicyServer, tmp_path: Path) -> None:
    policy_server.policies["hacker"] = scripted([[("bash", {"command": TROJAN_PYTHON3})],
                                                 [("bash", {"command": REWARD_REWRITER})]])
    code, doc = _run(policy_server, "hacker", SOUND / "fix-sum", tmp_path / "hacker.json")
    assert code == 1 and doc["score"] == 0.0


@pytest.mark.bwrap
def test_on_bwrap_the_episode_runs_in_a_writable_root_of_the_tasks_image(
        policy_server: PolicyServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``agent run --sandbox bwrap``: the session is a writable root over the image's exported root
    file system, at the task's workdir; the oracle's work earns 1.0, the classic hacks 0."""
    monkeypatch.setenv("VERIFY_CLI_ENV_DIR", str(tmp_path / "store"))
    task = SOUND / "fix-sum"
    oracle = (task / "solution" / "solve.sh").read_text()
    policy_server.policies["bwrap-oracle"] = scripted([[("bash", {"command": "pwd; ls"})],
                                                       [("bash", {"command": oracle})]])
    code, doc = _run(policy_server, "bwrap-oracle", task, tmp_path / "oracle.json", "bwrap")
    assert code == 0 and doc["status"] == "passed" and doc["score"] == 1.0, doc
    pwd = next(r for r in policy_server.requests if r["model"] == "bwrap-oracle" and len(r["messages"]) > 2)
    assert "/app" in json.dumps(pwd["messages"][-1]) and "calc.py" in json.dumps(pwd["messages"][-1])
    policy_server.policies["bwrap-hacker"] = scripted([[("bash", {"command": TROJAN_PYTHON3})],
                                                       [("bash", {"command": REWARD_REWRITER})]])
    code, doc = _run(policy_server, "bwrap-hacker", task, tmp_path / "hacker.json", "bwrap")
    assert code == 1 and doc["score"] == 0.0


def _oracle_policy() -> Any:
    """Play the oracle of whichever sound Harbor task the prompt is, then submit."""
    oracles = {p.name: (p / "solution" / "solve.sh").read_text() for p in sorted(SOUND.iterdir())}
    prompts = {p.name: (p / "instruction.md").read_text().strip() for p in sorted(SOUND.iterdir())}

    def policy(messages: Sequence[dict[str, Any]]) -> list[tuple[str, Any]] | str:
        user = next(m["content"] for m in messages if m["role"] == "user")
        name = next(n for n, text in prompts.items() if text in user)
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return [("bash", {"command": oracles[name]})] if turn == 0 else [("submit", {})]

    return policy


def test_train_agent_on_harbor_tasks(policy_server: PolicyServer, tmp_path: Path) -> None:
    """``train --agent`` over Harbor tasks: every episode's reward is the isolated verifier's."""
    policy_server.policies["harbor-train"] = _oracle_policy()
    run = tmp_path / "run"
    code = main(["train", str(SOUND), "--agent", "--backend", "openai", "--model", "harbor-train", "--backend-option",
                 f"base_url={policy_server.base_url}", "-G", "2", "-B", "2", "--steps", "1", "-j", "2",
                 "--sandbox", "docker", "--max-turns", "4", "--out", str(run)])
    assert code == 0
    rows = read_run(run).to_pylist()
    assert len(rows) == 4
    assert all(r["status"] == "ok" and r["reward"] == 1.0 and r["end_reason"] == "submit" for r in rows)


def test_difficulty_agent_on_harbor_tasks(policy_server: PolicyServer, tmp_path: Path) -> None:
    """``difficulty --agent`` over a folder of Harbor tasks: the oracle-playing policy solves each."""
    policy_server.policies["harbor-difficulty"] = _oracle_policy()
    summary = tmp_path / "summary.json"
    code = main(["difficulty", str(SOUND), "--agent", "--backend", "openai", "--model", "harbor-difficulty",
                 "--base-url", policy_server.base_url, "--out", str(tmp_path / "out"), "--samples", "2", "-j", "2",
                 "--sandbox", "docker", "--cache-dir", str(tmp_path / "cache"), "--max-turns", "4",
                 "--json", str(summary)])
    assert code == 0
    doc = json.loads(summary.read_text())
    assert {t["task_id"]: (t["pass_rate"], t["n"]) for t in doc["tasks"]} == {
        "fix-sum": (1.0, 2), "partial-credit": (1.0, 2)}
