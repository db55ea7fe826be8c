"""The vllm backend's mapping of sampling parameters and outputs, checked without a GPU.

vLLM's output classes are plain data; where vllm is not importable, objects with the documented
fields (``RequestOutput.outputs`` of ``CompletionOutput``, ``logprobs`` as one
``{token_id: Logprob}`` dict per token) stand in for them.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from verify_cli.models.base import Prompt, SamplingParams, prompt_seed
from verify_cli.models.vllm_backend import completions_from_request_output, vllm_prompt, vllm_sampling_kwargs


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int] | None
    outputs: list[CompletionOutput] = field(default_factory=list)


def test_sampling_kwargs_map_every_parameter() -> None:
    params = SamplingParams(n=4, temperature=0.7, top_p=0.9, max_tokens=128, seed=5, logprobs=True, stop=("END",))
    kwargs = vllm_sampling_kwargs(params, seed=6)
    assert kwargs == {"n": 4, "temperature": 0.7, "top_p": 0.9, "max_tokens": 128, "seed": 6,
                      "logprobs": 1, "stop": ["END"]}
    assert "logprobs" not in vllm_sampling_kwargs(SamplingParams(), seed=None)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed (gpu extra)")
def test_real_vllm_sampling_params_accept_the_mapping() -> None:  # pragma: no cover - needs vllm
    from vllm import SamplingParams as VLLMSamplingParams

    sp = VLLMSamplingParams(**vllm_sampling_kwargs(SamplingParams(n=2, seed=1, logprobs=True), seed=1))
    assert sp.n == 2 and sp.seed == 1 and sp.logprobs == 1


def test_seeds_per_prompt_do_not_depend_on_batching() -> None:
    params = SamplingParams(seed=100)
    assert [prompt_seed(Prompt("t", "x"), params, i) for i in range(3)] == [100, 101, 102]
    assert prompt_seed(Prompt("t", "x", seed=7), params, 2) == 7
    assert prompt_seed(Prompt("t", "x"), SamplingParams(), 2) is None


def test_prompts_are_token_ids_chat_rendered_or_text() -> None:
    tok = SimpleNamespace(chat_template="x", apply_chat_template=lambda m, tokenize, add_generation_prompt:
                          f"<chat>{m[-1]['content']}</chat>")
    msgs = ({"role": "user", "content": "hi"},)
    assert vllm_prompt(Prompt("t", "raw", msgs, prompt_token_ids=(1, 2)), tok) == {"prompt_token_ids": [1, 2]}
    assert vllm_prompt(Prompt("t", "raw", msgs), tok) == "<chat>hi</chat>"
    assert vllm_prompt(Prompt("t", "raw", msgs), SimpleNamespace(chat_template=None)) == "raw"


def test_request_output_converts_in_index_order_with_sampled_token_logprobs() -> None:
    out = RequestOutput("r", "p", [5, 6], outputs=[
        CompletionOutput(1, "second", [3], -0.1, [{3: Logprob(-0.1), 4: Logprob(-2.0)}], "length"),
        CompletionOutput(0, "first", [7, 8], -1.5, [{7: Logprob(-1.0, 1)}, {9: Logprob(-0.2, 1), 8: Logprob(-0.5, 2)}],
                         "stop"),
    ])
    first, second = completions_from_request_output(out)
    assert (first.text, first.token_ids, first.logprobs, first.finish_reason) == ("first", (7, 8), (-1.0, -0.5), "stop")
    assert (second.text, second.logprobs, second.finish_reason) == ("second", (-0.1,), "length")
    assert first.prompt_token_ids == (5, 6)
    no_lp = RequestOutput("r", "p", None, [CompletionOutput(0, "x", [1], None, None, None)])
    (c,) = completions_from_request_output(no_lp)
    assert c.logprobs is None and c.finish_reason == "stop" and c.prompt_token_ids is None
