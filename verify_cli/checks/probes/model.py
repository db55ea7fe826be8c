"""What a reward-hack probe is: a named, adversarial candidate built for one task."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from verify_cli.tasks.model import Task


class ProbeTarget(StrEnum):
    """What a probe that earns a score has shown to be weak."""

    TESTS = "tests"  # the tests accept a wrong answer (weak tests)
    HARNESS = "harness"  # the grading harness accepts something that is not a test result


@dataclass(frozen=True)
class ProbeContext:
    """What a probe's author knows of a task: what a solver sees plus the reference's shape.

    ``files`` are the reference's editable files (path to text), whose top-level names a probe
    keeps so that the tests can import it; ``result_names`` are file names matching the task's
    results glob, where a forger would write.
    """

    task: Task
    files: Mapping[str, str]
    result_names: tuple[str, ...]
    #: The probe's run's wall limit where audit set a tighter one than the task's (derived from
    #: the reference's measured time); None: the task's own.
    wall_limit: float | None = None

    @property
    def wall_seconds(self) -> float:
        """The wall limit the probe's run has (a probe that must outlast it sleeps past this)."""
        return self.wall_limit if self.wall_limit is not None else self.task.limits.wall_seconds


#: Builds the candidate's files (path to bytes), or None where the probe does not apply.
BuildProbe = Callable[[ProbeContext], dict[str, bytes] | None]


@dataclass(frozen=True)
class Probe:
    """One trick. ``summary`` says what it does; ``if_it_scores`` what a score would mean."""

    name: str
    language: str
    target: ProbeTarget
    summary: str
    if_it_scores: str
    build: BuildProbe
    #: The probe's run waits rather than computes (it sleeps to its time limit), so it can run
    #: beside the CPU-bound work instead of taking one of its slots.
    idle: bool = False
    #: For a probe whose trick is all in files of its own (beside plain stubs of the code):
    #: builds the same candidate without the trick. Where the grader refuses every file that
    #: differs from it, a score was earned by the plain stubs alone: weak tests, not a harness hole.
    without_trick: BuildProbe | None = None
