"""What verify-cli adds to each vLLM worker (``LLM(worker_extension_cls=...)``, vLLM's documented
hook for RLHF weight updates): loading new weights into the served model in place.

vLLM imports this module in every worker process by its dotted name, so it imports nothing of
vLLM's or verify-cli's at the top. ``LLM.collective_rpc(WEIGHT_LOADER_METHOD, args=(weights,))``
calls the method by name in every worker (tensor-parallel too). Its arguments travel through
vLLM's own serializer, which carries plain data (a pickled function, and a tensor inside a list,
it does not: the first is refused unless ``VLLM_ALLOW_INSECURE_SERIALIZATION`` is set, the second
arrives as a list), so each tensor goes as :func:`pack_tensor` packs it: its dtype, shape and bytes.
"""

from __future__ import annotations

from typing import Any

#: ``worker_extension_cls`` for ``vllm.LLM``.
WORKER_EXTENSION = "verify_cli.models.vllm_worker.WeightLoaderExtension"
#: The method ``collective_rpc`` calls.
WEIGHT_LOADER_METHOD = "verify_cli_load_weights"


def pack_tensor(name: str, tensor: Any) -> tuple[str, str, list[int], bytes]:
    """``(name, dtype, shape, bytes)`` of a tensor (moved to the CPU), for :func:`unpack_tensor`."""
    import torch

    cpu = tensor.detach().to("cpu").contiguous()
    raw = cpu.view(-1).view(torch.uint8).numpy().tobytes()
    return name, str(cpu.dtype).removeprefix("torch."), list(cpu.shape), raw


def unpack_tensor(packed: Any) -> tuple[str, Any]:
    """The ``(name, tensor)`` :func:`pack_tensor` packed."""
    import torch

    name, dtype, shape, raw = packed
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    return str(name), data.view(getattr(torch, str(dtype))).reshape([int(d) for d in shape])


class WeightLoaderExtension:
    """Mixed into vLLM's worker class: ``self`` is the worker (``self.model_runner.model``)."""

    model_runner: Any

    def verify_cli_load_weights(self, packed: list[Any]) -> int:
        """Load the packed ``(name, tensor)`` pairs (Hugging Face names) through the model's own
        loader (it maps them onto vLLM's fused layers and copies them to the worker's device);
        returns how many were given."""
        self.model_runner.model.load_weights(weights=[unpack_tensor(p) for p in packed])
        return len(packed)
