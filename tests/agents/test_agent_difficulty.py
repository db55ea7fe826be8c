"""``verify-cli difficulty --agent``: each sample is an agent episode; a scripted policy that
writes the reference earns 1.0 on every task, one that submits the starter earns the starter's
pass rate, and the statistics, buckets and cache are difficulty's own."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.agents.conftest import Policy, PolicyServer
from tests.conftest import SAMPLE_TASKS
from verify_cli.agents.environment import EpisodeOutcome
from verify_cli.agents.episode import AgentEpisode, AgentTurn, EpisodeLimits
from verify_cli.agents.sampler import EpisodeStep, episode_completion, episode_status, limits_fingerprint
from verify_cli.cli.app import main
from verify_cli.difficulty.outputs import SAMPLES_FILE
from verify_cli.grading.grader import Grader, GradeRequest
from verify_cli.grading.workspace import Phase
from verify_cli.models.prompts import files_to_candidate
from verify_cli.sampling.status import SampleStatus
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

TASKS = [SAMPLE_TASKS / "coding-roman-numerals", SAMPLE_TASKS / "coding-interval-merge"]


def _task_of(messages: Sequence[dict[str, Any]], tasks: Sequence[Task]) -> Task:
    user = next(m["content"] for m in messages if m["role"] == "user")
    return next(t for t in tasks if t.prompt.strip() and t.prompt.strip() in user)


def _reference_policy(tasks: Sequence[Task]) -> Policy:
    """Write the reference's files, run the visible tests, submit."""

    def policy(messages: Sequence[dict[str, Any]]) -> list[tuple[str, Any]] | str:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if turn == 0:
            task = _task_of(messages, tasks)
            return [("write_file", {"path": rel, "content": p.read_text()}) for rel, p in task.solution_files().items()]
        return [("run_tests", {})] if turn == 1 else [("submit", {})]

    return policy


def _difficulty(tmp_path: Path, server: PolicyServer, model: str, out: str, *extra: str) -> dict[str, Any]:
    summary = tmp_path / f"{out}.json"
    folder = tmp_path / "tasks"
    if not folder.exists():
        folder.mkdir()
        for t in TASKS:
            shutil.copytree(t, folder / t.name)
    code = main(["difficulty", str(folder), "--agent", "--backend", "openai", "--model", model, "--base-url",
                 server.base_url, "--out", str(tmp_path / out), "--samples", "2", "-j", "2", "--sandbox", "bwrap",
                 "--cache-dir", str(tmp_path / "cache"), "--max-turns", "5", "--json", str(summary), *extra])
    assert code == 0
    return dict(json.loads(summary.read_text()))


@pytest.mark.bwrap
def test_difficulty_agent_gives_the_reference_one_and_the_starter_its_own_rate(policy_server: PolicyServer,
                                                                               tmp_path: Path) -> None:
    tasks = [load_task(t) for t in TASKS]
    policy_server.policies["reference"] = _reference_policy(tasks)
    policy_server.policies["starter"] = lambda messages: [("submit", {})]
    asked = len(policy_server.requests)
    doc = _difficulty(tmp_path, policy_server, "reference", "ref")
    rates = {t["task_id"]: (t["pass_rate"], t["n"], t["bucket"]) for t in doc["tasks"]}
    assert rates == {t.id: (1.0, 2, "solved") for t in tasks}
    assert doc["model"].startswith("agent/") and doc["model"].endswith("reference")
    assert len(policy_server.requests) - asked == 2 * 2 * 3  # 2 tasks x 2 episodes x 3 turns

    # The starter's own pass rate, graded the one-shot way.
    with create_sandbox("bwrap") as sb, Grader(sb) as grader:
        expected = {t.id: float(grader.grade(GradeRequest(
            task=t, phase=Phase.CANDIDATE,
            candidate=files_to_candidate({r: p.read_text() for r, p in t.starter_files().items()}))).passed)
            for t in tasks}
    doc = _difficulty(tmp_path, policy_server, "starter", "starter")
    assert {t["task_id"]: t["pass_rate"] for t in doc["tasks"]} == expected

    # Cached: the same run again asks the model nothing; other limits are other samples.
    asked = len(policy_server.requests)
    again = _difficulty(tmp_path, policy_server, "reference", "ref2")
    assert again["cached"] == 4 and again["generated"] == 0 and len(policy_server.requests) == asked
    other = _difficulty(tmp_path, policy_server, "reference", "ref3", "--max-turns", "6")
    assert other["cached"] == 0 and other["generated"] == 4
    rows = pq.read_table(tmp_path / "ref" / SAMPLES_FILE).to_pylist()
    assert len(rows) == 4 and {r["finish_reason"] for r in rows} == {"submit"}
    assert all(len(json.loads(r["completion"])["turns"]) == 3 for r in rows)


def _episode(outcome: EpisodeOutcome | None, end: str = "submit") -> AgentEpisode:
    ep = AgentEpisode(task_id="t", end_reason=end, outcome=outcome)
    ep.turns.append(AgentTurn(0, "x", [], [], 0.1, 0.2, token_ids=(1, 2)))
    return ep


def test_an_episode_maps_onto_the_one_status_vocabulary() -> None:
    task = load_task(TASKS[0])
    dead = _episode(EpisodeOutcome("failed", 0.0, "the agent's session died: killed"), end="session_dead")
    broken = _episode(EpisodeOutcome("infra_error", None, "the daemon went away"), end="infra_error")
    assert episode_status(dead) is SampleStatus.FAILED
    assert episode_status(broken) is SampleStatus.INFRA_ERROR
    assert episode_status(_episode(None)) is SampleStatus.INFRA_ERROR
    sample = EpisodeStep().run(task, episode_completion(dead))
    assert sample.status is SampleStatus.FAILED and sample.score == 0.0 and "died" in sample.problems[0]
    assert EpisodeStep().run(task, episode_completion(broken)).status is SampleStatus.INFRA_ERROR
    completion = episode_completion(dead)
    assert completion.token_ids == (1, 2) and completion.finish_reason == "session_dead"
    # The cache identity names the limits.
    assert limits_fingerprint(EpisodeLimits()) != limits_fingerprint(EpisodeLimits(max_turns=3))
