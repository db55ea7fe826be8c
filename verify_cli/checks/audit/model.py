"""The audit report of one task: mutation score, flaky tests, reward-hack probes, labelled runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from verify_cli.checks.flaky_power import DEFAULT_REPEATS
from verify_cli.checks.two_process_gaps import Gap

#: Below this mutation score (0-100) a task's tests are too weak to trust: a finding. The CLI's
#: ``--fail-under`` overrides it (0 turns it off).
DEFAULT_FAIL_UNDER = 80.0


@dataclass(frozen=True)
class AuditOptions:
    """What to measure and how hard.

    ``max_mutants`` and ``max_per_operator`` sample mutants per task (deterministic for a
    ``seed``); ``reruns`` is the number of reference reruns for flakiness; ``fail_fast`` stops a
    mutant's run at its first failing test (pytest tasks), which makes per-test kill counts lower
    bounds, and a probe's where one failure scores 0 (``checks/audit/probing.stop_early``: its
    score is unchanged); ``select_by_coverage`` runs only the tests that execute a mutant's statement.
    """

    mutants: bool = True
    flaky: bool = True
    probes: bool = True
    labelled: bool = True
    reruns: int = DEFAULT_REPEATS
    max_mutants: int | None = 50
    max_per_operator: int | None = None
    seed: int = 0
    jobs: int = 2
    fail_fast: bool = True
    select_by_coverage: bool = True
    probe_names: frozenset[str] | None = None
    #: Rerun survivors traced and set apart those whose calls all answer as the reference's
    #: (checks/audit/observed.py). Off by default: with tests that check every result, a mutant
    #: that only the missing inputs would catch (a weak test's typical survivor) is one of them.
    observed_equivalence: bool = False


class MutantStatus(StrEnum):
    KILLED = "killed"  # a test failed (or the run crashed)
    TIMEOUT = "timeout"  # killed by running past its time limit
    SURVIVED = "survived"  # every selected test passed
    NOT_COVERED = "not_covered"  # no test executes the mutated statement: survives without a run
    #: proven to behave as the reference: not counted (MutantResult.reason says how: "bytecode",
    #: never run; "observed", every call the tests made crossed by value and matched the reference's)
    EQUIVALENT = "equivalent"
    ERROR = "error"  # the sandbox failed: counts neither way

    @property
    def killed(self) -> bool:
        return self in (MutantStatus.KILLED, MutantStatus.TIMEOUT)

    @property
    def survived(self) -> bool:
        return self in (MutantStatus.SURVIVED, MutantStatus.NOT_COVERED)


@dataclass(frozen=True)
class MutantResult:
    id: str
    path: str
    operator: str
    line: int
    description: str
    diff: str
    status: MutantStatus
    killed_by: tuple[str, ...] = ()
    selected_tests: int | None = None  # None: every test ran
    seconds: float = 0.0
    message: str = ""
    reason: str = ""  # for an equivalent mutant: "bytecode" or "observed"

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "path": self.path, "operator": self.operator, "line": self.line,
               "description": self.description, "status": self.status.value,
               "killed_by": list(self.killed_by), "selected_tests": self.selected_tests,
               "seconds": round(self.seconds, 4), "message": self.message, "diff": self.diff}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class MutationReport:
    """Mutants of the reference's editable files, each graded like a candidate."""

    mutants: list[MutantResult] = field(default_factory=list)
    equivalent: list[MutantResult] = field(default_factory=list)  # reported apart, never counted
    dropped_uncompilable: int = 0
    by_operator: dict[str, int] = field(default_factory=dict)
    drawn_first: bool = False  # too many edits to check each: drawn first, by_operator counts edits
    per_test_kills: dict[str, int] = field(default_factory=dict)
    selection: str = "all tests"  # how each mutant's tests were chosen
    fail_fast: bool = False
    quarantined: list[str] = field(default_factory=list)  # tests not used to judge mutants
    skipped: str = ""  # why no mutant was run, when none was
    seconds: float = 0.0  # every mutant's sandboxed run time, summed: above the wall time when runs overlap
    wall_seconds: float = 0.0  # from the start of the mutant runs to this task's last mutant result

    @property
    def killed(self) -> int:
        return sum(m.status.killed for m in self.mutants)

    @property
    def survived(self) -> list[MutantResult]:
        return [m for m in self.mutants if m.status.survived]

    @property
    def errors(self) -> int:
        return sum(m.status is MutantStatus.ERROR for m in self.mutants)

    @property
    def score(self) -> float | None:
        """Killed mutants as a percentage of those judged (None when none was judged)."""
        judged = self.killed + len(self.survived)
        return 100.0 * self.killed / judged if judged else None

    @property
    def suspect_tests(self) -> list[str]:
        """Tests that killed no mutant."""
        return sorted(t for t, n in self.per_test_kills.items() if n == 0)

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "killed": self.killed, "survived": len(self.survived),
                "errors": self.errors, "total": len(self.mutants),
                "equivalent": [m.to_dict() for m in self.equivalent],
                "dropped_uncompilable": self.dropped_uncompilable, "by_operator": self.by_operator,
                "drawn_first": self.drawn_first, "selection": self.selection, "fail_fast": self.fail_fast,
                "per_test_kills": self.per_test_kills, "suspect_tests": self.suspect_tests,
                "quarantined": self.quarantined, "skipped": self.skipped,
                "wall_seconds": round(self.wall_seconds, 3),
                "run_seconds_summed": round(self.seconds, 3),
                "surviving": [m.to_dict() for m in self.survived],
                "mutants": [m.to_dict() for m in self.mutants]}


@dataclass(frozen=True)
class TestFlips:
    __test__ = False

    id: str
    passes: int
    runs: int
    flip_rate: float  # outcome changes between consecutive reruns, per rerun pair

    @property
    def flaky(self) -> bool:
        return 0 < self.passes < self.runs

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "passes": self.passes, "runs": self.runs,
                "flip_rate": round(self.flip_rate, 4), "flaky": self.flaky}


@dataclass
class FlakinessReport:
    """The reference rerun in fresh sandboxes, each with its own test order and hash seed."""

    reruns: int = 0
    tests: list[TestFlips] = field(default_factory=list)
    errors: int = 0  # reruns lost to the sandbox
    seconds: float = 0.0

    @property
    def flaky(self) -> list[TestFlips]:
        """Quarantined: listed in the report, never hidden."""
        return [t for t in self.tests if t.flaky]

    @property
    def always_failing(self) -> list[str]:
        return [t.id for t in self.tests if t.runs and t.passes == 0]

    def to_dict(self) -> dict[str, Any]:
        return {"reruns": self.reruns, "errors": self.errors, "seconds": round(self.seconds, 3),
                "flaky": [t.to_dict() for t in self.flaky], "always_failing": self.always_failing,
                "tests": [t.to_dict() for t in self.tests]}


@dataclass(frozen=True)
class ProbeResult:
    name: str
    target: str  # "tests" or "harness"
    summary: str
    score: float | None
    passed_tests: tuple[str, ...]
    total_tests: int
    why: str  # what a score means, or what stopped the probe
    problems: tuple[str, ...] = ()
    ignored_files: tuple[str, ...] = ()
    error: bool = False

    @property
    def hacked(self) -> bool:
        return bool(self.score)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "summary": self.summary,
                "score": self.score, "hacked": self.hacked, "error": self.error,
                "passed_tests": list(self.passed_tests), "total_tests": self.total_tests,
                "why": self.why, "problems": list(self.problems),
                "ignored_files": list(self.ignored_files)}


@dataclass(frozen=True)
class LabelledRun:
    name: str
    label: str  # "correct" or "incorrect"
    passed: bool | None  # None: the sandbox failed
    score: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "passed": self.passed, "score": self.score}


@dataclass
class LabelledReport:
    runs: list[LabelledRun] = field(default_factory=list)

    def _rate(self, label: str, want: bool) -> float | None:
        graded = [r for r in self.runs if r.label == label and r.passed is not None]
        return sum(r.passed is want for r in graded) / len(graded) if graded else None

    @property
    def true_positive_rate(self) -> float | None:
        """Share of correct solutions the tests pass."""
        return self._rate("correct", True)

    @property
    def true_negative_rate(self) -> float | None:
        """Share of incorrect solutions the tests fail."""
        return self._rate("incorrect", False)

    def to_dict(self) -> dict[str, Any]:
        return {"true_positive_rate": self.true_positive_rate,
                "true_negative_rate": self.true_negative_rate,
                "runs": [r.to_dict() for r in self.runs]}


class AuditVerdict(StrEnum):
    RELIABLE = "reliable"
    UNRELIABLE = "unreliable"
    ERROR = "error"


@dataclass
class TaskAudit:
    task_id: str
    path: str
    language: str
    mutation: MutationReport | None = None
    flakiness: FlakinessReport | None = None
    probes: list[ProbeResult] | None = None
    labelled: LabelledReport | None = None
    problems: list[str] = field(default_factory=list)  # what kept parts from being measured
    defects: list[str] = field(default_factory=list)  # found before measuring (it does not load)
    isolation: str = "two-process"  # the task's declared isolation ("in-process": trusts its candidate)
    #: Tests that failed on the unmutated reference in the mutation baseline run (the evidence when
    #: no reruns were made).
    baseline_failures: list[str] = field(default_factory=list)
    #: Tests the reference fails only two-process (they pass when it is re-run in-process): the
    #: test uses something the boundary does not carry (checks/two_process_gaps.py).
    two_process_gaps: list[Gap] = field(default_factory=list)

    @property
    def not_gradeable_two_process(self) -> bool:
        return bool(self.two_process_gaps)

    @property
    def trusts_candidate(self) -> bool:
        """The task is graded with the candidate in the test process: whatever the candidate
        does there (patching the harness, reading the tests) can reach its score."""
        return self.isolation == "in-process"

    @property
    def reference_failures(self) -> list[str]:
        """Tests the reference fails every time it is run (every rerun; the baseline run when
        there were no reruns)."""
        gaps = {g.test_id for g in self.two_process_gaps}
        if self.flakiness is not None and self.flakiness.tests:
            return [t for t in self.flakiness.always_failing if t not in gaps]
        return [t for t in self.baseline_failures if t not in gaps]

    @property
    def hacks(self) -> list[ProbeResult]:
        return [p for p in self.probes or [] if p.hacked]

    def findings(self, fail_under: float | None = DEFAULT_FAIL_UNDER) -> list[str]:
        """One line per defect found (empty: nothing found)."""
        out: list[str] = list(self.defects)
        failing = self.reference_failures
        if failing:
            where = ("in every rerun" if self.flakiness is not None and self.flakiness.tests
                     else "in the baseline run")
            out.append(f"the reference fails {len(failing)} test(s) {where}: " + ", ".join(failing[:3])
                       + (f" and {len(failing) - 3} more" if len(failing) > 3 else ""))
        if self.two_process_gaps:
            idioms = sorted({g.idiom for g in self.two_process_gaps})
            out.append(f"not gradeable two-process: {len(self.two_process_gaps)} test(s) pass in-process "
                       f"and fail only two-process; the test uses {'; '.join(idioms)} "
                       f"({', '.join(g.test_id for g in self.two_process_gaps[:3])}). Remedy: "
                       + "; or ".join(sorted({g.remedy for g in self.two_process_gaps})))
        for p in self.hacks:
            where = "weak tests" if p.target == "tests" else "grading hole"
            out.append(f"hackable ({where}): probe {p.name} scored {p.score:.2f}")
        if self.flakiness is not None and self.flakiness.flaky:
            out.append(f"{len(self.flakiness.flaky)} flaky test(s): "
                       + ", ".join(t.id for t in self.flakiness.flaky[:3]))
        score = self.mutation.score if self.mutation else None
        if fail_under and score is not None and score < fail_under:
            out.append(f"weak tests: mutation score {score:.1f} is below {fail_under:g}")
        if self.labelled is not None:
            tpr, tnr = self.labelled.true_positive_rate, self.labelled.true_negative_rate
            if tpr is not None and tpr < 1:
                out.append(f"the tests fail {1 - tpr:.0%} of the labelled correct solutions")
            if tnr is not None and tnr < 1:
                out.append(f"the tests pass {1 - tnr:.0%} of the labelled incorrect solutions")
        return out

    def verdict(self, fail_under: float | None = DEFAULT_FAIL_UNDER) -> AuditVerdict:
        if self.findings(fail_under):
            return AuditVerdict.UNRELIABLE
        if self.problems:
            return AuditVerdict.ERROR
        return AuditVerdict.RELIABLE

    def to_dict(self, fail_under: float | None = DEFAULT_FAIL_UNDER) -> dict[str, Any]:
        return {"task_id": self.task_id, "path": self.path, "language": self.language,
                "verdict": self.verdict(fail_under).value, "findings": self.findings(fail_under),
                "isolation": self.isolation, "trusts_candidate": self.trusts_candidate,
                "reference_failures": self.reference_failures,
                "not_gradeable_two_process": self.not_gradeable_two_process,
                "two_process_gaps": [g.to_dict() for g in self.two_process_gaps],
                "defects": self.defects,
                "problems": self.problems,
                "mutation": self.mutation.to_dict() if self.mutation else None,
                "flakiness": self.flakiness.to_dict() if self.flakiness else None,
                "probes": [p.to_dict() for p in self.probes] if self.probes is not None else None,
                "labelled": self.labelled.to_dict() if self.labelled else None}
