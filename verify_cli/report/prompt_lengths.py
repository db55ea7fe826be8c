"""How long each task's prompt is: characters, and tokens of a given model's tokenizer, against
that model's context length (``verify-cli tasks stats --tokenizer MODEL``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify_cli.errors import UsageError
from verify_cli.models.context import context_length_of_folder, prompt_fits
from verify_cli.models.prompts import build_prompt
from verify_cli.tasks.model import Task


@dataclass(frozen=True)
class PromptLength:
    task_id: str
    chars: int
    #: Tokens of the model's tokenizer, as the model backends send the prompt (None: no tokenizer).
    tokens: int | None
    #: Whether it leaves the model room to generate (None: no context length known).
    fits: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "chars": self.chars, "tokens": self.tokens, "fits": self.fits}


def load_tokenizer(folder: Path) -> Any:
    """The tokenizer of a local model folder (transformers; the ``train`` extra)."""
    if not Path(folder).is_dir():
        raise UsageError(f"--tokenizer {folder}: not a folder", hint="give a local model folder (save_pretrained)")
    try:
        from transformers import AutoTokenizer

        from verify_cli.models.hf import quiet_transformers
    except ImportError:
        raise UsageError("--tokenizer needs transformers", hint="pip install 'verify-cli[train]'") from None
    quiet_transformers()
    try:
        return AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as e:
        raise UsageError(f"--tokenizer {folder}: no tokenizer could be loaded ({' '.join(str(e).split())[:200]})",
                         hint="give a model folder with tokenizer.json or tokenizer_config.json") from None


def prompt_lengths(tasks: Sequence[Task], tokenizer: Any = None, *, context_length: int | None = None,
                   include_tests: bool = True) -> list[PromptLength]:
    """Each task's prompt length (the prompt ``difficulty`` and ``train`` build), in task order."""
    out = []
    for task in tasks:
        prompt = build_prompt(task, tokenizer, include_tests=include_tests)
        tokens = len(prompt.prompt_token_ids) if prompt.prompt_token_ids is not None else None
        fits = None if tokens is None or context_length is None else prompt_fits(tokens, context_length)
        out.append(PromptLength(task.id, len(prompt.text), tokens, fits))
    return out


def model_prompt_lengths(tasks: Sequence[Task], model_folder: Path | None, *, context_length: int | None = None,
                         include_tests: bool = True) -> tuple[list[PromptLength], int | None]:
    """:func:`prompt_lengths` under the tokenizer of ``model_folder`` (none: characters only) and
    its context length (``context_length`` overrides what the folder's config says)."""
    tokenizer = load_tokenizer(model_folder) if model_folder is not None else None
    if context_length is None and model_folder is not None:
        context_length = context_length_of_folder(model_folder)
    return prompt_lengths(tasks, tokenizer, context_length=context_length, include_tests=include_tests), \
        context_length
