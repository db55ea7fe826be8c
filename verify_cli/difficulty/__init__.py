"""Difficulty: each task's pass rate under a model, with honest statistics, and the data set
re-bucketed by it. The ``verify-cli difficulty`` command is a thin layer over :func:`run_difficulty`.
"""

from typing import Any as _Any

from verify_cli._exports import lazy_attribute as _lazy_attribute

#: public name -> the module that defines it (imported on first use)
_PUBLIC: dict[str, str] = {
    "DifficultyOptions": "verify_cli.difficulty.runner",
    "run_difficulty": "verify_cli.difficulty.runner",
    "sample_seed": "verify_cli.sampling.seeds",
    "grade_sample": "verify_cli.difficulty.samples",
    "SampleRecord": "verify_cli.difficulty.samples",
    "SampleCache": "verify_cli.difficulty.cache",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> _Any:
    return _lazy_attribute(__name__, _PUBLIC, name)
