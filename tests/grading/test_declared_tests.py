"""Which tests run is the trusted side's decision, and every test the task declares is counted.

A candidate whose editable globs admit a root ``pyproject.toml``, ``tox.ini`` or ``setup.cfg``
must not configure pytest through it (``addopts = --ignore-glob=*hidden*`` once hid the hidden
tests: a visible-only roman solution scored 1.00 instead of 0.33); and a run that reports fewer
tests than the task declares has the missing ones failed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SAMPLE_TASKS, write_task
from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
from verify_cli.grading.junit import Outcome
from verify_cli.grading.workspace import Phase
from verify_cli.kinds.pytest_config import TRUSTED_INI, pristine_settings, render_ini
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.kit.testing import FakeSandbox
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task

BACKENDS = [pytest.param("bwrap", marks=pytest.mark.bwrap, id="bwrap"),
            pytest.param("docker", marks=pytest.mark.docker, id="docker")]

#: Passes the visible roman tests, fails four of the five hidden ones (no validation).
VISIBLE_ONLY_ROMAN = '''\
_V = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"),
      (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
_D = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(n):
    out = ""
    for value, letters in _V:
        count, n = divmod(n, value)
        out += letters * count
    return out


def from_roman(s):
    total = 0
    for i, ch in enumerate(s):
        v = _D[ch]
        total += -v if i + 1 < len(s) and v < _D[s[i + 1]] else v
    return total
'''

HIDING_CONFIGS = {
    "pyproject.toml": '[project]\nname = "roman"\n\n[tool.pytest.ini_options]\naddopts = "--ignore-glob=*hidden*"\n',
    "tox.ini": "[pytest]\naddopts = --ignore-glob=*hidden*\n",
    "setup.cfg": "[tool:pytest]\naddopts = --ignore-glob=*hidden*\npython_files = nothing_*.py\n",
}


def _wide_roman(dest: Path, policy: str) -> Path:
    """The roman sample task with every file editable (``**/*``) under ``policy``."""
    shutil.copytree(SAMPLE_TASKS / "coding-roman-numerals", dest)
    text = (dest / "task.toml").read_text().replace('editable = ["roman.py"]', 'editable = ["**/*"]')
    if policy == "all-or-nothing":
        text = text.replace('policy = "weighted"', 'policy = "all-or-nothing"')
    (dest / "task.toml").write_text(text)
    return dest


@pytest.fixture(scope="module", params=BACKENDS)
def grader(request: pytest.FixtureRequest) -> Iterator[Grader]:
    with Grader(create_sandbox(request.param)) as g:
        yield g


@pytest.mark.parametrize("config", sorted(HIDING_CONFIGS))
@pytest.mark.parametrize(("policy", "expected"), [("weighted", 6 / 18), ("all-or-nothing", 0.0)])
def test_candidate_configuration_never_hides_the_hidden_tests(
        grader: Grader, tmp_path: Path, config: str, policy: str, expected: float) -> None:
    task = load_task(_wide_roman(tmp_path / "roman", policy))
    result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={
        "roman.py": VISIBLE_ONLY_ROMAN.encode(), config: HIDING_CONFIGS[config].encode()}))
    assert result.status is GradeStatus.GRADED
    assert config not in result.ignored_files  # taken: it may configure the package, not pytest
    hidden = [t for t in result.tests if t.id.startswith("hidden_tests.")]
    assert len(hidden) == 5 and sum(not t.outcome.ok for t in hidden) == 4
    assert result.score == pytest.approx(expected)
    assert not result.passed


def test_a_candidate_file_named_like_the_trusted_configuration_is_not_taken(
        grader: Grader, tmp_path: Path) -> None:
    task = load_task(_wide_roman(tmp_path / "roman", "all-or-nothing"))
    result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={
        "roman.py": VISIBLE_ONLY_ROMAN.encode(), TRUSTED_INI: b"[pytest]\naddopts = --ignore-glob=*hidden*\n"}))
    assert TRUSTED_INI in result.ignored_files
    assert result.score == 0.0 and len(result.tests) == 8


def test_the_pristine_tasks_own_pytest_configuration_still_applies(grader: Grader, tmp_path: Path) -> None:
    # The task's pyproject (in the starter, editable) names its own test functions check_*.
    root = write_task(tmp_path / "task", mutate=lambda d: d.update(editable=["*"]),
                      files={"starter/pyproject.toml": '[tool.pytest.ini_options]\npython_functions = ["check_*"]\n'
                                                      'markers = ["slow: slow ones", "fast: fast ones"]\n'
                                                      'addopts = "--strict-markers"\n',
                             "tests/test_solution.py": "import pytest\nfrom solution import total\n\n\n"
                                                       "@pytest.mark.slow\ndef check_empty():\n"
                                                       "    assert total([]) == 0\n\n\n"
                                                       "def check_several():\n    assert total([1, 2]) == 3\n"})
    task = load_task(root)
    reference = grader.grade(GradeRequest(task, Phase.REFERENCE))
    assert reference.passed and sorted(t.id.rsplit("::", 1)[1] for t in reference.tests) == [
        "check_empty", "check_several"]
    # A candidate's own pyproject (no pytest section) changes nothing of that.
    result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={
        "solution.py": b"def total(values):\n    return sum(values)\n",
        "pyproject.toml": b'[project]\nname = "total"\n'}))
    assert result.passed and len(result.tests) == 2


#: A runner that reports only the cases the candidate's module does not list in ``SKIP``.
SKIPPING_RUNNER = """\
import os, sys
sys.path.insert(0, os.getcwd())
import solution
cases = {"test_empty": lambda: solution.total([]) == 0, "test_several": lambda: solution.total([1, 2, 3]) == 6}
out, ok = [], True
for name, case in cases.items():
    if name in getattr(solution, "SKIP", ()):
        continue
    try:
        passed = bool(case())
    except Exception:
        passed = False
    ok = ok and passed
    out.append(f'<testcase classname="check" name="{name}"'
               + ("/>" if passed else '><failure message="no"/></testcase>'))
with open(os.path.join(os.environ["VERIFY_RESULTS_DIR"], "junit.xml"), "w") as fh:
    fh.write("<testsuites>" + "".join(out) + "</testsuites>")
sys.exit(0 if ok else 1)
"""


def _skipping_task(dest: Path, policy: str = "all-or-nothing") -> Path:
    def mutate(doc: dict[str, Any]) -> None:
        doc["kind"] = "command"
        doc["test"] = {"command": "python tests/check.py", "results": "junit.xml"}
        doc["scoring"] = {"policy": policy}
    return write_task(dest, mutate=mutate, files={"tests/test_solution.py": None, "tests/check.py": SKIPPING_RUNNER})


def test_a_test_the_candidate_run_does_not_report_is_failed(grader: Grader, tmp_path: Path) -> None:
    task = load_task(_skipping_task(tmp_path / "task"))
    wrong = b"def total(values):\n    return 0\n\nSKIP = ['test_several']\n"
    result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={"solution.py": wrong}))
    assert result.status is GradeStatus.GRADED and not result.passed and result.score == 0.0
    assert result.outcome_of("check::test_several") is Outcome.MISSING
    # The expectation was collected once, from the reference, and is kept.
    assert grader.expected_tests(task) == frozenset({"check::test_empty", "check::test_several"})


def test_a_fraction_counts_the_missing_test_as_failed(grader: Grader, tmp_path: Path) -> None:
    task = load_task(_skipping_task(tmp_path / "task", policy="fraction"))
    wrong = b"def total(values):\n    return 0\n\nSKIP = ['test_several']\n"
    result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={"solution.py": wrong}))
    assert result.score == pytest.approx(0.5)


def test_an_explicit_expectation_is_used_as_given(grader: Grader, tmp_path: Path) -> None:
    task = load_task(_skipping_task(tmp_path / "task"))
    right = b"def total(values):\n    return sum(values)\n"
    result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={"solution.py": right},
                                       expected_tests=frozenset({"check::test_empty", "check::test_several",
                                                                 "check::test_more"})))
    assert result.outcome_of("check::test_more") is Outcome.MISSING and not result.passed


# -- the trusted configuration itself (no sandbox) ---------------------------------------------


def test_pytest_precedence_is_followed(tmp_path: Path) -> None:
    (tmp_path / "tox.ini").write_text("[pytest]\npython_files = t_*.py\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no pytest section: skipped
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\npython_files = s_*.py\n")
    files = {p.name: p for p in tmp_path.iterdir()}
    assert pristine_settings(files) == {"python_files": "t_*.py"}
    (tmp_path / "pytest.ini").write_text("# empty, still pytest's choice\n")
    assert pristine_settings({p.name: p for p in tmp_path.iterdir()}) == {}


def test_toml_lists_render_as_ini_lines(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\nmarkers = ["a: one", "b: two"]\n'
                                             'xfail_strict = true\nminversion = "7.0"\n')
    text = render_ini(pristine_settings({"pyproject.toml": tmp_path / "pyproject.toml"}))
    assert "markers = \n    a: one\n    b: two" in text
    assert "xfail_strict = true" in text and "minversion = 7.0" in text


def test_a_candidate_whose_declared_tests_could_not_be_collected_is_unscored(
        tmp_path: Path, process_sandbox: Sandbox) -> None:
    task = load_task(_skipping_task(tmp_path / "task"))
    box = FakeSandbox(inner=process_sandbox, fail_first=1, fail_message="daemon hiccup")  # the reference run
    grader = Grader(box)
    right = {"solution.py": b"def total(values):\n    return sum(values)\n"}
    first = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate=right, seed=7, label="x"))
    assert first.status is GradeStatus.INFRA_ERROR and first.score is None
    assert (first.phase, first.seed, first.label) == (Phase.CANDIDATE, 7, "x")
    assert "collecting the task's declared tests" in first.problems[0] and "daemon hiccup" in first.problems[0]
    again = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate=right))  # asked again: collected now
    assert again.status is GradeStatus.GRADED and again.passed and box.runs == 3


def test_copies_of_a_task_share_one_collection_of_its_declared_tests(
        tmp_path: Path, process_sandbox: Sandbox) -> None:
    # An agent episode's visible-tests task is a fresh copy of the task each episode.
    first = load_task(_skipping_task(tmp_path / "one"))
    second = load_task(_skipping_task(tmp_path / "two"))
    box = FakeSandbox(inner=process_sandbox)
    grader = Grader(box)
    right = {"solution.py": b"def total(values):\n    return sum(values)\n"}
    assert grader.grade(GradeRequest(first, Phase.CANDIDATE, candidate=right)).passed and box.runs == 2
    assert grader.grade(GradeRequest(second, Phase.CANDIDATE, candidate=right)).passed and box.runs == 3


def test_a_reference_that_fails_declares_nothing(tmp_path: Path, process_sandbox: Sandbox) -> None:
    # A failing reference may report a collection error in place of its tests: it holds no run
    # to its ids (check-tasks calls the task defective).
    root = _skipping_task(tmp_path / "task")
    (root / "solution" / "solution.py").write_text("def total(values):\n    return 0\n")
    task = load_task(root)
    grader = Grader(process_sandbox)
    result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={
        "solution.py": b"def total(values):\n    return sum(values)\n\nSKIP = ['test_several']\n"}))
    assert grader.expected_tests(task) == frozenset()
    assert [t.id for t in result.tests] == ["check::test_empty"] and result.passed


def test_a_work_folder_that_cannot_be_made_is_unscored(tmp_path: Path, process_sandbox: Sandbox) -> None:
    task = load_task(_skipping_task(tmp_path / "task"))
    blocker = tmp_path / "scratch-is-a-file"
    blocker.write_text("")
    box = FakeSandbox(inner=process_sandbox)
    result = Grader(box, work_root=blocker).grade(GradeRequest(task, Phase.REFERENCE, seed=3))
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None and result.seed == 3
    assert "cannot create the run's work folder" in result.problems[0] and box.runs == 0


def test_a_work_folder_that_cannot_be_filled_is_unscored(tmp_path: Path, process_sandbox: Sandbox) -> None:
    import resource
    import signal

    task = load_task(_skipping_task(tmp_path / "task"))
    box = FakeSandbox(inner=process_sandbox)
    grader = Grader(box, work_root=tmp_path)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, hard))  # the host's limit: every write past 16 bytes fails
    try:
        result = grader.grade(GradeRequest(task, Phase.REFERENCE))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None
    assert "cannot lay out the work folder" in result.problems[0] and box.runs == 0
