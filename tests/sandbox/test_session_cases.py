"""The hostile-agent suite of sessions (:data:`verify_cli.sandbox.kit.session_cases.SESSION_CASES`),
run against every backend that opens sessions: nothing an agent does to its own session ends as
an infrastructure error, a crash or a forged observation."""

from __future__ import annotations

import pytest

from tests.conftest import PYTHON_IMAGE, SandboxFor
from verify_cli.sandbox.kit.session_cases import SESSION_CASES, SessionCase, run_session_case, session_case_named
from verify_cli.sandbox.kit.testing import FakeSandbox

BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param("bwrap", marks=pytest.mark.bwrap, id="bwrap"),
    pytest.param("docker", marks=pytest.mark.docker, id="docker"),
]


@pytest.mark.parametrize("case", SESSION_CASES, ids=[c.name for c in SESSION_CASES])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hostile_agent_gets_a_graded_outcome(backend: str, case: SessionCase, sandbox_for: SandboxFor) -> None:
    findings = run_session_case(sandbox_for(backend), case, image=PYTHON_IMAGE)
    assert not findings, "\n".join(findings)


def test_the_table_names_each_case_once() -> None:
    names = [c.name for c in SESSION_CASES]
    assert len(names) == len(set(names)) and session_case_named("forged_result").name == "forged_result"


def test_a_backend_without_sessions_is_a_finding() -> None:
    findings = run_session_case(FakeSandbox(), SESSION_CASES[0])
    assert findings and "no session could be opened" in findings[0]
