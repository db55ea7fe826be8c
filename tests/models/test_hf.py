"""The hf backend on a tiny random model: seeded sampling, token ids, per-token log-probs."""

from __future__ import annotations

from pathlib import Path

import pytest

from verify_cli.errors import UsageError
from verify_cli.models import create_model_backend
from verify_cli.models.base import Prompt, SamplingParams
from verify_cli.models.prompts import build_prompt
from verify_cli.tasks.loader import load_task


@pytest.fixture(scope="module")
def hf(tiny_model: Path):  # type: ignore[no-untyped-def]
    with create_model_backend("hf", model=str(tiny_model), device="cpu") as backend:
        yield backend


def test_n_completions_per_prompt_with_ids_and_logprobs(hf) -> None:  # type: ignore[no-untyped-def]
    prompts = [Prompt("a", "def f(x):\n"), Prompt("b", "print(1 + 2)\n")]
    out = hf.generate(prompts, SamplingParams(n=3, max_tokens=12, seed=7, logprobs=True))
    assert [len(cs) for cs in out] == [3, 3]
    for cs in out:
        for c in cs:
            assert 0 < len(c.token_ids) <= 12
            assert c.logprobs is not None and len(c.logprobs) == len(c.token_ids)
            assert all(lp <= 0 for lp in c.logprobs)
            assert c.finish_reason in ("stop", "length")
            assert c.text == hf.tokenizer.decode(list(c.token_ids), skip_special_tokens=True)
    assert out[0][0].prompt_token_ids != out[1][0].prompt_token_ids


def test_same_seed_same_samples_and_logprobs_match_a_forward_pass(hf) -> None:  # type: ignore[no-untyped-def]
    import torch

    prompt = Prompt("a", "x = [1, 2, 3]\n")
    params = SamplingParams(n=2, max_tokens=10, seed=3, logprobs=True)
    first, again = hf.generate([prompt], params)[0], hf.generate([prompt], params)[0]
    assert [c.token_ids for c in first] == [c.token_ids for c in again]
    other = hf.generate([prompt], SamplingParams(n=2, max_tokens=10, seed=4))[0]
    assert [c.token_ids for c in other] != [c.token_ids for c in first]
    # The reported log-probs are the model's own (raw logits) for the tokens it produced.
    c = first[0]
    ids = torch.tensor([list(c.prompt_token_ids or ()) + list(c.token_ids)])
    with torch.no_grad():
        logits = hf.model(ids).logits[0].float().log_softmax(-1)
    start = len(c.prompt_token_ids or ())
    expected = [logits[start - 1 + i, t].item() for i, t in enumerate(c.token_ids)]
    assert c.logprobs == pytest.approx(expected, abs=1e-4)


def test_streaming_yields_every_completion_with_its_prompt_index(hf) -> None:  # type: ignore[no-untyped-def]
    prompts = [Prompt("a", "a"), Prompt("b", "b"), Prompt("c", "c")]
    got = list(hf.generate_stream(prompts, SamplingParams(n=2, max_tokens=4, seed=0)))
    assert sorted(i for i, _ in got) == [0, 0, 1, 1, 2, 2]


def test_chat_template_renders_task_prompts(hf, sample_tasks_dir: Path) -> None:  # type: ignore[no-untyped-def]
    prompt = build_prompt(load_task(sample_tasks_dir / "coding-interval-merge"), hf.tokenizer)
    assert prompt.text.startswith("<|system|>\n") and prompt.text.endswith("<|assistant|>\n")
    assert prompt.prompt_token_ids is not None
    assert hf.tokenizer.decode(list(prompt.prompt_token_ids)) == prompt.text


def test_load_weights_in_place_changes_what_is_sampled(tiny_model: Path) -> None:
    import torch

    backend = create_model_backend("hf", model=str(tiny_model), device="cpu")
    prompt, params = Prompt("a", "abc"), SamplingParams(n=1, max_tokens=8, seed=1, temperature=0)
    before = backend.generate([prompt], params)[0][0].token_ids
    state = {k: torch.randn_like(v) for k, v in backend.model.state_dict().items()}
    backend.load_weights(state)
    assert torch.equal(backend.model.state_dict()["lm_head.weight"], state["lm_head.weight"])
    assert backend.generate([prompt], params)[0][0].token_ids != before
    backend.close()


def test_a_folder_without_a_model_is_a_usage_error(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(UsageError, match="not a model folder"):
        create_model_backend("hf", model=str(tmp_path))
