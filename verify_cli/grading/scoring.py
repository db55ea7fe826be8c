"""Scores under the task's policy. Anything not passed (failed, error, skipped, missing) earns 0."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from verify_cli.grading.junit import TestOutcome, junit_id_of_node_id
from verify_cli.tasks.model import Scoring, ScoringPolicy, TestSpec


@dataclass(frozen=True)
class TestLists:
    """A task's FAIL_TO_PASS and PASS_TO_PASS tests, as the grader's (JUnit) ids."""

    __test__ = False

    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]

    @classmethod
    def of(cls, test: TestSpec) -> TestLists | None:
        """The lists of a task's ``[test]`` table, or None when it names none."""
        if not test.has_test_lists:
            return None
        return cls(tuple(junit_id_of_node_id(t) for t in test.fail_to_pass),
                   tuple(junit_id_of_node_id(t) for t in test.pass_to_pass))

    def outcomes(self, tests: Sequence[TestOutcome]) -> tuple[list[bool], list[bool]]:
        """Whether each FAIL_TO_PASS test passed and each PASS_TO_PASS test did not fail, as
        SWE-bench counts them (an XFAIL passes; a skipped PASS_TO_PASS test does not fail; one
        absent from the results fails)."""
        by_id = {t.id: t.outcome for t in tests}
        return ([t in by_id and by_id[t].listed_pass for t in self.fail_to_pass],
                [t in by_id and not by_id[t].listed_failure for t in self.pass_to_pass])

    def all_pass(self, tests: Sequence[TestOutcome]) -> bool:
        f2p, p2p = self.outcomes(tests)
        return all(f2p) and all(p2p)


_OPTION = re.compile(r"(.*?)\[(.*)\]")


def swebench_id(test_id: str) -> str:
    """A test id as SWE-bench's pytest log parsers record it, and so as its rows list it: cut at
    its first whitespace (``test_x[a b]`` -> ``test_x[a``: the ``-rA`` summary line is split on
    spaces), and a parameter that is an absolute path reduced to its file name
    (``[/testbed/tests/x.py]`` -> ``[/x.py]``, ``parse_log_pytest_options``)."""
    cut = test_id.split()[0] if test_id.split() else test_id
    option = _OPTION.search(cut)
    if option is not None:
        main, param = option.groups()
        if param.startswith("/") and not param.startswith("//") and "*" not in param:
            return f"{main}[/{param.split('/')[-1]}]"
    return cut


def match_listed_ids(lists: TestLists, tests: Sequence[TestOutcome]) -> list[TestOutcome]:
    """``tests`` with each listed id that the results lack matched as SWE-bench matches it: the
    results whose :func:`swebench_id` is that id (a parametrized id truncated at its first space,
    a path parameter reduced to its file name) become one outcome under the listed id, the
    worst of theirs (any not passing counts). Exact ids are left as they are."""
    have = {t.id for t in tests}
    wanted = [t for t in dict.fromkeys((*lists.fail_to_pass, *lists.pass_to_pass)) if t not in have]
    if not wanted:
        return list(tests)
    by_short: dict[str, list[TestOutcome]] = {}
    for t in tests:
        short = swebench_id(t.id)
        if short != t.id:
            by_short.setdefault(short, []).append(t)
    out = list(tests)
    for listed in wanted:
        matches = by_short.get(listed)
        if not matches:
            continue
        worst = next((m for m in matches if not m.outcome.listed_pass), matches[0])
        names = ", ".join(m.id for m in matches)
        out = [t for t in out if t not in matches]
        out.append(replace(worst, id=listed, message=f"matched {names}" + (f": {worst.message}" if worst.message
                                                                            else "")))
    return out


def test_weight(scoring: Scoring, test_id: str) -> float:
    """The weight of ``test_id``: an exact key first, else the first matching fnmatch pattern
    (``*`` matches across dots and ``::``), else the default weight."""
    if test_id in scoring.weights:
        return float(scoring.weights[test_id])
    base = test_id.split(" #", 1)[0]
    for pattern, weight in scoring.weights.items():
        if fnmatch.fnmatchcase(base, pattern):
            return float(weight)
    return scoring.default_weight


def score(scoring: Scoring, tests: Sequence[TestOutcome], lists: TestLists | None = None) -> float:
    """A score in [0, 1]. No tests at all scores 0: an empty run proves nothing.

    The list policies (``swebench``, ``fail-to-pass-fraction``) count only the task's listed
    tests; a listed test absent from the results counts as failed.
    """
    if not tests:
        return 0.0
    if scoring.policy.uses_test_lists:
        if lists is None or not lists.fail_to_pass:
            return 0.0
        f2p, p2p = lists.outcomes(tests)
        if not all(p2p):
            return 0.0
        if scoring.policy is ScoringPolicy.SWEBENCH:
            return 1.0 if all(f2p) else 0.0
        return sum(f2p) / len(f2p)
    if scoring.policy is ScoringPolicy.ALL_OR_NOTHING:
        return 1.0 if all(t.outcome.ok for t in tests) else 0.0
    if scoring.policy is ScoringPolicy.FRACTION:
        return sum(t.outcome.ok for t in tests) / len(tests)
    weights = [test_weight(scoring, t.id) for t in tests]
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(w for w, t in zip(weights, tests, strict=True) if t.outcome.ok) / total
