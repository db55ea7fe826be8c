"""The ``log`` kind: a project's own runner (Django's and SymPy's are unittest-style and
line-based) graded through its log, with the ids SWE-bench's parsers give; its lists judged."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_task
from verify_cli.checks.report import TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.errors import TaskFormatError
from verify_cli.grading import Grader
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks import load_task, load_task_set

_SPEC = importlib.util.spec_from_file_location(
    "verify_log_junit", Path(__file__).resolve().parents[2] / "verify_cli/harness/runners/verify_log_junit.py")
assert _SPEC is not None and _SPEC.loader is not None
parsers = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(parsers)

DJANGO_LOG = """test_add (ops.tests.OpsTest) ... ok
test_clamp (ops.tests.OpsTest) ... FAIL
test_slow (ops.tests.OpsTest) ... skipped 'slow'
test_noisy (ops.tests.OpsTest) ... System check identified no issues (0 silenced).
ok
======================================================================
ERROR: test_boom (ops.tests.OtherTest)
"""
SYMPY_LOG = """sympy/core/tests/test_x.py[3]
test_add ok
test_clamp F
test_boom E
"""


def test_the_parsers_read_logs_as_swebench_does() -> None:
    assert parsers.parse_django(DJANGO_LOG) == {
        "test_add (ops.tests.OpsTest)": "PASSED", "test_clamp (ops.tests.OpsTest)": "FAILED",
        "test_slow (ops.tests.OpsTest)": "SKIPPED", "test_noisy (ops.tests.OpsTest)": "PASSED",
        "test_boom (ops.tests.OtherTest)": "ERROR"}
    assert parsers.parse_sympy(SYMPY_LOG) == {"test_add": "PASSED", "test_clamp": "FAILED", "test_boom": "ERROR"}
    assert parsers.parse_pytest_log("PASSED tests/a.py::t1\nXFAIL tests/a.py::t2 - why\nFAILED tests/a.py::t3\n") \
        == {"tests/a.py::t1": "PASSED", "tests/a.py::t2": "XFAIL", "tests/a.py::t3": "FAILED"}


RUNNER = """import sys
import unittest

sys.path.insert(0, ".")
suite = unittest.defaultTestLoader.discover("ops", pattern="tests.py", top_level_dir=".")
sys.exit(0 if unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite).wasSuccessful() else 1)
"""
TESTS = """import unittest

from ops.core import add, clamp


class OpsTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_clamp(self):
        self.assertEqual(clamp(9, 0, 5), 5)
"""


def django_style_task(dest: Path, *, fail_to_pass: list[str], pass_to_pass: list[str]) -> Path:
    def mutate(doc: dict[str, Any]) -> None:
        doc["id"] = dest.name
        doc["kind"] = "log"
        doc["editable"] = ["ops/core.py"]
        doc["test"] = {"command": "python tests/runtests.py", "log_parser": "django", "results": "junit.xml",
                       "fail_to_pass": fail_to_pass, "pass_to_pass": pass_to_pass}
        doc["scoring"] = {"policy": "swebench"}
        doc["repository"] = {"test_layout": "repository", "test_files": ["ops/tests.py", "tests/**"]}

    base = "def add(a, b):\n    return a + b\n\n\ndef clamp(x, lo, hi):\n    return max(lo, x)\n"
    return write_task(dest, mutate=mutate, files={
        "starter/solution.py": None, "solution/solution.py": None, "tests/test_solution.py": None,
        "starter/ops/__init__.py": "", "starter/ops/core.py": base, "starter/ops/tests.py": TESTS,
        "starter/tests/runtests.py": RUNNER,
        "solution/ops/core.py": base.replace("max(lo, x)", "min(hi, max(lo, x))")})


def test_a_django_style_task_is_judged_by_its_runners_log(tmp_path: Path, process_sandbox: Sandbox) -> None:
    add, clamp = "test_add (ops.tests.OpsTest.test_add)", "test_clamp (ops.tests.OpsTest.test_clamp)"
    django_style_task(tmp_path / "set" / "good", fail_to_pass=[clamp], pass_to_pass=[add])
    django_style_task(tmp_path / "set" / "wrong", fail_to_pass=[add], pass_to_pass=[clamp])
    reports = {r.task_id: r for r in check_tasks(load_task_set(tmp_path / "set"), Grader(process_sandbox),
                                                 CheckOptions(repeats=2))}
    assert reports["good"].verdict is TaskVerdict.SOUND, [c.to_dict() for c in reports["good"].checks]
    wrong = {c.name: c for c in reports["wrong"].defects}
    assert wrong["fail-to-pass"].tests == (add,)
    assert wrong["pass-to-pass"].tests == (clamp,)


def test_a_log_task_names_its_parser(tmp_path: Path) -> None:
    path = django_style_task(tmp_path / "t", fail_to_pass=["test_clamp (ops.tests.OpsTest.test_clamp)"],
                             pass_to_pass=[])
    text = (path / "task.toml").read_text().replace('log_parser = "django"\n', "")
    (path / "task.toml").write_text(text)
    with pytest.raises(TaskFormatError, match="log_parser"):
        load_task(path)
