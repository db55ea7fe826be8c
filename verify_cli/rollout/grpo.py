"""A GRPO policy update in torch on a transformers causal LM (extra ``train``).

The loss is the clipped policy-gradient objective of PPO/GRPO on each model-generated token,
with the log-probabilities stored at sampling time as the old policy and the group-relative
advantage of the sample; optionally a KL penalty to a frozen reference (the k3 estimator). The
loss is a token-level mean over every trained token of the batch, so micro-batching does not
change the gradient. Feedback tokens (mask 0) are context, never trained on.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class GRPOConfig:
    lr: float = 1e-5
    clip_eps: float = 0.2
    kl_coef: float = 0.0
    #: Optimiser passes over each batch (more than one makes the clip matter).
    epochs: int = 1
    micro_batch: int = 16
    max_grad_norm: float = 1.0
    weight_decay: float = 0.0
    #: Sampling temperature: log-probabilities are those of the distribution sampled from.
    temperature: float = 1.0


@dataclass(frozen=True)
class TrainSample:
    """One trajectory as the update sees it."""

    prompt_ids: Sequence[int]
    response_ids: Sequence[int]
    response_mask: Sequence[int]
    #: Per-token log-probabilities at sampling time (None: on-policy, taken from this policy).
    old_logprobs: Sequence[float] | None
    advantage: float


@dataclass(frozen=True)
class UpdateStats:
    loss: float
    kl: float
    clip_fraction: float
    ratio_mean: float
    trained_tokens: int
    samples: int
    grad_norm: float


def response_logprobs(model: Any, samples: Sequence[TrainSample], temperature: float = 1.0) -> list[torch.Tensor]:
    """Log-probability of each response token under ``model`` (one tensor per sample)."""
    device = next(model.parameters()).device
    seqs = [list(s.prompt_ids) + list(s.response_ids) for s in samples]
    width = max(len(s) for s in seqs)
    pad = 0
    ids = torch.full((len(seqs), width), pad, dtype=torch.long, device=device)
    attn = torch.zeros((len(seqs), width), dtype=torch.long, device=device)
    for i, seq in enumerate(seqs):
        ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attn[i, : len(seq)] = 1
    logits = model(input_ids=ids, attention_mask=attn).logits.float()
    out: list[torch.Tensor] = []
    for i, s in enumerate(samples):
        p, r = len(s.prompt_ids), len(s.response_ids)
        if r == 0:
            out.append(torch.zeros(0, device=device))
            continue
        step_logits = logits[i, p - 1: p + r - 1] / max(temperature, 1e-6)
        target = ids[i, p: p + r]
        out.append(F.log_softmax(step_logits, dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1))
    return out


class GRPOTrainer:
    """Holds the optimiser (and the frozen reference when ``kl_coef > 0``) for one policy."""

    def __init__(self, model: Any, config: GRPOConfig) -> None:
        self.model = model
        self.config = config
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=config.lr,
            weight_decay=config.weight_decay)
        self.reference: Any = None
        if config.kl_coef > 0:
            self.reference = copy.deepcopy(model).eval()
            for p in self.reference.parameters():
                p.requires_grad_(False)

    def step(self, samples: Sequence[TrainSample]) -> UpdateStats:
        """One GRPO update on ``samples`` (samples with no trained token are skipped)."""
        cfg = self.config
        samples = [s for s in samples if any(s.response_mask)]
        if not samples:
            return UpdateStats(0.0, 0.0, 0.0, 1.0, 0, 0, 0.0)
        total_tokens = sum(int(sum(s.response_mask)) for s in samples)
        was_training = self.model.training
        self.model.train()
        loss_sum = kl_sum = clipped = ratio_sum = 0.0
        grad_norm = 0.0
        # Old log-probabilities missing: this policy before the update is the sampling policy.
        olds: list[torch.Tensor] = []
        with torch.no_grad():
            for i in range(0, len(samples), cfg.micro_batch):
                chunk = samples[i: i + cfg.micro_batch]
                current = response_logprobs(self.model, chunk, cfg.temperature)
                for s, cur in zip(chunk, current, strict=True):
                    olds.append(torch.tensor(list(s.old_logprobs), dtype=torch.float32, device=cur.device)
                                if s.old_logprobs is not None else cur.detach())
        refs: list[torch.Tensor] = []
        if self.reference is not None:
            with torch.no_grad():
                for i in range(0, len(samples), cfg.micro_batch):
                    refs.extend(response_logprobs(self.reference, samples[i: i + cfg.micro_batch],
                                                  cfg.temperature))
        for _ in range(max(1, cfg.epochs)):
            self.optimizer.zero_grad(set_to_none=True)
            loss_sum = kl_sum = clipped = ratio_sum = 0.0
            for i in range(0, len(samples), cfg.micro_batch):
                chunk = samples[i: i + cfg.micro_batch]
                new = response_logprobs(self.model, chunk, cfg.temperature)
                loss = torch.zeros((), device=new[0].device)
                for j, (s, lp) in enumerate(zip(chunk, new, strict=True)):
                    mask = torch.tensor(list(s.response_mask), dtype=torch.float32, device=lp.device)
                    old = olds[i + j]
                    ratio = torch.exp(lp - old)
                    adv = float(s.advantage)
                    unclipped = ratio * adv
                    clipped_obj = torch.clamp(ratio, 1 - cfg.clip_eps, 1 + cfg.clip_eps) * adv
                    per_token = -torch.minimum(unclipped, clipped_obj)
                    if self.reference is not None:
                        delta = refs[i + j] - lp
                        kl = torch.exp(delta) - delta - 1
                        per_token = per_token + cfg.kl_coef * kl
                        kl_sum += float((kl.detach() * mask).sum())
                    loss = loss + (per_token * mask).sum() / total_tokens
                    clipped += float((((ratio.detach() - 1).abs() > cfg.clip_eps).float() * mask).sum())
                    ratio_sum += float((ratio.detach() * mask).sum())
                loss.backward()
                loss_sum += float(loss.detach())
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm))
            self.optimizer.step()
        self.model.train(was_training)
        return UpdateStats(loss=loss_sum, kl=kl_sum / total_tokens, clip_fraction=clipped / total_tokens,
                           ratio_mean=ratio_sum / total_tokens, trained_tokens=total_tokens,
                           samples=len(samples), grad_norm=grad_norm)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(),
                "reference": self.reference.state_dict() if self.reference is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if self.reference is not None and state.get("reference") is not None:
            self.reference.load_state_dict(state["reference"])
