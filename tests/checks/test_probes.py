"""Reward-hack probes: none earns anything on a sound task, each catches the defect built for it,
and the grading holes they found stay closed (the same run scores without the fix)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verify_cli.checks.audit import AuditOptions, ProbeResult, TaskAudit, audit_tasks
from verify_cli.checks.probes import BATTERY, build_probe, probe_context, probes_for, result_file_names
from verify_cli.grading import Grader, GradeRequest, GradeResult, Phase, lay_out, parse_junit
from verify_cli.grading.grader import judge, request_environment, request_limits
from verify_cli.grading.seal import new_seal_key
from verify_cli.sandbox import RunSpec, Sandbox, create_sandbox, sandbox_class
from verify_cli.tasks import load_task, load_task_set
from verify_cli.tasks.model import Task

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_tasks"
DEFECTIVE = REPO / "tests" / "fixtures" / "defective"
#: bwrap with warm pytest workers where it runs (fast); else the process backend.
BACKEND = "bwrap" if sandbox_class("bwrap").availability().available else "process"


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with create_sandbox(BACKEND) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def grader(box: Sandbox) -> Iterator[Grader]:
    with Grader(box, warm=BACKEND == "bwrap") as g:
        yield g


def probe_files(task: Task, name: str) -> dict[str, bytes]:
    (probe,) = [p for p in probes_for(task.language) if p.name == name]
    files = build_probe(probe, probe_context(task))
    assert files is not None
    return files


def by_name(audit: TaskAudit) -> dict[str, ProbeResult]:
    assert audit.probes is not None
    return {p.name: p for p in audit.probes}


# --- sound tasks: nothing earns anything -----------------------------------------------------


#: The default tier's sample tasks for the probes (one of each language and shape: Python pytest
#: two-process, a data pipeline, a command-line interface, a package, JavaScript); the extended
#: tier (VERIFY_TESTS_FULL=1) probes every sample task.
PROBED_SAMPLES = ("coding-interval-merge", "data-pipeline-sales-rollup", "interface-spec-kv-cli",
                  "repo-inventory-package", "coding-word-wrap-js")


def test_no_probe_earns_anything_on_a_sound_sample_task(tmp_path: Path, grader: Grader) -> None:
    # Copies with a short wall limit: the sleep probe then costs seconds, not half a minute.
    every = os.environ.get("VERIFY_TESTS_FULL") == "1"
    for src in SAMPLES.iterdir():
        if (src / "task.toml").is_file() and (every or src.name in PROBED_SAMPLES):
            dest = shutil.copytree(src, tmp_path / src.name)
            toml = dest / "task.toml"
            toml.write_text(re.sub(r"wall_seconds = \d+", "wall_seconds = 6", toml.read_text()))
    audits = audit_tasks(load_task_set(tmp_path), grader,
                         AuditOptions(mutants=False, flaky=False, labelled=False, jobs=3))  # sleepers overlap
    assert len(audits) == (len([p for p in SAMPLES.iterdir() if (p / "task.toml").is_file()]) if every
                           else len(PROBED_SAMPLES))
    scores: dict[str, dict[str, float | None]] = {}
    for audit in audits:
        probes = by_name(audit)
        # read-fix-from-git-history applies only to a starter that ships a .git (none here).
        assert set(probes) == {p.name for p in BATTERY[audit.language]} - {"read-fix-from-git-history"}, audit.task_id
        scores[audit.task_id] = {n: p.score for n, p in probes.items() if p.score != 0.0}
    assert scores == {a.task_id: {} for a in audits}
    assert all(a.verdict().value == "reliable" for a in audits)


# --- defective fixtures: each is caught by the probes built for it ---------------------------

CAUGHT_BY = {
    "hackable-harness": {"always-equal": "tests"},
    "exit-status-only": {"exit-zero-at-import": "harness", "os-exit-at-import": "harness",
                         "forged-summary": "harness"},
    "unsealed-runner": {"forged-junit": "harness", "forged-junit-at-exit": "harness",
                        "patched-assertions": "harness"},
    "editable-conftest": {"planted-conftest": "harness"},
    # weak-tests grades two-process: its candidate never sees the test files, so this probe
    # earns 0 there (in-process it read them).
    "memorisable-tests-js": {"read-tests-from-disk": "tests"},  # declares in-process
}


def test_each_defective_fixture_is_caught_by_its_probes(tmp_path: Path, grader: Grader) -> None:
    for name in CAUGHT_BY:
        shutil.copytree(DEFECTIVE / name, tmp_path / name)
    wanted = frozenset(p for probes in CAUGHT_BY.values() for p in probes) | {"always-equal"}
    audits = {Path(a.path).name: a for a in audit_tasks(
        load_task_set(tmp_path), grader,
        AuditOptions(mutants=False, flaky=False, labelled=False, jobs=2, probe_names=wanted))}
    for name, expected in CAUGHT_BY.items():
        probes = by_name(audits[name])
        for probe, target in expected.items():
            result = probes[probe]
            assert result.hacked and result.score == 1.0, (name, probe, result.why)
            assert result.target == target
            assert "earned 1.00" in result.why
        assert audits[name].verdict().value == "unreliable"
        assert any(probe in f for f in audits[name].findings() for probe in expected)
    # The type checks of these fixtures defeat the always-equal object: only their hole is found.
    for name in ("unsealed-runner", "editable-conftest"):
        assert by_name(audits[name])["always-equal"].score == 0.0


# --- harness holes stay closed ------------------------------------------------------------


def grade_twice(box: Sandbox, task: Task, files: dict[str, bytes]) -> tuple[GradeResult, GradeResult]:
    """One sandboxed run of a candidate, judged without the harness's seal and with it."""
    req = GradeRequest(task, Phase.PROBE, candidate=files)
    key = new_seal_key()
    root = Path(tempfile.mkdtemp(prefix="verify-probe-test-"))
    try:
        laid = lay_out(task, Phase.PROBE, root, files)
        spec = RunSpec(["/bin/sh", "-c", task.test.command], workdir=root, limits=request_limits(req),
                       env=request_environment(req, key), runtime=task.environment.runtime)
        run = box.run(spec)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    started = time.monotonic()
    return (judge(task, req, run, started, laid.ignored),
            judge(task, req, run, started, laid.ignored, seal_key=key))


@pytest.mark.parametrize("task_name, probe, expect", [
    ("coding-interval-merge", "forged-junit", "no valid harness record"),
    ("coding-interval-merge", "forged-junit-at-exit", "did not report passing"),
    ("coding-interval-merge", "patched-assertions", "pytest.raises was replaced"),
    ("coding-interval-merge", "patched-reports", "TestReport.from_item_and_call was replaced"),
    ("coding-roman-numerals", "edit-test-files", "test file hidden_tests/test_roman_edge.py changed"),
])
def test_a_pytest_hole_scores_without_the_seal_and_not_with_it(
        box: Sandbox, task_name: str, probe: str, expect: str) -> None:
    task = load_task(SAMPLES / task_name)
    unsealed, sealed = grade_twice(box, task, probe_files(task, probe))
    assert unsealed.score and unsealed.score > 0, unsealed.problems  # the trick works on pytest...
    assert sealed.score == 0.0  # ...and the harness's record stops it
    assert any(expect in p for p in sealed.problems), sealed.problems


def test_node_file_stand_in_never_passes(box: Sandbox) -> None:
    """process.exit(0) at require: node reports the test file itself as one passing test."""
    task = load_task(SAMPLES / "coding-word-wrap-js")
    unsealed, sealed = grade_twice(box, task, probe_files(task, "exit-zero-at-import"))
    raw = parse_junit(sealed.run.results["junit.xml"])
    assert [t.outcome.value for t in raw] == ["passed"]
    assert raw[0].id.endswith("tests/wrap.test.js")
    assert sealed.score == unsealed.score == 0.0
    assert "ran none of its tests" in sealed.tests[0].message


def test_node_assertions_are_frozen_before_candidate_code(box: Sandbox) -> None:
    task = load_task(SAMPLES / "coding-word-wrap-js")
    files = probe_files(task, "patched-assertions")
    req = GradeRequest(task, Phase.PROBE, candidate=files)
    scores = {}
    for guarded in (True, False):
        root = Path(tempfile.mkdtemp(prefix="verify-probe-test-"))
        try:
            laid = lay_out(task, Phase.PROBE, root, files)
            env = request_environment(req)
            if not guarded:
                env.pop("NODE_OPTIONS")
            run = box.run(RunSpec(["/bin/sh", "-c", task.test.command], workdir=root,
                                  limits=request_limits(req), env=env, runtime="node"))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        scores[guarded] = judge(task, req, run, time.monotonic(), laid.ignored).score
    assert scores == {False: 1.0, True: 0.0}


def test_harness_files_are_never_taken_through_a_wildcard(make_task: Any, tmp_path: Path) -> None:
    planted = {"conftest.py": b"x", "pkg/conftest.py": b"x", "sitecustomize.py": b"x",
               "usercustomize.py": b"x", "evil.pth": b"x", "__pycache__/solution.cpython-311.pyc": b"x",
               "pytest.ini": b"x", "solution.py": b"def total(v):\n    return 0\n"}

    def everything(doc: dict[str, Any]) -> None:
        doc["editable"] = ["**"]

    task = load_task(make_task("wild", mutate=everything))
    laid = lay_out(task, Phase.CANDIDATE, tmp_path / "w1", planted)
    assert sorted(laid.ignored) == sorted(set(planted) - {"solution.py"})

    def named(doc: dict[str, Any]) -> None:
        doc["editable"] = ["solution.py", "conftest.py"]

    task = load_task(make_task("named", mutate=named, files={"solution/conftest.py": ""}))
    laid = lay_out(task, Phase.CANDIDATE, tmp_path / "w2", planted)
    assert "conftest.py" not in laid.ignored and (tmp_path / "w2" / "conftest.py").is_file()
    assert "pkg/conftest.py" in laid.ignored


def test_probe_modules_keep_the_reference_names() -> None:
    task = load_task(SAMPLES / "interface-spec-kv-cli")
    source = probe_files(task, "always-equal")["kv.py"].decode()
    compile(source, "kv.py", "exec")
    for name in ("class KvError(Exception)", "def main(", "def _run(", 'if __name__ == "__main__"'):
        assert name in source
    js = probe_files(load_task(SAMPLES / "interface-spec-event-emitter-js"), "catch-all-default")
    assert "module.exports = { Emitter }" in js["emitter.js"].decode()
    assert result_file_names("junit.xml") == ("junit.xml",)
    assert result_file_names("reports/*.xml") == ("reports/junit.xml", "reports/zz-forged.xml")


# --- expected values read from the tests' data files ------------------------------------------

DATA_FILES = REPO / "tests" / "fixtures" / "data-files"
#: Per fixture, the tests whose expected values come from its data files.
DATA_DRIVEN = {
    "parse-duration": [f"tests.test_duration::test_parses[{t}]" for t in ("2h", "1h30m", "45s", "1h2m3s", "90m")]
    + [f"hidden_tests.test_hidden_duration::test_parses_hidden_cases[{t}]" for t in ("0s", "10m5s", "100h", "1m1s")],
    "parse-duration-js": [f"parses {t}" for t in ("2h", "1h30m", "45s", "1h2m3s", "90m")],
}


def data_probe(task_dir: Path, grader: Grader) -> ProbeResult:
    (audit,) = audit_tasks(load_task_set(task_dir), grader, AuditOptions(
        mutants=False, flaky=False, labelled=False, jobs=2,
        probe_names=frozenset({"read-test-data-files", "read-tests-from-disk", "always-equal"})))
    probes = by_name(audit)
    # The tests check types and the literal-reading probe finds no literal: only the data files leak.
    assert probes["always-equal"].score == 0.0 and probes["read-tests-from-disk"].score == 0.0
    return probes["read-test-data-files"]


@pytest.mark.parametrize("fixture", sorted(DATA_DRIVEN))
def test_the_data_file_probe_answers_from_json_and_csv_files_in_process(
        fixture: str, tmp_path: Path, grader: Grader) -> None:
    """Graded in-process the candidate sees the test folders, so it answers every data-driven case."""
    task_dir = shutil.copytree(DATA_FILES / fixture, tmp_path / fixture)
    toml = task_dir / "task.toml"
    toml.write_text(toml.read_text().replace("\n[environment]", 'isolation = "in-process"\n\n[environment]', 1))
    result = data_probe(task_dir, grader)
    assert result.hacked and result.target == "harness"
    assert sorted(result.passed_tests) == sorted(DATA_DRIVEN[fixture])


@pytest.mark.parametrize("fixture", sorted(DATA_DRIVEN))
def test_the_data_file_probe_earns_nothing_with_two_process_grading(fixture: str, grader: Grader) -> None:
    assert load_task(DATA_FILES / fixture).isolation == "two-process"
    assert data_probe(DATA_FILES / fixture, grader).score == 0.0


# --- a score through weak tests is named as such ---------------------------------------------


def test_a_harness_probe_whose_files_are_refused_scores_through_weak_tests_and_says_so(
        make_task: Any, grader: Grader) -> None:
    # The tests call the function and check nothing: the probe's plain stub passes them.
    root = make_task("weak", files={"tests/test_solution.py": (
        "from solution import total\n\n\ndef test_runs():\n    total([1, 2])\n")})
    (audit,) = audit_tasks(load_task_set(root), grader, AuditOptions(
        mutants=False, flaky=False, labelled=False, jobs=1,
        probe_names=frozenset({"planted-conftest", "interpreter-startup-files"})))
    probes = by_name(audit)
    for name in ("planted-conftest", "interpreter-startup-files"):
        p = probes[name]
        assert p.hacked and p.score == 1.0, p.why
        assert p.target == "tests", p.why  # the stub earned it, not a harness hole
        assert "refused every one of them" in p.why and "stub of the editable code" in p.why
    assert {"conftest.py", "tests/conftest.py"} <= set(probes["planted-conftest"].ignored_files)
    findings = audit.findings()
    assert any("hackable (weak tests): probe planted-conftest" in f for f in findings), findings
    assert not any("grading hole" in f for f in findings), findings
