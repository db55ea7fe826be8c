"""The ``hf`` backend: transformers ``generate`` on CPU or GPU from a local model folder.

Returns token ids and the log-probability of each generated token under the model's own
distribution (the raw logits, before temperature and top-p, as vLLM reports them by default).
The torch model and its tokenizer are exposed (``model``, ``tokenizer``) for callers that train
the same weights (``load_weights`` swaps new weights in place).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from verify_cli.backend_config import BackendConfig
from verify_cli.errors import UsageError
from verify_cli.models.base import Completion, ModelBackend, Prompt, SamplingParams, prompt_seed
from verify_cli.models.context import (
    context_length_of_config,
    context_length_of_tokenizer,
    prompt_fits,
    prompt_token_ids,
    room_for,
    too_long_completions,
)
from verify_cli.models.registry import register_model_backend


def quiet_transformers() -> None:
    """Library code does not print: no download/loading progress bars from transformers."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


@dataclass(frozen=True)
class HFConfig(BackendConfig):
    """``model``: the local folder of a transformers causal LM; ``device`` cpu, cuda or auto;
    ``dtype`` a torch dtype name or auto."""

    model: str | Path = field(metadata={"help": "the local folder of a transformers model"})
    device: str = "auto"
    dtype: str = "auto"


@register_model_backend("hf")
class HFBackend(ModelBackend):
    """``model`` is a local folder holding a transformers causal LM and its tokenizer."""

    extra: ClassVar[str | None] = "train"
    requires: ClassVar[tuple[str, ...]] = ("torch", "transformers")
    config_type = HFConfig
    #: How agent episodes talk to it (verify_cli.agents.protocol).
    agent_protocol: ClassVar[str] = "chat-template"

    def __init__(self, model: str | Path, *, device: str = "auto", dtype: str = "auto") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_transformers()
        path = Path(model)
        if not (path / "config.json").is_file():
            raise UsageError(f"{path}: not a model folder (no config.json)",
                             hint="give the local folder of a transformers model (save_pretrained)")
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        torch_dtype: Any = "auto" if dtype == "auto" else getattr(torch, dtype)
        self.path = path
        self.device = torch.device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"  # decoder-only: new tokens follow every prompt
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        model_obj: Any = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype)
        self.model: Any = model_obj.to(self.device)
        self.model.eval()

    @property
    def model_id(self) -> str:
        return str(self.path.resolve())

    def trainable_model(self, model_path: Any = None) -> Any:
        """The module it generates with: GRPO updates it in place."""
        return self.model

    def push_weights(self, model: Any) -> None:
        model.eval()  # the same module the backend generates with

    def load_weights(self, state_dict: Mapping[str, Any]) -> None:
        """Copy new weights into the served model in place (names as in ``model.state_dict()``)."""
        self.model.load_state_dict(dict(state_dict), strict=True)
        self.model.eval()

    @property
    def context_length(self) -> int | None:
        """The model config's positions (``max_position_embeddings``), else the tokenizer's
        ``model_max_length``."""
        return context_length_of_config(self.model.config) or context_length_of_tokenizer(self.tokenizer)

    def prompt_tokens(self, prompt: Prompt) -> int:
        return len(self._prompt_ids(prompt))

    def _prompt_ids(self, prompt: Prompt) -> list[int]:
        return prompt_token_ids(prompt, self.tokenizer)

    def _generate_one(self, prompt_ids: list[int], params: SamplingParams, seed: int | None) -> list[Completion]:
        import torch

        ctx = self.context_length
        if not prompt_fits(len(prompt_ids), ctx):  # decided before generating: never indexed past
            return too_long_completions(params.n, tuple(prompt_ids))
        ids = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        sample = params.temperature > 0
        kwargs: dict[str, Any] = dict(
            max_new_tokens=room_for(len(prompt_ids), params.max_tokens, ctx), do_sample=sample,
            num_return_sequences=params.n,
            return_dict_in_generate=True, output_logits=params.logprobs,
            pad_token_id=self.tokenizer.pad_token_id, attention_mask=torch.ones_like(ids))
        if sample:
            kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
        if params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=self.tokenizer)
        fork = torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else [])
        with fork if seed is not None else contextlib.nullcontext(), torch.inference_mode():
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(ids, **kwargs)
        new = out.sequences[:, ids.shape[1]:]
        logprobs = None
        if params.logprobs:
            steps = torch.stack(out.logits, dim=1).float().log_softmax(-1)  # (n, steps, vocab)
            logprobs = steps.gather(-1, new[:, :steps.shape[1]].unsqueeze(-1)).squeeze(-1)
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        completions = []
        for row in range(new.shape[0]):
            tokens = new[row].tolist()
            finish = "length"
            for i, t in enumerate(tokens):
                if t in eos_ids:
                    tokens, finish = tokens[:i], "stop"  # the end token itself is not part of the text
                    break
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            if params.stop and finish == "length":
                for s in params.stop:
                    if s in text:
                        text, finish = text[:text.index(s)], "stop"
            lp = tuple(float(x) for x in logprobs[row, :len(tokens)]) if logprobs is not None else None
            completions.append(Completion(text=text, token_ids=tuple(tokens), logprobs=lp, finish_reason=finish,
                                          prompt_token_ids=tuple(prompt_ids)))
        return completions

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        """One ``generate`` call per prompt with ``num_return_sequences=n``, under the prompt's
        seed (:func:`~verify_cli.models.base.prompt_seed`)."""
        return [self._generate_one(self._prompt_ids(p), params, prompt_seed(p, params, i))
                for i, p in enumerate(prompts)]

    def generate_stream(self, prompts: Sequence[Prompt], params: SamplingParams, *,
                        chunk_size: int = 1) -> Iterator[tuple[int, Completion]]:
        """Completions of each prompt as soon as that prompt is done."""
        for i, prompt in enumerate(prompts):
            for completion in self._generate_one(self._prompt_ids(prompt), params, prompt_seed(prompt, params, i)):
                yield i, completion

    def close(self) -> None:
        import torch

        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
