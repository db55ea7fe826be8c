"""The built-in runners of 'stdio' and 'calls' tasks, graded on bwrap as check-tasks grades:
comparisons (tolerance, checker program), limits, and candidates that try to pass without
doing the work."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verify_cli.grading.grader import Grader, GradeRequest, GradeResult
from verify_cli.grading.workspace import Phase
from verify_cli.importers.model import TaskDraft
from verify_cli.importers.writer import write_task
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task, TaskKind

pytestmark = pytest.mark.bwrap


@pytest.fixture(scope="module")
def grader() -> Iterator[Grader]:
    from verify_cli.sandbox.registry import create_sandbox

    with create_sandbox("bwrap") as box, Grader(box, warm=True) as g:
        yield g


def stdio_task(root: Path, solution: str, cases: dict[str, tuple[str, str]], *, files: dict[str, str] | None = None,
               isolation: str = "two-process", **table: Any) -> Task:
    draft_files = {"starter/main.py": "", "solution/main.py": solution, **(files or {})}
    for name, (given, expected) in cases.items():
        draft_files[f"hidden_tests/cases/{name}.in"] = given
        draft_files[f"hidden_tests/cases/{name}.out"] = expected
    draft = TaskDraft(id="t/stdio", prompt="p", kind=TaskKind.STDIO, files=draft_files, editable=["main.py"],
                      table={"program": "python main.py", **table}, wall_seconds=20.0)
    folder = write_task(draft, root)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('kind = "stdio"', f'kind = "stdio"\nisolation = "{isolation}"'))
    return load_task(folder)


def calls_task(root: Path, solution: str, test_file: str, test_text: str, *, style: str = "check",
               entry: str = "f", isolation: str = "two-process", **table: Any) -> Task:
    draft = TaskDraft(id="t/calls", prompt="p", kind=TaskKind.CALLS,
                      files={"starter/solution.py": f"def {entry}(*a):\n    raise NotImplementedError\n",
                             "solution/solution.py": solution, f"hidden_tests/{test_file}": test_text},
                      editable=["solution.py"],
                      table={"entry_point": entry, "module": "solution.py", "style": style, **table},
                      wall_seconds=20.0)
    folder = write_task(draft, root)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('kind = "calls"', f'kind = "calls"\nisolation = "{isolation}"'))
    return load_task(folder)


def grade(grader: Grader, task: Task, code: str, name: str = "main.py") -> GradeResult:
    return grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={name: code.encode()}))


def outcomes(result: GradeResult) -> dict[str, str]:
    return {t.id.rsplit("::", 1)[-1]: t.outcome.value for t in result.tests}


# --- stdio -------------------------------------------------------------------------------------


def test_numeric_comparison_within_tolerance(tmp_path: Path, grader: Grader) -> None:
    task = stdio_task(tmp_path, "a, b = map(float, input().split())\nprint(f'{a / b:.7f}')\n",
                      {"third": ("1 3\n", "0.333333333\n"), "half": ("1 2\n", "0.5\n")},
                      compare="numeric", tolerance=1e-6)
    assert grader.grade(GradeRequest(task, Phase.REFERENCE)).passed
    assert grade(grader, task, "a, b = map(float, input().split())\nprint(round(a / b, 3))\n").passed is False
    # The same output is refused by an exact token comparison: the tolerance is what accepts it.
    strict = stdio_task(tmp_path / "strict", "a, b = map(float, input().split())\nprint(f'{a / b:.7f}')\n",
                        {"third": ("1 3\n", "0.333333333\n")}, compare="tokens")
    assert not grader.grade(GradeRequest(strict, Phase.REFERENCE)).passed


CHECKER = """import sys
given, expected, actual = (open(p).read() for p in sys.argv[1:4])
n = int(given)
try:
    d = int(actual.split()[0])
except (ValueError, IndexError):
    sys.exit("not a number")
sys.exit(0 if 1 < d < n and n % d == 0 else f"{d} is not a proper divisor of {n}")
"""


def test_custom_checker_accepts_any_right_answer(tmp_path: Path, grader: Grader) -> None:
    smallest = "n = int(input())\nprint(next(d for d in range(2, n) if n % d == 0))\n"
    task = stdio_task(tmp_path, smallest, {"a": ("12\n", "2\n"), "b": ("35\n", "5\n")},
                      files={"hidden_tests/checker.py": CHECKER}, compare="checker",
                      checker="python hidden_tests/checker.py")
    assert grader.grade(GradeRequest(task, Phase.REFERENCE)).passed
    largest = "n = int(input())\nprint(max(d for d in range(2, n) if n % d == 0))\n"
    assert grade(grader, task, largest).passed  # not the expected output, but right
    wrong = grade(grader, task, "print(1)\n")
    assert not wrong.passed
    assert "not a proper divisor" in wrong.tests[0].message


def test_per_case_time_limit_fails_only_that_case(tmp_path: Path, grader: Grader) -> None:
    task = stdio_task(tmp_path, "print(input())\n", {"fast": ("1\n", "1\n"), "slow": ("2\n", "2\n")},
                      case_seconds=1.0)
    result = grade(grader, task, "import time\nx = input()\nif x == '2':\n    time.sleep(30)\nprint(x)\n")
    assert outcomes(result) == {"fast": "passed", "slow": "failed"}
    assert "time limit" in next(t.message for t in result.tests if t.id.endswith("slow"))
    assert result.run.wall_seconds < 15


@pytest.mark.parametrize("isolation", ["two-process", "in-process"])
def test_a_program_cannot_forge_the_results(tmp_path: Path, grader: Grader, isolation: str) -> None:
    """In-process the program shares the runner's sandbox and can write the results folder; the
    runner's signed record is what the grader trusts, and the program never sees its key."""
    task = stdio_task(tmp_path, "print(int(input()) * 2)\n", {"a": ("2\n", "4\n")}, isolation=isolation)
    assert grader.grade(GradeRequest(task, Phase.REFERENCE)).passed
    forge = ("import os, glob\n"
             "xml = '<testsuite><testcase classname=\"hidden_tests.cases\" name=\"a\"/></testsuite>'\n"
             "for d in ['/results', os.environ.get('VERIFY_RESULTS_DIR', '')] + glob.glob('/tmp/*'):\n"
             "    try:\n        open(os.path.join(d, 'junit.xml'), 'w').write(xml)\n"
             "    except OSError:\n        pass\n"
             "for pid in os.listdir('/proc'):\n"  # then kill the runner before it writes its own
             "    try:\n"
             "        if pid.isdigit() and b'verify_stdio' in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
             "            os.kill(int(pid), 9)\n"
             "    except OSError:\n        pass\n"
             "print(5)\n")  # a wrong answer: only a forged result could pass it
    assert not grade(grader, task, forge).passed


# --- calls -------------------------------------------------------------------------------------


@pytest.mark.parametrize("isolation", ["two-process", "in-process"])
def test_an_object_equal_to_everything_does_not_pass(tmp_path: Path, grader: Grader, isolation: str) -> None:
    """In-process, the runner starts the candidate server itself: still a separate process."""
    task = calls_task(tmp_path, "def f(x):\n    return x * 2\n", "check.py",
                      "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(5) == 10\n",
                      isolation=isolation)
    reference = grader.grade(GradeRequest(task, Phase.REFERENCE))
    assert reference.passed and reference.isolation == isolation
    always = ("class Yes:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n\n"
              "def f(x):\n    return Yes()\n")
    assert not grade(grader, task, always, "solution.py").passed
    sneaky_str = ("class S(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n"
                  "def f(x):\n    return S(0)\n")
    assert not grade(grader, task, sneaky_str, "solution.py").passed


def test_table_rows_compare_by_value(tmp_path: Path, grader: Grader) -> None:
    rows = [{"args": [[3, 1, 2]], "expected": [1, 2, 3]}, {"args": [[]], "expected": []}]
    task = calls_task(tmp_path, "def f(xs):\n    return sorted(xs)\n", "table.json", json.dumps(rows), style="table")
    assert grader.grade(GradeRequest(task, Phase.REFERENCE)).passed
    result = grade(grader, task, "def f(xs):\n    return xs\n", "solution.py")
    assert outcomes(result) == {"row_1": "failed", "row_2": "passed"}


def test_a_call_that_never_returns_fails_within_its_limit(tmp_path: Path, grader: Grader) -> None:
    task = calls_task(tmp_path, "def f(x):\n    return x\n", "asserts.py",
                      "assert f(1) == 1\nassert f(2) == 2\n", style="asserts", call_seconds=1.0)
    assert grader.grade(GradeRequest(task, Phase.REFERENCE)).passed
    result = grade(grader, task, "def f(x):\n    while x == 2:\n        pass\n    return x\n", "solution.py")
    assert outcomes(result) == {"assert_1": "passed", "assert_2": "failed"}
    assert result.run.wall_seconds < 15


def test_a_candidate_that_exits_does_not_pass(tmp_path: Path, grader: Grader) -> None:
    task = calls_task(tmp_path, "def f(x):\n    return x\n", "check.py",
                      "def check(candidate):\n    assert candidate(1) == 1\n")
    assert not grade(grader, task, "import os\n\ndef f(x):\n    os._exit(0)\n", "solution.py").passed
    assert not grade(grader, task, "import sys\nsys.exit(0)\n", "solution.py").passed


def test_a_table_row_expecting_nan_passes_a_nan_only(tmp_path: Path, grader: Grader) -> None:
    """JSON tables may hold NaN (Python's json writes it); NaN == NaN is false in Python, which
    failed the reference itself. A NaN still never equals a number."""
    rows = [{"args": [0], "expected": float("nan")}, {"args": [1], "expected": [1.0, float("nan")]}]
    task = calls_task(tmp_path, "def f(x):\n    return float('nan') if x == 0 else [1.0, float('nan')]\n",
                      "table.json", json.dumps(rows), style="table")
    assert grader.grade(GradeRequest(task, Phase.REFERENCE)).passed
    result = grade(grader, task, "def f(x):\n    return 0.0 if x == 0 else [float('nan'), 1.0]\n", "solution.py")
    assert outcomes(result) == {"row_1": "failed", "row_2": "failed"}


def test_numeric_comparison_holds_integers_exact(tmp_path: Path, grader: Grader) -> None:
    """The tolerance is for real numbers: an integer answer off by one fails however large it is
    (a relative tolerance of 1e-6 passed 1000001 for 1000000, and as floats integers past 2**53
    that differ compare equal); a float printed for an integer answer is held to the tolerance."""
    task = stdio_task(tmp_path, "print(int(input()) * 1000)\n",
                      {"big": ("1000\n", "1000000\n"), "huge": ("12345678901234567\n", "12345678901234567000\n")},
                      compare="numeric", tolerance=1e-6)
    assert grader.grade(GradeRequest(task, Phase.REFERENCE)).passed
    off_by_one = grade(grader, task, "print(int(input()) * 1000 + 1)\n")
    assert outcomes(off_by_one) == {"big": "failed", "huge": "failed"}
    as_float = grade(grader, task, "x = int(input())\nprint(f'{x * 1000:.1f}' if x < 10**6 else x * 1000)\n")
    assert outcomes(as_float) == {"big": "passed", "huge": "passed"}
