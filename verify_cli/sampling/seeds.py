"""The one seed derivation: every seed a command samples or shuffles under comes from its run seed
and a path of names and numbers, so that a rerun (or a resumed run) draws the same."""

from __future__ import annotations

import hashlib


def derive_seed(seed: int, *parts: object) -> int:
    """A 31-bit seed from the run seed and a path of names and numbers (stable across runs,
    machines and Python versions: the path's ``repr`` is hashed, never ``hash()``)."""
    h = hashlib.sha256(repr((seed, *parts)).encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


def sample_seed(seed: int, task_hash: str, first_sample: int) -> int:
    """The seed of the samples of a task from index ``first_sample`` on (``difficulty``): samples
    asked for later, from a higher index, are new draws, never repeats of earlier ones."""
    return derive_seed(seed, "sample", task_hash, first_sample)
