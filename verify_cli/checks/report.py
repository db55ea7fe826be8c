"""The per-task report of check-tasks: checks, verdict, and the evidence of every run."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class CheckStatus(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    ERROR = "error"  # could not be concluded (infrastructure)
    #: The reference passes in-process but a test fails only two-process: the test uses
    #: something the two-process boundary does not carry (checks/two_process_gaps.py).
    NOT_GRADEABLE = "not-gradeable"


class TaskVerdict(StrEnum):
    SOUND = "sound"
    DEFECTIVE = "defective"
    #: Sound in-process, but some test cannot be graded two-process (the reference is correct).
    NOT_GRADEABLE = "not-gradeable-two-process"
    ERROR = "error"  # infrastructure failed: nothing concluded about the task
    #: The task's declared environment did not build (task.toml [environment]): its author's
    #: to fix; nothing was run, so nothing else is concluded.
    ENVIRONMENT_ERROR = "environment-error"


#: The name of the check that fails when a task's environment does not build.
ENVIRONMENT_CHECK = "environment"


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: CheckStatus
    message: str = ""
    #: The test ids a failing check names (repository tasks' list checks), for tools to read.
    tests: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "status": self.status.value, "message": self.message}
        if self.tests:
            d["tests"] = list(self.tests)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CheckResult:
        return cls(d["name"], CheckStatus(d["status"]), d.get("message", ""), tuple(d.get("tests", ())))


@dataclass
class TaskReport:
    task_id: str
    path: str
    domain: str
    language: str
    checks: list[CheckResult]
    reference_seconds: float | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    cached: bool = False
    #: How the task's runs were isolated ("two-process" / "in-process") and what did not hold.
    isolation: str = ""
    isolation_notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> TaskVerdict:
        statuses = {c.status for c in self.checks}
        if any(c.name == ENVIRONMENT_CHECK and c.status is CheckStatus.FAIL for c in self.checks):
            return TaskVerdict.ENVIRONMENT_ERROR
        if CheckStatus.FAIL in statuses:
            return TaskVerdict.DEFECTIVE
        if CheckStatus.NOT_GRADEABLE in statuses:
            return TaskVerdict.NOT_GRADEABLE
        if CheckStatus.ERROR in statuses:
            return TaskVerdict.ERROR
        return TaskVerdict.SOUND

    @property
    def defects(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status is CheckStatus.FAIL]

    @property
    def gaps(self) -> list[CheckResult]:
        """The checks that found tests not gradeable two-process."""
        return [c for c in self.checks if c.status is CheckStatus.NOT_GRADEABLE]

    @property
    def warnings(self) -> list[CheckResult]:
        return [c for c in self.checks if c.status in (CheckStatus.WARN, CheckStatus.ERROR)]

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "path": self.path, "domain": self.domain,
                "language": self.language, "verdict": self.verdict.value,
                "checks": [c.to_dict() for c in self.checks],
                "reference_seconds": self.reference_seconds, "cached": self.cached, "runs": self.runs,
                "isolation": self.isolation, "isolation_notes": self.isolation_notes}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TaskReport:
        return cls(task_id=d["task_id"], path=d["path"], domain=d["domain"], language=d["language"],
                   checks=[CheckResult.from_dict(c) for c in d["checks"]],
                   reference_seconds=d.get("reference_seconds"), runs=list(d.get("runs", [])),
                   cached=bool(d.get("cached", False)), isolation=str(d.get("isolation", "")),
                   isolation_notes=[str(n) for n in d.get("isolation_notes", [])])
