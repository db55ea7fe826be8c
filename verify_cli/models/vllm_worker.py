"""What verify-cli adds to each vLLM worker (``LLM(worker_extension_cls=...)``, vLLM's documented
hook for RLHF weight updates): loading new weights into the served model in place.

vLLM imports this module in every worker process by its dotted name, so it imports nothing of
vLLM's or verify-cli's at the top. ``LLM.collective_rpc(WEIGHT_LOADER_METHOD, args=(weights,))``
calls the method by name in every worker (tensor-parallel too): arguments travel through vLLM's
own serializer (tensors and lists of them), never as pickled functions, which vLLM refuses unless
``VLLM_ALLOW_INSECURE_SERIALIZATION`` is set.
"""

from __future__ import annotations

from typing import Any

#: ``worker_extension_cls`` for ``vllm.LLM``.
WORKER_EXTENSION = "verify_cli.models.vllm_worker.WeightLoaderExtension"
#: The method ``collective_rpc`` calls.
WEIGHT_LOADER_METHOD = "verify_cli_load_weights"


class WeightLoaderExtension:
    """Mixed into vLLM's worker class: ``self`` is the worker (``self.model_runner.model``)."""

    model_runner: Any

    def verify_cli_load_weights(self, weights: list[tuple[str, Any]]) -> int:
        """Load ``(name, tensor)`` pairs (Hugging Face names) through the model's own loader (it
        maps them onto vLLM's fused layers and copies them to the worker's device); returns how
        many were given."""
        self.model_runner.model.load_weights(weights=[(str(name), tensor) for name, tensor in weights])
        return len(weights)
