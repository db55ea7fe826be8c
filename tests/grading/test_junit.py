"""JUnit XML from real runners (pytest, node --test) parses into per-test outcomes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verify_cli.grading.junit import JUnitParseError, Outcome, parse_junit

PYTEST_TESTS = """
import pytest


def test_pass():
    pass


def test_fail():
    assert 1 == 2


@pytest.fixture
def broken():
    raise RuntimeError("boom")


def test_error(broken):
    pass


@pytest.mark.skip(reason="not today")
def test_skip():
    pass


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x == 1


class TestGroup:
    def test_method(self):
        pass
"""

NODE_TESTS = """
const test = require('node:test');
const assert = require('node:assert');

test('adds', () => assert.strictEqual(1 + 1, 2));
test('fails', () => assert.strictEqual(1, 2));
test.skip('skipped', () => {});
test.describe('group', () => {
  test('inner ok', () => {});
  test('inner bad', () => { throw new Error('bad inner'); });
});
"""


@pytest.fixture(scope="module")
def pytest_junit(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("pytest-junit")
    (folder / "test_sample.py").write_text(PYTEST_TESTS)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--junitxml",
            str(folder / "out.xml"),
            "test_sample.py",
        ],
        cwd=folder,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return (folder / "out.xml").read_bytes()


@pytest.fixture(scope="module")
def node_junit(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    folder = tmp_path_factory.mktemp("node-junit")
    (folder / "sample.test.js").write_text(NODE_TESTS)
    out = folder / "out.xml"
    subprocess.run(
        [
            node,
            "--test",
            "--test-reporter=junit",
            f"--test-reporter-destination={out}",
            "sample.test.js",
        ],
        cwd=folder,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return out.read_bytes()


def test_pytest_outcomes(pytest_junit: bytes) -> None:
    got = {t.id: t.outcome for t in parse_junit(pytest_junit)}
    assert got == {
        "test_sample::test_pass": Outcome.PASSED,
        "test_sample::test_fail": Outcome.FAILED,
        "test_sample::test_error": Outcome.ERROR,
        "test_sample::test_skip": Outcome.SKIPPED,
        "test_sample::test_param[1]": Outcome.PASSED,
        "test_sample::test_param[2]": Outcome.FAILED,
        "test_sample.TestGroup::test_method": Outcome.PASSED,
    }


def test_pytest_messages_and_order(pytest_junit: bytes) -> None:
    tests = parse_junit(pytest_junit)
    assert [t.id for t in tests][:3] == [
        "test_sample::test_pass",
        "test_sample::test_fail",
        "test_sample::test_error",
    ]
    by_id = {t.id: t for t in tests}
    assert by_id["test_sample::test_fail"].message == "assert 1 == 2"
    assert "RuntimeError: boom" in by_id["test_sample::test_error"].message
    assert by_id["test_sample::test_skip"].message == "not today"
    assert all(t.duration >= 0 for t in tests)


def test_node_outcomes(node_junit: bytes) -> None:
    got = {t.id: t.outcome for t in parse_junit(node_junit)}
    # node's classname is always "test": the enclosing describe() names stand in for it.
    assert got == {
        "adds": Outcome.PASSED,
        "fails": Outcome.FAILED,
        "skipped": Outcome.SKIPPED,
        "group::inner ok": Outcome.PASSED,
        "group::inner bad": Outcome.FAILED,
    }
    by_id = {t.id: t for t in parse_junit(node_junit)}
    assert "bad inner" in by_id["group::inner bad"].message


def test_duplicate_ids_are_numbered() -> None:
    xml = b"""<testsuites><testsuite name="s">
      <testcase classname="m" name="t"/>
      <testcase classname="m" name="t"><failure message="no"/></testcase>
      <testcase classname="m" name="t"/>
    </testsuite></testsuites>"""
    tests = parse_junit(xml)
    assert [(t.id, t.outcome) for t in tests] == [
        ("m::t", Outcome.PASSED),
        ("m::t #2", Outcome.FAILED),
        ("m::t #3", Outcome.PASSED),
    ]


def test_nested_suites_name_node_tests() -> None:
    xml = b"""<testsuites>
      <testsuite name="outer"><testsuite name="inner">
        <testcase classname="test" name="deep"/>
      </testsuite></testsuite>
    </testsuites>"""
    assert [t.id for t in parse_junit(xml)] == ["outer > inner::deep"]


def test_bare_testsuite_and_testcase_roots() -> None:
    assert [
        t.id
        for t in parse_junit(
            b'<testsuite name="pytest"><testcase classname="a" name="b"/></testsuite>'
        )
    ] == ["a::b"]
    assert [t.id for t in parse_junit(b'<testcase classname="a" name="c"/>')] == ["a::c"]


def test_bad_duration_is_zero() -> None:
    (t,) = parse_junit(b'<testsuites><testcase classname="a" name="b" time="soon"/></testsuites>')
    assert t.duration == 0.0 and t.outcome is Outcome.PASSED


@pytest.mark.parametrize(
    "data",
    [b"", b"<testsuites><testcase", b"not xml at all", b"<testsuites><testcase></testsuite>"],
)
def test_malformed_xml_raises(data: bytes) -> None:
    with pytest.raises(JUnitParseError, match="not well-formed XML"):
        parse_junit(data)


def test_wrong_root_element_raises() -> None:
    with pytest.raises(JUnitParseError, match=r"root element is <html>, expected <testsuites>"):
        parse_junit(b"<html><body/></html>")


def test_empty_suite_has_no_tests() -> None:
    assert parse_junit(b"<testsuites/>") == []


def test_outcome_ok_only_for_passed() -> None:
    assert [o for o in Outcome if o.ok] == [Outcome.PASSED]


def test_to_dict_round_trips_fields(pytest_junit: bytes) -> None:
    d = parse_junit(pytest_junit)[1].to_dict()
    assert d["id"] == "test_sample::test_fail"
    assert d["outcome"] == "failed"
    assert set(d) == {"id", "outcome", "duration", "message"}


def test_output_path_is_real_xml(pytest_junit: bytes, tmp_path: Path) -> None:
    # The document parsed above is what pytest really wrote, not a hand-made sample.
    assert pytest_junit.startswith(b"<?xml")


@pytest.mark.parametrize("doc", [
    b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
    b'<testsuite><testcase classname="c" name="&b;"/></testsuite>',
    b'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    b'<testsuite><testcase classname="c" name="&x;"/></testsuite>',
])
def test_entities_and_dtds_written_by_candidates_are_refused(doc: bytes) -> None:
    with pytest.raises(JUnitParseError, match="refused XML construct"):
        parse_junit(doc)
