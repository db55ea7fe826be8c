"""An agent episode whose task prompt does not fit the model's context is never played and never
scored (``prompt_too_long``), with the hf backend and a real tiny model of 64 positions; before,
the model was run past its positions."""

from __future__ import annotations

from pathlib import Path

import pytest

from verify_cli.agents.episode import EpisodeLimits, run_episode
from verify_cli.agents.protocol import agent_model
from verify_cli.agents.sampler import EpisodeStep, episode_completion
from verify_cli.grading.grader import Grader
from verify_cli.models.base import SamplingParams
from verify_cli.models.registry import create_model_backend
from verify_cli.sampling.status import SampleStatus
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task

TOY = Path(__file__).resolve().parent.parent / "fixtures" / "toy_sums" / "sum-1-plus-x-is-8"


def test_an_episode_whose_prompt_does_not_fit_is_prompt_too_long(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from verify_cli.models.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "m", hidden_size=32, layers=1, heads=2, max_positions=64)
    task = load_task(TOY)
    box = create_sandbox("process")
    with create_model_backend("hf", model=str(model), device="cpu") as hf, box, Grader(box) as grader:
        episode = run_episode(task, agent_model(hf), box, grader, limits=EpisodeLimits(max_turns=3),
                              params=SamplingParams(max_tokens=8, seed=0))
    assert episode.end_reason == "prompt_too_long" and episode.turns == []
    assert episode.outcome is not None and episode.outcome.score is None
    sample = EpisodeStep().run(task, episode_completion(episode))
    assert sample.status is SampleStatus.PROMPT_TOO_LONG and sample.score is None
    assert not sample.status.counts and sample.status.masked


def test_agent_run_says_the_prompt_does_not_fit_and_exits_2(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from verify_cli.cli.app import main
    from verify_cli.models.tiny import build_tiny_model

    model = build_tiny_model(tmp_path / "m", hidden_size=32, layers=1, heads=2, max_positions=64)
    code = main(["agent", "run", str(TOY), "--backend", "hf", "--model", str(model), "--device", "cpu",
                 "--sandbox", "process", "--max-tokens", "8"])
    out = capsys.readouterr()
    assert code == 2
    assert "episode ended: prompt_too_long after 0 turn(s)" in " ".join((out.out + out.err).split())
    assert "Traceback" not in out.out + out.err
