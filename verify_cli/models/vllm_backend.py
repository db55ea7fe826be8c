"""The ``vllm`` backend: an in-process ``vllm.LLM`` (needs the ``gpu`` extra and a GPU).

Written against vLLM's documented offline API: ``LLM(model=..., tensor_parallel_size=...,
gpu_memory_utilization=...)``, ``LLM.generate(prompts, sampling_params)`` with one
``vllm.SamplingParams`` per prompt, and ``RequestOutput.outputs`` of ``CompletionOutput``
(``text``, ``token_ids``, ``logprobs`` as one ``{token_id: Logprob}`` dict per generated token,
``finish_reason``). The mapping both ways is kept in pure functions, tested without a GPU.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from verify_cli.backend_config import BackendConfig
from verify_cli.errors import UsageError
from verify_cli.models.base import Completion, ModelBackend, Prompt, SamplingParams, prompt_seed
from verify_cli.models.registry import register_model_backend


def vllm_sampling_kwargs(params: SamplingParams, seed: int | None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for ``params`` and one prompt's ``seed``.

    ``logprobs=1`` asks for the sampled token's log-probability (vLLM always includes the
    sampled token, plus this many top tokens); the sampled one is picked out on conversion.
    """
    kwargs: dict[str, Any] = {"n": params.n, "temperature": params.temperature, "top_p": params.top_p,
                              "max_tokens": params.max_tokens, "seed": seed}
    if params.logprobs:
        kwargs["logprobs"] = 1
    if params.stop:
        kwargs["stop"] = list(params.stop)
    return kwargs


def vllm_prompt(prompt: Prompt, tokenizer: Any) -> str | dict[str, Any]:
    """What ``LLM.generate`` takes for ``prompt``: a TokensPrompt dict when token ids are known,
    else the text rendered through the tokenizer's chat template (when it has one)."""
    if prompt.prompt_token_ids is not None:
        return {"prompt_token_ids": list(prompt.prompt_token_ids)}
    if prompt.messages and tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return str(tokenizer.apply_chat_template([dict(m) for m in prompt.messages], tokenize=False,
                                                 add_generation_prompt=True))
    return prompt.text


def _sampled_logprobs(token_ids: Sequence[int], steps: Sequence[Mapping[int, Any]] | None) -> tuple[float, ...] | None:
    if steps is None:
        return None
    out = []
    for token, step in zip(token_ids, steps, strict=False):
        entry = step.get(token)
        if entry is None:  # vLLM always reports the sampled token; a reply without it is broken
            return None
        out.append(float(getattr(entry, "logprob", entry)))
    return tuple(out) if len(out) == len(token_ids) else None


def completions_from_request_output(output: Any) -> list[Completion]:
    """``Completion``s of one ``vllm.RequestOutput``, in the order of ``CompletionOutput.index``."""
    prompt_ids = getattr(output, "prompt_token_ids", None)
    prompt_ids = tuple(int(t) for t in prompt_ids) if prompt_ids is not None else None
    result = []
    for c in sorted(output.outputs, key=lambda c: getattr(c, "index", 0)):
        token_ids = tuple(int(t) for t in c.token_ids)
        result.append(Completion(text=c.text, token_ids=token_ids,
                                 logprobs=_sampled_logprobs(token_ids, c.logprobs),
                                 finish_reason=str(c.finish_reason or "stop"), prompt_token_ids=prompt_ids))
    return result


@dataclass(frozen=True)
class VLLMConfig(BackendConfig):
    """``model``: a local folder (or a name vLLM resolves offline); the rest as ``vllm.LLM``
    takes them; ``chunk_size``: prompts per streamed batch."""

    model: str = field(metadata={"help": "a local model folder"})
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    dtype: str = "auto"
    max_model_len: int | None = None
    chunk_size: int = 64

    def check(self) -> str | None:
        if self.tensor_parallel_size < 1:
            return f"tensor_parallel_size must be >= 1, got {self.tensor_parallel_size}"
        if not 0 < self.gpu_memory_utilization <= 1:
            return f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
        return None


def vllm_load_weights(llm: Any, named_tensors: Iterable[tuple[str, Any]]) -> None:
    """Load new weights into a running ``vllm.LLM`` in place (every worker, tensor-parallel too).

    Uses ``LLM.collective_rpc`` with a function run in each worker, which calls the model's own
    ``load_weights`` (the loader that maps Hugging Face names onto vLLM's fused layers). Tensors
    go as CPU tensors; the worker moves them to its device.
    """
    weights = [(name, t.detach().to("cpu")) for name, t in named_tensors]

    def _load(worker: Any, batch: list[tuple[str, Any]]) -> None:
        worker.model_runner.model.load_weights(weights=batch)

    llm.collective_rpc(_load, args=(weights,))
    reset = getattr(llm, "reset_prefix_cache", None)
    if callable(reset):
        reset()  # cached KV blocks were computed with the old weights


@register_model_backend("vllm")
class VLLMBackend(ModelBackend):
    """``model`` is a local folder (or a name vLLM can resolve offline)."""

    extra: ClassVar[str | None] = "gpu"
    requires: ClassVar[tuple[str, ...]] = ("vllm",)
    config_type = VLLMConfig
    #: How agent episodes talk to it (verify_cli.agents.protocol).
    agent_protocol: ClassVar[str] = "vllm-chat"

    def __init__(self, model: str, *, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.9,
                 dtype: str = "auto", max_model_len: int | None = None, chunk_size: int = 64) -> None:
        from vllm import LLM

        self._model = model
        self.chunk_size = max(1, chunk_size)
        options: dict[str, Any] = {"tensor_parallel_size": tensor_parallel_size,
                                   "gpu_memory_utilization": gpu_memory_utilization, "dtype": dtype}
        if max_model_len is not None:
            options["max_model_len"] = max_model_len
        self.llm: Any = LLM(model=model, **options)
        self.tokenizer = self.llm.get_tokenizer()

    @property
    def model_id(self) -> str:
        return self._model

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        from vllm import SamplingParams as VLLMSamplingParams

        return self._generate(prompts, params, 0, VLLMSamplingParams)

    def _generate(self, prompts: Sequence[Prompt], params: SamplingParams, offset: int,
                  sampling_cls: Any) -> list[list[Completion]]:
        inputs = [vllm_prompt(p, self.tokenizer) for p in prompts]
        per_prompt = [sampling_cls(**vllm_sampling_kwargs(params, prompt_seed(p, params, offset + i)))
                      for i, p in enumerate(prompts)]
        outputs = self.llm.generate(inputs, per_prompt, use_tqdm=False)
        return [completions_from_request_output(o) for o in outputs]

    def generate_stream(self, prompts: Sequence[Prompt], params: SamplingParams, *,
                        chunk_size: int | None = None) -> Iterator[tuple[int, Completion]]:
        """Chunks of ``chunk_size`` prompts (large enough for vLLM's continuous batching to pay),
        each chunk's completions yielded as soon as it is done; seeds as in one whole batch."""
        from vllm import SamplingParams as VLLMSamplingParams

        size = chunk_size or self.chunk_size
        for start in range(0, len(prompts), size):
            chunk = self._generate(prompts[start:start + size], params, start, VLLMSamplingParams)
            for offset, completions in enumerate(chunk):
                for completion in completions:
                    yield start + offset, completion

    def trainable_model(self, model_path: Any = None) -> Any:
        """A trainable copy loaded from the model folder (vLLM's own weights are not a torch module
        the trainer can step); :meth:`push_weights` loads its weights back into the engine."""
        if model_path is None:
            raise UsageError("--update grpo with vllm needs the model folder to train from")
        import torch
        from transformers import AutoModelForCausalLM

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        trained: Any = AutoModelForCausalLM.from_pretrained(model_path)
        return trained.to(device)

    def push_weights(self, model: Any) -> None:
        vllm_load_weights(self.llm, model.named_parameters())

    def close(self) -> None:
        self.llm = None
