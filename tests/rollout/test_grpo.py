"""A GRPO step on a real (tiny, random) transformers model moves the policy the right way."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from verify_cli.rollout.advantages import group_advantages  # noqa: E402
from verify_cli.rollout.grpo import GRPOConfig, GRPOTrainer, TrainSample, response_logprobs  # noqa: E402


def tiny_model() -> object:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=24, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config).eval()


def test_grpo_step_raises_the_rewarded_completion_and_lowers_the_others() -> None:
    model = tiny_model()
    prompt = [1, 5, 6, 7]
    responses = [[10, 11], [12, 13], [14, 15], [16, 17]]
    rewards = [1.0, 0.0, 0.0, 0.0]  # only the first completion was rewarded
    adv = group_advantages(rewards).advantages
    samples = [TrainSample(prompt, r, [1, 1], None, float(a)) for r, a in zip(responses, adv, strict=True)]
    with torch.no_grad():
        before = [float(lp.sum()) for lp in response_logprobs(model, samples)]
    stats = GRPOTrainer(model, GRPOConfig(lr=1e-2)).step(samples)
    with torch.no_grad():
        after = [float(lp.sum()) for lp in response_logprobs(model, samples)]
    assert stats.trained_tokens == 8 and stats.samples == 4
    assert after[0] > before[0] + 0.05
    assert all(a < b for a, b in zip(after[1:], before[1:], strict=True))


def test_feedback_tokens_are_not_trained_and_stored_logprobs_give_ratio_one() -> None:
    model = tiny_model()
    prompt = [1, 2]
    resp = [3, 4, 5, 6]
    with torch.no_grad():
        old = response_logprobs(model, [TrainSample(prompt, resp, [1, 0, 0, 1], None, 1.0)])[0].tolist()
    trainer = GRPOTrainer(model, GRPOConfig(lr=1e-2, kl_coef=0.1))
    stats = trainer.step([TrainSample(prompt, resp, [1, 0, 0, 1], old, 1.0)])
    assert stats.trained_tokens == 2
    assert stats.ratio_mean == pytest.approx(1.0, abs=1e-5)
    assert stats.kl == pytest.approx(0.0, abs=1e-6)  # the reference is the policy before the step
