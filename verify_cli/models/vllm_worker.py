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
        """Load the packed ``(name, tensor)`` pairs (Hugging Face names, as a checkpoint holds
        them) into the served model in place; returns how many were given.

        Through the worker's ``reload_weights`` where it has one (vLLM's in-place reload: the
        model's own loader maps the names onto vLLM's fused layers, and the layouts a platform
        makes after loading, such as the CPU build's, are made again); else the model's
        ``load_weights``."""
        weights = [unpack_tensor(p) for p in packed]
        model = self.model_runner.model
        reload = getattr(self, "reload_weights", None)
        if callable(reload):
            reload(weights_iterator=iter(weights), is_checkpoint_format=True)
        else:
            model.load_weights(weights=weights)
        # An output layer tied to the input embedding is loaded through the embedding (no
        # weights of its own), so the kernel layout a platform derived from it (the CPU build
        # packs it for its GEMM) is made again here, or the engine's logits stay the old ones.
        head = getattr(model, "lm_head", None)
        method = getattr(head, "quant_method", None)
        weight = getattr(head, "weight", None)
        if method is not None and weight is not None and weight.numel() > 0:
            method.process_weights_after_loading(head)
        return len(packed)
