"""TRL's environment mode over verify-cli serve sessions: GRPOTrainer(environment_factory=...) trains
a few steps on CPU with a tiny model, and the tools themselves as TRL calls them."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="the trl extra is not installed: pip install 'verify-cli[trl]'")
pytest.importorskip("torch", reason="the train extra is not installed")

from tests.conftest import SAMPLE_TASKS
from tests.service.conftest import Served, reference_files, start_server
from verify_cli.adapters.trl_env import VerifyCliTaskEnvironment
from verify_cli.grading import Grader, GradeRequest, Phase
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

ROMAN = SAMPLE_TASKS / "coding-roman-numerals"


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    s = start_server([SAMPLE_TASKS], "--max-sessions", "8")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def starter_score() -> float | None:
    with Grader(create_sandbox("bwrap")) as grader:
        return grader.grade(GradeRequest(task=load_task(ROMAN), phase=Phase.STARTER)).score


def test_the_tools_as_trl_calls_them_and_the_reward(served: Served) -> None:
    env = VerifyCliTaskEnvironment.factory(served.url)()
    shown = env.reset(prompt=[{"role": "user", "content": "fix it"}], task_id="coding/roman-numerals")
    assert shown is not None and "roman.py" in shown and "tests/test_roman.py" in shown
    assert env.bash(command="echo hi").startswith("exit code 0")
    assert env.read_file(path="missing.py").startswith("read_file: ")
    env.write_file(path="roman.py", content=reference_files(ROMAN)["roman.py"])
    assert env.run_tests().splitlines()[0].endswith(" 0 failed")
    assert env.submit() == "submitted"
    assert env.get_reward() == 1.0
    # The next rollout of the same instance starts afresh.
    env.reset(task_id="coding/roman-numerals")
    assert "NotImplementedError" in env.read_file(path="roman.py")
    env.reset(task_id="coding/roman-numerals")  # the unsubmitted session is closed, not leaked
    assert served.metric("verify_serve_sessions_open") == 1
    env.get_reward()
    assert served.metric("verify_serve_sessions_open") == 0


def test_a_dead_service_is_none_not_zero() -> None:
    s = start_server([SAMPLE_TASKS])
    env = VerifyCliTaskEnvironment(s.url, max_retries=1)
    try:
        env.reset(task_id="coding/roman-numerals")
        s.stop(signal.SIGKILL)
        assert "not your fault" in env.bash(command="true")
        assert env.get_reward() is None
    finally:
        s.stop(signal.SIGKILL)


def test_grpo_trainer_environment_mode_logs_the_trusted_grades(served: Served, starter_score: float | None,
                                                               tmp_path: Path) -> None:
    import trl
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from verify_cli.models.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "model", hidden_size=32, layers=1, heads=2)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # A chat template TRL knows how to parse tool calls from (its own copy of Qwen3's).
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    dataset = Dataset.from_dict({"prompt": [[{"role": "user", "content": "Implement roman.py."}]] * 4,
                                 "task_id": ["coding/roman-numerals"] * 4})
    envs: list[VerifyCliTaskEnvironment] = []

    def factory() -> VerifyCliTaskEnvironment:
        env = VerifyCliTaskEnvironment(served.url)
        envs.append(env)
        return env

    config = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, max_steps=2, logging_steps=1,
                        per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
                        report_to="none", save_strategy="no", temperature=1.0, seed=0)
    trainer = GRPOTrainer(model=str(model_dir), args=config, train_dataset=dataset, processing_class=tokenizer,
                          environment_factory=factory)
    opened_before = served.metric("verify_serve_sessions_opened_total")
    trainer.train()
    key = "rewards/VerifyCliTaskEnvironment/mean"
    logged = [e[key] for e in trainer.state.log_history if key in e]
    assert len(logged) == 2
    rewards: list[dict[str, Any]] = [r for env in envs for _, r in env.history]
    assert len(rewards) == 2 * 4  # one per rollout
    assert all(r["status"] in ("passed", "failed") for r in rewards)
    # A random model's rollouts leave the starter: each is rewarded its trusted grade.
    assert all(r["score"] == starter_score for r in rewards), rewards
    assert logged == [pytest.approx(starter_score)] * 2
    assert served.metric("verify_serve_sessions_opened_total") - opened_before == 8
    assert served.metric("verify_serve_sessions_open") == 0
