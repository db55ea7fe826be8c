"""The check shared by the kinds whose harness writes a signed record of the run (pytest's
plugin, the built-in runners): the JUnit outcomes count only as far as the record agrees."""

from __future__ import annotations

from verify_cli.grading.junit import Outcome, TestOutcome
from verify_cli.grading.seal import read_seals
from verify_cli.sandbox.base import RunResult


def check_record(run: RunResult, key: str, tests: list[TestOutcome], problems: list[str]) -> bool:
    """Hold the JUnit outcomes against the harness's own record; False when they cannot be
    trusted. Collected tests absent from the results are added to ``tests`` as missing."""
    record, seal_problems = read_seals(run.results, key)
    problems.extend(seal_problems)
    if record is None:
        problems.append("no valid harness record of the pytest session: the test process ended "
                        "before pytest finished (os._exit, a crash) or the results were forged")
        return False
    trusted = True
    if record.tampered:
        shown = "; ".join(record.tampered[:3])
        more = f" and {len(record.tampered) - 3} more" if len(record.tampered) > 3 else ""
        problems.append(f"the code under test tampered with the test harness: {shown}{more}")
        trusted = False
    disputed = [t.id for t in tests if t.outcome.ok and record.outcomes.get(t.id) != "passed"]
    if disputed:
        problems.append(f"results file claims {len(disputed)} test(s) passed that pytest did not "
                        f"report passing (forged results?): {', '.join(disputed[:3])}")
        trusted = False
    if any(p.startswith("no results file") for p in problems):
        return trusted  # nothing to complete: the run already proves nothing
    have = {t.id for t in tests}
    for tid in record.collected:
        if tid not in have:
            tests.append(TestOutcome(tid, Outcome.MISSING,
                                     message="collected by pytest but absent from the results"))
            have.add(tid)
    return trusted


__all__ = ["check_record"]
