"""The policy side of ``--update grpo``: update, hand the new weights to the generation backend,
checkpoint with the step and restore on ``--resume``.

``hf``: the trainer updates the backend's own torch model, so generation uses the new weights at
once (in process, nothing copied). ``vllm``: the trainer holds a transformers copy of the model and
after each update sends its weights to the engine through vLLM's worker RPC
(``LLM.collective_rpc``, running ``model_runner.model.load_weights`` in every worker). The vLLM
path is written against vLLM's documented API and has not run here (no GPU on the build machine).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from verify_cli.errors import UsageError
from verify_cli.models.base import ModelBackend

CHECKPOINTS_DIR = "checkpoints"


def _checkpoint_name(step: int) -> str:
    return f"step-{step:06d}"


class PolicyUpdater:
    """GRPO updates of the policy behind a generation backend, with checkpoints in ``run_dir``."""

    def __init__(self, backend: ModelBackend, run_dir: Path, config: Any, *, model_path: Path | None = None) -> None:
        try:
            import torch  # noqa: F401
        except ImportError:  # pragma: no cover - the train extra is missing
            raise UsageError("--update grpo needs torch and transformers",
                             hint="pip install 'verify-cli[train]'") from None
        from verify_cli.rollout.grpo import GRPOTrainer

        self.backend = backend
        self.run_dir = run_dir
        self.config = config
        # The backend says what is trained (its own module, or one loaded from the folder) and
        # how its generation picks the new weights up (ModelBackend.trainable_model/push_weights).
        self.model = backend.trainable_model(model_path)
        self.trainer = GRPOTrainer(self.model, config)

    def _push(self) -> None:
        """The backend generates with the current weights from now on."""
        self.backend.push_weights(self.model)

    def update(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """One GRPO step on the unmasked rows with a non-zero advantage; returns its statistics."""
        from verify_cli.rollout.grpo import TrainSample

        samples = []
        for r in rows:
            if r["masked"] or r["advantage"] in (None, 0.0) or not r["response_token_ids"]:
                continue
            samples.append(TrainSample(r["prompt_token_ids"], r["response_token_ids"], r["response_mask"],
                                       r["response_logprobs"], float(r["advantage"])))
        stats = self.trainer.step(samples)
        self._push()
        return {k: float(v) for k, v in asdict(stats).items()}

    def checkpoint(self, step: int, version: int) -> Path:
        """Save the policy and optimiser after ``step`` (atomically: a folder renamed into place)."""
        import torch

        root = self.run_dir / CHECKPOINTS_DIR
        root.mkdir(parents=True, exist_ok=True)
        final = root / _checkpoint_name(step)
        tmp = root / f".{final.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        torch.save(self.model.state_dict(), tmp / "model.pt")
        torch.save(self.trainer.state_dict(), tmp / "trainer.pt")
        (tmp / "meta.json").write_text(json.dumps({"step": step, "policy_version": version}))
        for p in tmp.iterdir():
            with p.open("rb") as f:
                os.fsync(f.fileno())
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return final

    def restore(self, step: int | None) -> int:
        """Load the checkpoint of committed ``step`` (None: the initial policy); returns the policy version."""
        if step is None:
            return 0
        import torch

        path = self.run_dir / CHECKPOINTS_DIR / _checkpoint_name(step)
        if not (path / "meta.json").is_file():
            raise UsageError(f"cannot resume: no policy checkpoint for committed step {step} in {path.parent}",
                             hint="the run folder is incomplete; start a new run")
        self.model.load_state_dict(torch.load(path / "model.pt", map_location="cpu"))
        self.trainer.load_state_dict(torch.load(path / "trainer.pt", map_location="cpu", weights_only=False))
        self._push()
        return int(json.loads((path / "meta.json").read_text())["policy_version"])

    def prune(self, step: int) -> None:
        """Drop checkpoints older than committed ``step`` (and stale temporary folders)."""
        root = self.run_dir / CHECKPOINTS_DIR
        if not root.is_dir():
            return
        keep = _checkpoint_name(step)
        for p in root.iterdir():
            if p.name != keep and (p.name.startswith(".") or p.name < keep):
                shutil.rmtree(p, ignore_errors=True)
