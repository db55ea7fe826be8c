"""GRPO over agent episodes is real end to end: a toy model that speaks the text protocol raises
its reward on the toy sum tasks through sessions, tool calls over two turns and the trusted grade,
against the same run without updates (as the one-shot toy test does for one-shot answers).

An episode has at most two turns (one token each): the model may write ``answer.txt`` with a
``write_file`` call of a digit, sees the observation (or the no-call hint), and may write again or
``submit``; the task grades the last digit written (one digit: 0.5, the right one: 1.0). The row
the update sees is both turns' tokens (mask 1) with the observation between them (mask 0).

The toy model is the one-shot test's random character-level model with a few whole strings added
to its vocabulary: each write call of a digit and the submit call (so a reply is one token, as a
one-shot answer is one digit), and the fixed text of the prompts around each task's sum, of the
write's observation and of the no-call hint (one token each, so a 1-layer model sees the sum
beside its answer; the full prompt is 2,445 characters the toy alphabet cannot spell). Nothing
is taught before: it starts from random weights, as the one-shot model does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rollout.conftest import TOY_TASKS, build_toy_model
from verify_cli.agents.episode import NO_CALL_HINT, EpisodeLimits, first_messages
from verify_cli.agents.protocol import agent_model
from verify_cli.agents.tools import TOOLS
from verify_cli.agents.training import AgentGroupRunner
from verify_cli.grading.grader import Grader
from verify_cli.models.registry import create_model_backend
from verify_cli.rollout.episodes import SamplingOptions
from verify_cli.rollout.grpo import GRPOConfig
from verify_cli.rollout.loop import StepReport, TrainConfig, Trainer
from verify_cli.rollout.policy import PolicyUpdater
from verify_cli.rollout.rewards import RewardConfig
from verify_cli.sandbox.registry import create_sandbox, resolve_backend_name
from verify_cli.tasks.loader import load_task_set
from verify_cli.tasks.model import Task

OPEN = '<tool_call>{"name": "write_file", "arguments": {"path": "answer.txt", "content": "'
CLOSE = '"}}</tool_call>'
WRITE = [f"{OPEN}{d}{CLOSE}" for d in range(10)]
SUBMIT = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
STEPS = 10



def _tasks() -> list[Task]:
    return [t for t in load_task_set(TOY_TASKS) if isinstance(t, Task)]


def _common_prefix(texts: list[str]) -> str:
    first = min(texts)
    last = max(texts)
    n = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))
    return first[:n]


def _fixed_texts(folder: Path) -> tuple[str, ...]:
    """The prompts' common head and tail, and what the second turn's prompt adds after a first reply
    that wrote the answer or made no call: the text the episodes render, as the agent model does."""
    am = agent_model(create_model_backend("hf", model=str(folder), device="cpu"))
    firsts = [am.render(first_messages(t), TOOLS).text for t in _tasks()]
    head = _common_prefix(firsts)
    tail = _common_prefix([f[::-1] for f in firsts])[::-1]
    reply = f"{OPEN}7{CLOSE}"
    task = _tasks()[0]
    call = {"id": "call_0", "type": "function",
            "function": {"name": "write_file", "arguments": '{"path": "answer.txt", "content": "7"}'}}
    second = am.render([*first_messages(task), {"role": "assistant", "content": reply, "tool_calls": [call]},
                        {"role": "tool", "tool_call_id": "call_0", "name": "write_file",
                         "content": "wrote 1 bytes to answer.txt"}], TOOLS).text
    first = am.render(first_messages(task), TOOLS).text
    assert second.startswith(first + reply), "the second turn's prompt must extend the first and its reply"
    hint = NO_CALL_HINT.format(tools=", ".join(t.name for t in TOOLS))
    no_call = am.render([*first_messages(task), {"role": "assistant", "content": ""},
                         {"role": "user", "content": hint}], TOOLS).text
    assert no_call.startswith(first)
    return head, tail, second[len(first + reply):], no_call[len(first):]


def build_agent_toy_model(folder: Path) -> Path:
    """The random toy model with the tool calls and the fixed prompt text in its vocabulary: one
    token per ``write_file`` call of a digit (``WRITE[d]``), one for ``submit``, one each for the
    prompts' head and tail, for the write's observation and for the hint after a reply with no
    call. Nothing is taught: like the one-shot toy model, it starts from random weights."""
    from tokenizers import AddedToken
    from transformers import AutoModelForCausalLM, AutoTokenizer

    build_toy_model(folder)
    fixed = _fixed_texts(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.add_tokens([AddedToken(t, normalized=False) for t in (*WRITE, SUBMIT, *fixed)])
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.resize_token_embeddings(len(tok), mean_resizing=False)
    tok.save_pretrained(folder)
    model.save_pretrained(folder)
    am = agent_model(create_model_backend("hf", model=str(folder), device="cpu"))
    lengths = [len(tok(am.render(first_messages(t), TOOLS).text, add_special_tokens=False)["input_ids"])
               for t in _tasks()]
    assert all(n < 16 for n in lengths), lengths
    return folder


def train(model: Path, out: Path, update: str) -> list[float]:
    tasks = _tasks()
    backend = create_model_backend("hf", model=str(model), device="cpu")
    config = TrainConfig(group_size=8, batch_size=2, steps=STEPS, seed=1, sampling=SamplingOptions(max_tokens=1),
                         update=update, grade_jobs=4)
    name, _ = resolve_backend_name("auto")
    reports: list[StepReport] = []
    with create_sandbox(name) as box, Grader(box, warm=True) as grader:  # the loop is under test
        runner = AgentGroupRunner(agent_model(backend), box, grader, sampling=config.sampling,
                                  reward=RewardConfig(), limits=EpisodeLimits(max_turns=2), concurrency=4)
        policy = PolicyUpdater(backend, out, GRPOConfig(lr=1e-2)) if update == "grpo" else None
        Trainer(config, backend, grader, tasks, out, sandbox_backend=name, policy=policy,
                on_step=reports.append, runner=runner).run()
    return [r.reward_mean or 0.0 for r in reports]


@pytest.mark.slow
def test_grpo_over_agent_episodes_raises_the_mean_reward_against_no_updates(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    model = build_agent_toy_model(tmp_path / "model")
    trained = train(model, tmp_path / "grpo", "grpo")
    frozen = train(model, tmp_path / "none", "none")
    assert trained[0] == frozen[0]  # same seed, same initial policy: the same first step
    late_trained = sum(trained[-4:]) / 4
    late_frozen = sum(frozen[-4:]) / 4
    assert late_trained > late_frozen + 0.1, (trained, frozen)
    assert late_trained > sum(trained[:2]) / 2 + 0.05, trained
