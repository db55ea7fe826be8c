"""JUnit XML, the one per-test result format: pytest, node --test, go-junit-report, nextest..."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from enum import StrEnum

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as _safe_fromstring

from verify_cli.errors import ExitCode, VerifyError
from verify_cli.grading.failure_text import readable_failure


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    #: An expected failure (pytest's ``xfail``: a ``skipped`` element of type ``pytest.xfail``):
    #: not a pass for verify-cli's own policies, a pass for SWE-bench's (:meth:`listed_pass`).
    XFAILED = "xfailed"
    MISSING = "missing"  # expected (declared or collected before) but absent from the results

    @property
    def ok(self) -> bool:
        return self is Outcome.PASSED

    @property
    def listed_pass(self) -> bool:
        """Passed as SWE-bench counts a listed test (PASSED or XFAIL)."""
        return self in (Outcome.PASSED, Outcome.XFAILED)

    @property
    def listed_failure(self) -> bool:
        """Failed as SWE-bench counts a listed test (FAILED, ERROR, absent); a skipped test is
        neither passed nor failed there (a skipped PASS_TO_PASS test does not break a task)."""
        return self in (Outcome.FAILED, Outcome.ERROR, Outcome.MISSING)


@dataclass(frozen=True)
class TestOutcome:
    __test__ = False

    id: str
    outcome: Outcome
    duration: float = 0.0
    message: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "outcome": self.outcome.value, "duration": round(self.duration, 6),
                "message": self.message}


class JUnitParseError(VerifyError, ValueError):
    """The results file is not JUnit XML."""

    exit_code = ExitCode.INFRA


def _case_outcome(case: ET.Element) -> tuple[Outcome, str]:
    for child in case:
        tag = child.tag.lower()
        if tag in ("failure", "failed", "error"):
            outcome = Outcome.ERROR if tag == "error" else Outcome.FAILED
            message = child.get("message")
            if not message:
                return outcome, (child.text or "").strip()[:2000]
            return outcome, readable_failure(message.strip(), child.text or "")
        if tag == "skipped":
            outcome = Outcome.XFAILED if child.get("type") == "pytest.xfail" else Outcome.SKIPPED
            return outcome, (child.get("message") or child.text or "").strip()[:500]
    if case.get("failure") is not None:  # node puts it in an attribute too
        return Outcome.FAILED, case.get("failure", "")[:2000]
    return Outcome.PASSED, ""


def parse_junit(xml_bytes: bytes) -> list[TestOutcome]:
    """Every test case of a JUnit XML document, in document order.

    A test's id is ``classname::name``; where the runner gives no meaningful classname
    (node's is always ``test``), the enclosing suite names joined by `` > `` stand in for it.
    Duplicate ids get a ``#2``, ``#3`` suffix.
    """
    try:  # candidate code may write this file: no entities, no DTDs, no external references
        root = _safe_fromstring(xml_bytes, forbid_dtd=True)
    except ET.ParseError as e:
        raise JUnitParseError(f"not well-formed XML: {e}") from None
    except DefusedXmlException as e:
        raise JUnitParseError(f"refused XML construct ({type(e).__name__}): {e}") from None
    if root.tag not in ("testsuites", "testsuite", "testcase"):
        raise JUnitParseError(f"root element is <{root.tag}>, expected <testsuites> or <testsuite>")
    outcomes: list[TestOutcome] = []
    seen: dict[str, int] = {}

    def walk(el: ET.Element, suites: list[str]) -> None:
        for child in el:
            if child.tag == "testsuite":
                walk(child, [*suites, child.get("name", "")])
            elif child.tag == "testcase":
                name = child.get("name", "")
                classname = child.get("classname", "")
                if classname in ("", "test"):
                    inner = [s for s in suites if s and s != "pytest"]
                    classname = " > ".join(inner)
                tid = f"{classname}::{name}" if classname else name
                n = seen.get(tid, 0) + 1
                seen[tid] = n
                if n > 1:
                    tid = f"{tid} #{n}"
                outcome, message = _case_outcome(child)
                try:
                    duration = float(child.get("time", "0") or 0)
                except ValueError:
                    duration = 0.0
                outcomes.append(TestOutcome(tid, outcome, duration, message))

    if root.tag == "testcase":
        wrapper = ET.Element("testsuites")
        wrapper.append(root)
        root = wrapper
    walk(root, [] if root.tag == "testsuites" else [root.get("name", "")])
    return outcomes


def junit_id_of_node_id(node_id: str) -> str:
    """The grader's id (``classname::name``, as :func:`parse_junit` reads pytest's JUnit XML) of a
    pytest node id: the one mapping between the ids task.toml lists (``fail_to_pass``,
    ``pass_to_pass``) and the ids grading reports.

    ``tests/test_x.py::test_y`` -> ``tests.test_x::test_y``;
    ``pkg/tests/test_x.py::TestA::test_y[a/b::c]`` -> ``pkg.tests.test_x.TestA::test_y[a/b::c]``.
    It follows pytest's own ``mangle_test_address`` (the file path dotted, ``.py`` dropped, the
    classes joined to it by dots, parameters left as they are), so it needs no pytest here. The
    mapping is one-way: a dotted classname cannot tell a folder from a class.
    """
    path, bracket, params = node_id.partition("[")
    names = path.split("::")
    names[0] = names[0].replace("/", ".")
    if names[0].endswith(".py"):
        names[0] = names[0][:-3]
    names[-1] += bracket + params
    if len(names) == 1:
        return names[0]
    return f"{'.'.join(names[:-1])}::{names[-1]}"
