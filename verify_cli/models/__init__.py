"""Model backends: one interface over vLLM, OpenAI-compatible servers, transformers and replayed
completions, chosen by name (:mod:`verify_cli.models.registry`).

The interface lives in :mod:`verify_cli.models.base`; prompts and answer extraction in
:mod:`verify_cli.models.prompts`; a tiny offline model for tests in :mod:`verify_cli.models.tiny`.
"""

from typing import Any

from verify_cli._exports import lazy_attribute
from verify_cli.models.base import Completion, ModelBackend, Prompt, SamplingParams
from verify_cli.models.prompts import build_prompt, extract_for_task, files_to_candidate
from verify_cli.models.registry import (
    create_model_backend,
    model_backend_class,
    model_backend_config,
    model_backend_names,
    register_model_backend,
)

__all__ = ["Completion", "ModelBackend", "Prompt", "SamplingParams", "build_prompt", "build_tiny_model",
           "create_model_backend", "extract_for_task", "files_to_candidate", "model_backend_class",
           "model_backend_config", "model_backend_names", "register_model_backend"]


def __getattr__(name: str) -> Any:
    # build_tiny_model needs torch (the train extra): imported on first use
    return lazy_attribute(__name__, {"build_tiny_model": "verify_cli.models.tiny"}, name)
