"""The model backend interface: n completions per prompt, with token ids and log-probabilities
where the backend gives them.

A backend is constructed with its own options (a model folder, a server URL, a file of
completions) and then serves any number of :meth:`ModelBackend.generate` calls. Backends are
registered by name in :mod:`verify_cli.models.registry`, like the sandboxes.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from verify_cli.backend_config import BackendConfig
from verify_cli.errors import UsageError, VerifyError


class ModelBackendUnavailableError(VerifyError):
    """A model backend was asked for but cannot run here (optional package missing, no GPU)."""


class ModelBackendError(VerifyError):
    """The model backend failed while generating (server down after every retry, bad reply)."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. ``seed`` None means unseeded; ``logprobs`` asks for the log-probability of
    each generated token (backends that cannot give them return None)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = None
    logprobs: bool = False
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.n < 1:
            raise UsageError(f"sampling n must be at least 1, got {self.n}")
        if self.temperature < 0:
            raise UsageError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise UsageError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise UsageError(f"max_tokens must be at least 1, got {self.max_tokens}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d

    def fingerprint(self, *, exclude: Sequence[str] = ("n",)) -> str:
        """A stable hash of the parameters that change what is sampled (not ``n``: more samples
        of the same distribution extend, never replace, the earlier ones)."""
        d = {k: v for k, v in self.to_dict().items() if k not in exclude}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Prompt:
    """One prompt, in every form a backend may want: ``messages`` for chat endpoints, ``text`` for
    completion endpoints (already rendered through the model's chat template when it has one),
    ``prompt_token_ids`` when the caller tokenized it already.

    ``seed`` overrides the batch seed for this prompt (seeded backends otherwise sample prompt
    ``i`` of a batch under ``params.seed + i``); ``first_sample`` is the index of the first
    sample asked for, so a backend that replays stored samples continues where a run stopped.
    """

    task_id: str
    text: str
    messages: tuple[Mapping[str, str], ...] = ()
    prompt_token_ids: tuple[int, ...] | None = None
    seed: int | None = None
    first_sample: int = 0


def prompt_seed(prompt: Prompt, params: SamplingParams, index: int) -> int | None:
    """The seed prompt ``index`` of a batch samples under: its own, else ``params.seed + index``
    (None when unseeded)."""
    if prompt.seed is not None:
        return prompt.seed
    return None if params.seed is None else params.seed + index


@dataclass(frozen=True)
class Completion:
    """One sampled completion. ``logprobs`` has one entry per generated token (None where the
    backend gives none); ``finish_reason`` is ``stop`` (end of sequence or a stop string),
    ``length`` (max_tokens reached) or what the backend reports."""

    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] | None = None
    finish_reason: str = "stop"
    prompt_token_ids: tuple[int, ...] | None = None
    #: Already-extracted files (the replay backend's ``files`` rows); None: extract from ``text``.
    files: Mapping[str, str] | None = field(default=None, compare=False)


class ModelBackend(ABC):
    """Generates completions. Not required to be thread-safe: one caller drives a backend."""

    name: ClassVar[str] = "?"
    #: The optional extra that brings this backend's packages (for the "install" hint).
    extra: ClassVar[str | None] = None
    #: Python modules this backend needs beyond the core dependencies.
    requires: ClassVar[tuple[str, ...]] = ()
    #: The backend's typed options (:mod:`verify_cli.backend_config`), checked before it is built.
    config_type: ClassVar[type[BackendConfig]] = BackendConfig

    @classmethod
    def from_config(cls, config: BackendConfig) -> ModelBackend:
        """An instance configured by ``config`` (checked already). Default: the config's fields
        as constructor keywords."""
        return cls(**config.as_kwargs())

    @property
    def model_id(self) -> str:
        """What identifies the model in caches and reports (a path, a served model name)."""
        return self.name

    #: Whether the backend renders prompts through a tokenizer's chat template itself.
    tokenizer: Any = None

    @property
    def context_length(self) -> int | None:
        """Positions the model attends over, prompt and completion together (its config, its
        tokenizer or its server says); None when not known (the model then decides)."""
        return None

    def prompt_tokens(self, prompt: Prompt) -> int | None:
        """How many tokens ``prompt`` takes as this backend sends it; None when not known here.
        Default: the prompt's own token ids, when the caller gave them."""
        return len(prompt.prompt_token_ids) if prompt.prompt_token_ids is not None else None

    def prompt_fits(self, prompt: Prompt) -> bool:
        """Whether ``prompt`` leaves the model room to generate (True when either length is not
        known). A prompt that does not fit is never generated: its samples come back with
        ``finish_reason`` ``prompt_too_long`` (:mod:`verify_cli.models.context`)."""
        ctx = self.context_length
        if ctx is None:
            return True
        n = self.prompt_tokens(prompt)
        return n is None or n < ctx

    @abstractmethod
    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        """``params.n`` completions for each prompt, in prompt order."""

    def samples_available(self, task_id: str) -> int | None:
        """How many samples the backend can give for ``task_id`` (None: as many as asked)."""
        return None

    def task_ids(self) -> list[str] | None:
        """The tasks a backend with a fixed supply has samples of (replayed rows), sorted;
        None for a backend that samples any task."""
        return None

    def generate_stream(self, prompts: Sequence[Prompt], params: SamplingParams, *,
                        chunk_size: int = 8) -> Iterator[tuple[int, Completion]]:
        """(prompt index, completion) pairs as they are ready. This default generates
        ``chunk_size`` prompts at a time; backends that can do better override it."""
        for start in range(0, len(prompts), max(1, chunk_size)):
            chunk = prompts[start:start + max(1, chunk_size)]
            for offset, completions in enumerate(self.generate(chunk, params)):
                for completion in completions:
                    yield start + offset, completion

    def trainable_model(self, model_path: Any = None) -> Any:
        """The torch module ``train --update grpo`` trains for this backend (its own, or one loaded
        from ``model_path``). Default: this backend's model cannot be updated (UsageError)."""
        raise UsageError(f"--update grpo cannot update the {self.name!r} backend's model",
                         hint="use --backend hf (in process) or vllm, or --update none and train elsewhere")

    def push_weights(self, model: Any) -> None:  # noqa: B027 - a hook that does nothing by default
        """Generate with ``model``'s current weights from now on (after each update and restore).
        Default: nothing to do (the backend generates with ``model`` itself)."""

    def close(self) -> None:  # noqa: B027 - a lifecycle hook that does nothing by default
        """Release what the backend holds (GPU memory, connections)."""

    def __enter__(self) -> ModelBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
