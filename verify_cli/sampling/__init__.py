"""The sample pipeline under ``difficulty`` and ``train``: generate -> take the answer -> grade -> status.

One room of its own, beside ``models`` (which it draws from) and ``grading`` (which it hands
answers to), under ``difficulty`` and ``rollout`` (which turn its samples into statistics and
rewards). It holds what both commands share: the one status vocabulary
(:class:`SampleStatus`), the one seed derivation (:func:`derive_seed`), the one retry policy for
infrastructure errors (:class:`RetryPolicy`), the one place grading is handed to an executor
(:func:`grade_with_retries`), the per-sample step (:class:`SampleStep`, which an agent episode
sampler implements too), the one generation -> grading loop (:func:`generate_and_grade`) and the
up-front check of a replayed supply (:func:`check_supply`).
"""

from typing import Any as _Any

from verify_cli._exports import lazy_attribute as _lazy_attribute

#: public name -> the module that defines it (imported on first use)
_PUBLIC: dict[str, str] = {
    "SampleStatus": "verify_cli.sampling.status",
    "TRAJECTORY_LABELS": "verify_cli.sampling.status",
    "status_of": "verify_cli.sampling.status",
    "derive_seed": "verify_cli.sampling.seeds",
    "sample_seed": "verify_cli.sampling.seeds",
    "RetryPolicy": "verify_cli.sampling.step",
    "GradedSample": "verify_cli.sampling.step",
    "SampleStep": "verify_cli.sampling.step",
    "AnswerStep": "verify_cli.sampling.step",
    "grade_files": "verify_cli.sampling.step",
    "grade_with_retries": "verify_cli.sampling.step",
    "generate_and_grade": "verify_cli.sampling.stream",
    "StreamTiming": "verify_cli.sampling.stream",
    "check_supply": "verify_cli.sampling.supply",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> _Any:
    return _lazy_attribute(__name__, _PUBLIC, name)
