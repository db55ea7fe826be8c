"""The hostile-program conformance suite, run against every backend.

One table (:data:`verify_cli.sandbox.conformance.CASES`) drives both these tests and
``verify-cli sandbox doctor``. A backend must contain every program, except where the table
records a limitation of that backend: there the test asserts the escape is real, so a limitation
is never silently documented away nor silently fixed.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from verify_cli.errors import VerifyError
from verify_cli.sandbox.base import RunResult, RunSpec, Sandbox, Verdict
from verify_cli.sandbox.conformance import (
    CASES,
    HOST_CHECKS,
    ConformanceCase,
    case_named,
    processes_with_token,
    run_case,
    run_conformance,
)
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.sandbox.testing import FakeSandbox

#: The image the docker backend runs the suite in.
DOCKER_IMAGE = "verify-cli/python:3.11"

# (backend, marks, image, skip instead of failing when the backend cannot run a trivial command)
BACKENDS: list[tuple[str, list[pytest.MarkDecorator], str | None, bool]] = [
    ("process", [], None, False),
    ("bwrap", [pytest.mark.bwrap], None, True),
    ("docker", [pytest.mark.docker], DOCKER_IMAGE, True),  # node mode: bwrap in long-lived containers
    ("docker-single-use", [pytest.mark.docker], DOCKER_IMAGE, True),
]
#: Test ids that are a backend in another mode: (backend, options).
VARIANTS: dict[str, tuple[str, dict[str, object]]] = {
    "docker-single-use": ("docker", {"mode": "single-use"}),
}

SandboxFor = Callable[[str], Sandbox]


@pytest.fixture(scope="module")
def sandbox_for() -> Iterator[SandboxFor]:
    """One started sandbox per backend for the module; skips a backend that cannot run here."""
    opened: dict[str, Sandbox] = {}
    refused: dict[str, str] = {}

    def get(name: str) -> Sandbox:
        if name in refused:
            pytest.skip(refused[name])
        if name not in opened:
            _, _, image, may_skip = next(b for b in BACKENDS if b[0] == name)
            try:
                backend, options = VARIANTS.get(name, (name, {}))
                box = create_sandbox(backend, **options)
                box.start()
            except (VerifyError, ImportError) as e:
                refused[name] = f"{name} backend unavailable: {e}"
                pytest.skip(refused[name])
            probe = _trivial_run(box, image)
            if probe.verdict is not Verdict.OK:
                box.close()
                why = (f"{name} cannot run a trivial command "
                       f"({probe.verdict.value}: {probe.message})")
                if image:
                    why += f"; is the image {image!r} built?"
                if not may_skip:
                    pytest.fail(why)
                refused[name] = why
                pytest.skip(why)
            opened[name] = box
        return opened[name]

    yield get
    for box in opened.values():
        box.close()


def _trivial_run(box: Sandbox, image: str | None) -> RunResult:
    with tempfile.TemporaryDirectory() as d:
        return box.run(RunSpec(["python", "-c", "print('ok')"], Path(d), image=image))


PARAMS = [pytest.param(name, case, image, marks=marks, id=f"{name}-{case.name}")
          for name, marks, image, _ in BACKENDS for case in CASES]


@pytest.mark.parametrize(("backend", "case", "image"), PARAMS)
def test_hostile_program(backend: str, case: ConformanceCase, image: str | None,
                         sandbox_for: SandboxFor) -> None:
    result = run_case(sandbox_for(backend), case, image=image)
    if result.expected_contained:
        assert result.conforms, f"a hostile program was not contained:\n{result.describe()}"
    else:
        assert result.conforms, (f"the documented limitation was not observed (update the table "
                                 f"in verify_cli/sandbox/conformance.py?):\n{result.describe()}")
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
