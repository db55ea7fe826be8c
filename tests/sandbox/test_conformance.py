"""The hostile-program conformance suite, run against every backend.

One table (:data:`verify_cli.sandbox.kit.conformance.CASES`) drives both these tests and
``verify-cli sandbox doctor``. A backend must contain every program, except where the table
records a limitation of that backend: there the test asserts the escape is real, so a limitation
is never silently documented away nor silently fixed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import PYTHON_IMAGE, SandboxFor, backend_ids, backend_marks
from verify_cli.sandbox.kit.conformance import (
    CASES,
    HOST_CHECKS,
    ConformanceCase,
    case_named,
    processes_with_token,
    run_case,
    run_conformance,
)
from verify_cli.sandbox.kit.testing import FakeSandbox

PARAMS = [pytest.param(name, case, marks=backend_marks(name), id=f"{name}-{case.name}")
          for name in backend_ids() for case in CASES]


@pytest.mark.parametrize(("backend", "case"), PARAMS)
def test_hostile_program(backend: str, case: ConformanceCase, sandbox_for: SandboxFor) -> None:
    result = run_case(sandbox_for(backend), case, image=PYTHON_IMAGE)
    if result.expected_contained:
        assert result.conforms, f"a hostile program was not contained:\n{result.describe()}"
    else:
        assert result.conforms, (f"the documented limitation was not observed (update the table "
                                 f"in verify_cli/sandbox/kit/conformance.py?):\n{result.describe()}")
        assert result.findings, result.describe()


def test_the_table_is_complete_and_consistent() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    for case in CASES:
        assert case.expected_verdicts, case.name
        assert case.host_check in HOST_CHECKS, case.name
        assert "__main__" in case.source, f"{case.program} must run only as a script"
        if case.expected_uncontained_on or case.uncontained_without_cgroups_on:
            assert case.limitation, f"{case.name}: a limitation must say why"
        # bwrap and docker must contain everything
        assert not {"bwrap", "docker"} & (case.expected_uncontained_on
                                          | case.uncontained_without_cgroups_on), case.name
        assert case.limits.wall_seconds <= 5 and case.limits.processes <= 64
    assert case_named("fork_bomb").name == "fork_bomb"


def test_a_check_that_errors_counts_as_not_contained() -> None:
    # A backend whose every run crashes: the suite must count that as not contained.
    results = run_conformance(FakeSandbox.broken(RuntimeError("the backend fell over")), fast=True,
                              image=None)
    assert [r.case for r in results] == [c.name for c in CASES if c.fast]
    for r in results:
        assert not r.contained and not r.conforms
        assert "RuntimeError" in r.error


def test_fast_subset_skips_the_cases_that_wait_out_a_limit() -> None:
    slow = {c.name for c in CASES if not c.fast}
    assert {"fork_bomb", "sleep_forever", "closed_stdio", "disk_fill"} <= slow


def test_survivor_scan_finds_a_process_by_its_token() -> None:
    token = "vccf-scan-selftest-0123456789"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", token])
    try:
        assert proc.pid in processes_with_token(token)
    finally:
        proc.kill()
        proc.wait()
    assert proc.pid not in processes_with_token(token)
