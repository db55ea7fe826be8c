"""Probe lines say what happened in words that agree with each other."""

from __future__ import annotations

from dataclasses import replace

from verify_cli.checks.audit.probing import judge_probe
from verify_cli.checks.probes.model import Probe, ProbeTarget
from verify_cli.grading import GradeResult, GradeStatus, Outcome, Phase, TestOutcome
from verify_cli.sandbox import RunResult, Verdict

PROBE = Probe(name="conftest-hole", language="python", target=ProbeTarget.HARNESS,
              summary="a conftest.py that passes every test", if_it_scores="the harness has a hole",
              build=lambda ctx: None)


def result(score: float, problems: tuple[str, ...] = (), ignored: tuple[str, ...] = ()) -> GradeResult:
    run = RunResult(verdict=Verdict.OK, backend="process", exit_code=0)
    return GradeResult("t", Phase.PROBE, GradeStatus.GRADED, score, bool(score),
                       (TestOutcome("t::a", Outcome.PASSED),), run, problems, ignored)


def test_a_zero_score_with_passing_tests_says_the_run_was_rejected() -> None:
    p = judge_probe(PROBE, result(0.0, ("no valid harness record of the pytest session",)))
    assert p.why.startswith("scored 0 although 1 of 1 test(s) passed: the grader rejected the run")


def test_a_score_through_the_hole_blames_the_harness() -> None:
    p = judge_probe(replace(PROBE), result(1.0))
    assert p.target == "harness" and "the harness has a hole" in p.why
