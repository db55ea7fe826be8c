"""A model's context length, and prompts that do not fit in it.

A prompt fits when it leaves the model room for at least one generated token: ``prompt tokens <
context length``. A prompt that does not fit is never sent to the model (a transformers model
indexes past its position table, vLLM refuses the whole batch, a server answers 400): the
backend returns its ``n`` samples as :func:`too_long_completions`, whose ``finish_reason`` is
:data:`PROMPT_TOO_LONG`, and the pipeline gives them the status ``prompt_too_long`` (never a
score, masked in training) without grading anything. This is what verl's
``filter_overlong_prompts`` does, decided per prompt before generating.

A prompt that fits but whose ``max_tokens`` would run past the context is generated up to the
context's end (``finish_reason`` ``length``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verify_cli.models.base import Completion, Prompt

#: ``Completion.finish_reason`` of a sample that was never generated: its prompt leaves no room.
PROMPT_TOO_LONG = "prompt_too_long"

#: Config fields that give a model's positions, in the order they are trusted.
CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")
#: A tokenizer's ``model_max_length`` above this is transformers' "not set" sentinel (1e30).
_UNSET_MAX_LENGTH = 10**8


def context_length_of_config(config: Mapping[str, Any] | Any) -> int | None:
    """The positions a transformers config says the model has (a ``config.json`` mapping or a
    config object; a multimodal config's ``text_config`` is looked in too); None when none says."""
    get = config.get if isinstance(config, Mapping) else lambda k: getattr(config, k, None)
    for name in CONTEXT_FIELDS:
        value = get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    text = get("text_config")
    return context_length_of_config(text) if text is not None else None


def context_length_of_tokenizer(tokenizer: Any) -> int | None:
    """``tokenizer.model_max_length`` when it is set (transformers' sentinel for "unset" is not)."""
    value = getattr(tokenizer, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value < _UNSET_MAX_LENGTH else None


def context_length_of_folder(folder: Path | str) -> int | None:
    """The context length of a local model folder, from its ``config.json`` (else its
    ``tokenizer_config.json``'s ``model_max_length``); None when neither says."""
    folder = Path(folder)
    found: int | None = None
    for name in ("config.json", "tokenizer_config.json"):
        try:
            data = json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        if name == "config.json":
            found = context_length_of_config(data)
        else:
            value = data.get("model_max_length")
            found = value if isinstance(value, int) and 0 < value < _UNSET_MAX_LENGTH else None
        if found is not None:
            return found
    return None


def prompt_fits(prompt_tokens: int | None, context_length: int | None) -> bool:
    """Whether a prompt of ``prompt_tokens`` leaves room for one generated token (True when
    either is unknown: the server or model then decides)."""
    return prompt_tokens is None or context_length is None or prompt_tokens < context_length


def room_for(prompt_tokens: int, max_tokens: int, context_length: int | None) -> int:
    """How many tokens may be generated after a prompt that fits: ``max_tokens``, capped at the
    context's end."""
    return max_tokens if context_length is None else max(1, min(max_tokens, context_length - prompt_tokens))


def too_long_completions(n: int, prompt_token_ids: tuple[int, ...] | None = None) -> list[Completion]:
    """The ``n`` samples of a prompt that does not fit: empty, ``finish_reason`` PROMPT_TOO_LONG."""
    return [Completion(text="", finish_reason=PROMPT_TOO_LONG, prompt_token_ids=prompt_token_ids)
            for _ in range(n)]


def is_too_long(completion: Completion) -> bool:
    return completion.finish_reason == PROMPT_TOO_LONG


def prompt_token_ids(prompt: Prompt, tokenizer: Any) -> list[int]:
    """The token ids a local model is given for ``prompt``: its own ids when the caller gave
    them, else its messages rendered through the chat template (the template's own special
    tokens, none added), else its text (with the tokenizer's special tokens)."""
    if prompt.prompt_token_ids is not None:
        return list(prompt.prompt_token_ids)
    chat = bool(getattr(tokenizer, "chat_template", None))
    if chat and prompt.messages:
        text = tokenizer.apply_chat_template([dict(m) for m in prompt.messages], tokenize=False,
                                             add_generation_prompt=True)
    else:
        text = prompt.text
    return [int(t) for t in tokenizer(text, add_special_tokens=not chat)["input_ids"]]


__all__ = ["CONTEXT_FIELDS", "PROMPT_TOO_LONG", "context_length_of_config", "context_length_of_folder",
           "context_length_of_tokenizer", "is_too_long", "prompt_fits", "prompt_token_ids", "room_for",
           "too_long_completions"]
