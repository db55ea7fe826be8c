"""verl's own reward manager and tool loop on verify-cli's adapters: the real verl from PyPI.

verl 0.9.1 pins transformers<5.11, so it is installed beside the venv (scripts/setup.sh,
scripts/extras/verl.txt) and runs in a child process (verl_driver.py): verl's ``RewardLoopManager``
on Ray scores a batch built from ``verify-cli export --format verl`` rows with
``reward.custom_reward_function`` naming ``verify_cli/adapters/verl.py``; its ``RewardLoopWorker``
meets an infrastructure error; verl's tool registry and ``ToolAgentLoop._call_tool`` drive
``VerifyCliTool`` over a real service. The grades it reports are checked here against verify-cli's
own grades of the same completions, graded again in this process.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.framework_extras import pinned, require, run_child
from tests.conftest import REPO_ROOT, SAMPLE_TASKS

pytestmark = [pytest.mark.bwrap, pytest.mark.ray, pytest.mark.slow]

DRIVER = Path(__file__).with_name("verl_driver.py")
ROMAN, MERGE = "coding-roman-numerals", "coding-interval-merge"


def fenced(name: str, text: str) -> str:
    return f"```python {name}\n{text}```\n"


@pytest.fixture(scope="module")
def verl_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require("verl")
    from tests.service.conftest import start_server
    from verify_cli.exporters.run import export_tasks
    from verify_cli.models.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("verl")
    tasks = root / "tasks"
    for name in (ROMAN, MERGE):
        shutil.copytree(SAMPLE_TASKS / name, tasks / name)
    assert not export_tasks(tasks, "verl", root / "train.parquet").skipped
    model = build_tiny_model(root / "model", hidden_size=16, layers=1, heads=2)
    roman = (tasks / ROMAN / "solution" / "roman.py").read_text()
    (merge_file,) = sorted((tasks / MERGE / "solution").iterdir())
    completions = [
        ["coding/roman-numerals", fenced("roman.py", roman)],  # the reference
        ["coding/interval-merge", fenced(merge_file.name, merge_file.read_text())],  # the reference
        ["coding/interval-merge", "I would merge the intervals, but here is no code."],  # nothing to grade
        ["coding/roman-numerals", fenced("roman.py", (tasks / ROMAN / "starter" / "roman.py").read_text())],
        # half right: from_roman is broken again after the reference's
        ["coding/roman-numerals", fenced("roman.py", roman + "\n\ndef from_roman(s):\n    return 0\n")],
    ]
    served = start_server([tasks], "--jobs", "1", "--max-sessions", "2")
    try:
        result = run_child("verl", DRIVER, {
            "modes": ["reward", "infra", "tool", "trajectories"], "tasks": str(tasks), "model": str(model),
            "parquet": str(root / "train.parquet"), "cache": str(root), "completions": completions,
            "prompt_length": 4096, "response_length": 4096, "url": served.url, "task_id": "coding/roman-numerals",
            "max_tool_response_length": 200,
            "calls": [["bash", {"command": "echo state > mark.txt; ls"}], ["read_file", {"path": "mark.txt"}],
                      ["write_file", {"path": "roman.py", "content": roman}], ["run_tests", {}],
                      ["bash", {"command": "python3 -c \"print('x' * 1000)\""}], ["submit", {}],
                      ["bash", {"command": "ls"}]],
            "trajectories": [
                # wrote the right file and submitted; its text holds no code
                {"task_id": "coding/roman-numerals", "text": "I wrote roman.py and submitted it.",
                 "calls": [["write_file", {"path": "roman.py", "content": roman}], ["submit", {}]]},
                # pasted the reference into its text, left the session's starter as it was, never submitted
                {"task_id": "coding/roman-numerals", "text": fenced("roman.py", roman),
                 "calls": [["bash", {"command": "ls"}]]},
                # no tool call at all: its session never opened
                {"task_id": "coding/roman-numerals", "text": fenced("roman.py", roman), "calls": []},
            ],
        }, root / "out.json")
        sessions_left = httpx.get(f"{served.url}/healthz").json()["sessions_open"]
    finally:
        served.stop()
    return {"result": result, "completions": completions, "tasks": tasks, "sessions_left": sessions_left}


def mode(verl_run: dict[str, Any], name: str) -> dict[str, Any]:
    out: dict[str, Any] = verl_run["result"][name]
    assert "error" not in out, out["error"]
    return out


def test_the_pinned_verl_is_the_one_the_extra_names(verl_run: dict[str, Any]) -> None:
    import tomllib

    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["verl"]
    assert extra == [f"verl=={pinned('verl')['verl']}"]
    assert verl_run["result"]["verl_version"] == pinned("verl")["verl"]


def test_verls_reward_manager_scores_the_batch_with_verify_cli_grades(verl_run: dict[str, Any]) -> None:
    from verify_cli.adapters.grading import CompletionGrader
    from verify_cli.grading import Grader, GradeRequest, Phase
    from verify_cli.sandbox.registry import create_sandbox
    from verify_cli.tasks.loader import load_task

    out = mode(verl_run, "reward")
    assert out["decoded_exactly"] == [True] * 5  # the reward function saw the completions themselves
    with CompletionGrader(tasks=verl_run["tasks"], sandbox="bwrap", warm=False) as fresh:
        again = fresh.grade([(task_id, text) for task_id, text in verl_run["completions"]])
    with Grader(create_sandbox("bwrap")) as grader:
        starter = grader.grade(GradeRequest(task=load_task(verl_run["tasks"] / ROMAN), phase=Phase.STARTER)).score
    assert out["scores"] == pytest.approx([r["score"] for r in again], abs=1e-6)  # verl's float32 tensor
    assert out["scores"][:3] == [1.0, 1.0, 0.0] and out["scores"][3] == pytest.approx(starter, abs=1e-6)
    assert 0.0 < out["scores"][4] < 1.0, out["scores"]  # a partial grade, neither of the others
    assert out["elsewhere"] == 0.0  # verl puts each reward on the response's last token only
    assert out["status"] == ["graded", "graded", "parse_error", "graded", "graded"]
    assert out["passed"] == [True, True, False, False, False]


def test_an_infrastructure_error_fails_verls_reward_step(verl_run: dict[str, Any]) -> None:
    out = mode(verl_run, "infra")
    assert out["raised"] == "RewardInfraError" and out["is_reward_infra_error"], out
    assert "deadline" in out["message"]


def test_verls_tool_loop_drives_a_session_to_the_trusted_score(verl_run: dict[str, Any]) -> None:
    out = mode(verl_run, "tool")
    assert out["base_tool"] and out["names"] == ["bash", "read_file", "run_tests", "submit", "write_file"]
    ls, mark, wrote, tests, long, submit, after = out["steps"]
    marker, _, ls_text = ls["text"].partition("\n")
    assert marker.startswith("[verify-cli session ")  # the first observation names the session
    assert ls_text.startswith("exit code 0") and "roman.py" in ls_text and ls["reward"] is None
    assert mark["text"] == "state\n"  # one session across verl's create/execute/release per call
    assert wrote["text"].startswith("wrote ")
    first = tests["text"].splitlines()[0]
    assert first.endswith(" passed, 0 failed") and not first.startswith("0 passed"), tests["text"]
    assert "...(truncated)..." in long["text"] and len(long["text"]) < 260  # verl's own truncation
    assert submit["reward"] == 1.0 and submit["metrics"] == {"status": "passed", "score": 1.0}
    assert after["metrics"]["status"] == "ended"


def test_verls_agent_loop_trains_on_the_sessions_trusted_grade(verl_run: dict[str, Any]) -> None:
    """verl 0.9.1's ToolAgentLoop scores a trajectory with compute_score on its decoded text:
    the score must be the session's trusted grade (before: 0.0 for the first, 1.0 for the second)."""
    from verify_cli.grading import Grader, GradeRequest, Phase
    from verify_cli.sandbox.registry import create_sandbox
    from verify_cli.tasks.loader import load_task

    out = mode(verl_run, "trajectories")
    with Grader(create_sandbox("bwrap")) as grader:
        starter = grader.grade(GradeRequest(task=load_task(verl_run["tasks"] / ROMAN), phase=Phase.STARTER)).score
    assert starter < 1.0
    assert out["scores"][0] == 1.0 and out["status"][0] == "passed"
    assert out["recorded"][0] == [{"status": "passed", "score": 1.0}]  # the submit the trajectory made
    assert out["scores"][1] == pytest.approx(starter) and out["status"][1] == "failed"
    assert out["recorded"][1] == [None]  # never submitted: compute_score submitted it
    assert out["recorded"][2] == []  # no tool call: no session until compute_score graded a fresh one
    assert out["scores"][2] == pytest.approx(starter)
    assert verl_run["sessions_left"] == 0  # no session outlives its trajectory
