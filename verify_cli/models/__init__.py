"""Model backends: one interface over vLLM, OpenAI-compatible servers, transformers and replayed
completions, chosen by name (:mod:`verify_cli.models.registry`).

The interface lives in :mod:`verify_cli.models.base`; prompts and answer extraction in
:mod:`verify_cli.models.prompts`; a tiny offline model for tests in :mod:`verify_cli.models.tiny`.
"""

from verify_cli.models.base import Completion, ModelBackend, Prompt, SamplingParams
from verify_cli.models.registry import create_model_backend, model_backend_class, model_backend_names

__all__ = ["Completion", "ModelBackend", "Prompt", "SamplingParams", "create_model_backend",
           "model_backend_class", "model_backend_names"]
