"""Two-process grading on the docker backend (node mode), through one pooled docker sandbox.

The reward-hack conformance suites (the Python and node candidates and the task lists of
``test_hack_suite`` and ``test_hacks_js``, imported, not repeated) earn 0: every node hack on
every node sample task, every Python hack cold on one of the Python tasks ``test_hack_suite``
grades cold (``COLD_TASKS``: a module task, one with hidden tests, a CLI task; in turn) and
warm on each of them and a repository task; each side
of a run sees only its own; honest candidates (reference, starter, mutants) get the verdicts
the bwrap backend gives them, CLI tasks (``VERIFY_CANDIDATE_EXEC``) and node tasks included.
Single-use mode stays in-process and says why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_hack_suite as python_hacks
import test_hacks_js as node_hacks
import test_two_process_parity as parity
from test_hack_suite import COLD_TASKS, HACKS, assert_earns_nothing, grade_hacks, grade_pairs, python_sample_tasks

from verify_cli.grading.grader import Grader, GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.docker.sandbox import DockerSandbox
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
JS_TASKS = sorted(node_hacks.TASKS)


@pytest.fixture(scope="module")
def docker() -> Iterator[Sandbox]:
    with create_sandbox("docker") as box:
        yield box


def cold_pairs() -> list[tuple[str, Task]]:
    """Every Python hack on one of ``COLD_TASKS``, the tasks in turn (each gets five). The whole
    hack x task matrix is graded cold on bwrap (``test_hack_suite``) and warm on docker (below);
    what docker cold adds is its own launch of the trusted side, which every hack meets here."""
    tasks = [t for t in python_sample_tasks() if t.id in COLD_TASKS]
    return [(hack, tasks[i % len(tasks)]) for i, hack in enumerate(HACKS)]


@pytest.fixture(scope="module")
def python_cold(docker: Sandbox) -> dict[tuple[str, str], GradeResult]:
    with Grader(docker) as grader:
        return grade_pairs(grader, cold_pairs())


def test_docker_cold_grades_every_hack_and_every_cold_task() -> None:
    pairs = cold_pairs()
    assert sorted(h for h, _ in pairs) == sorted(HACKS)
    assert {t.id for _, t in pairs} == set(COLD_TASKS)


@pytest.fixture(scope="module")
def node_cold(docker: Sandbox) -> dict[tuple[str, str], GradeResult]:
    requests = []
    for name in JS_TASKS:
        task = parity.roomy(load_task(ROOT / "sample_tasks" / name))  # node starts slowly under load
        for hack in node_hacks.ALL_HACKS:
            files = {node_hacks.TASKS[name]: (node_hacks.HACKS / f"{hack}.js").read_bytes()}
            requests.append(GradeRequest(task, Phase.CANDIDATE, candidate=files, label=f"{hack}|{name}"))
    with Grader(docker) as grader:
        return {tuple(r.label.split("|", 1)): r for r in grader.grade_many(requests, jobs=2)}  # type: ignore[misc]


def test_node_mode_declares_two_process(docker: Sandbox) -> None:
    assert docker.two_process and docker.two_process_gaps == ()


@pytest.mark.parametrize("hack", HACKS)
def test_python_hack_earns_nothing_on_docker(python_cold: dict[tuple[str, str], GradeResult], hack: str) -> None:
    assert len(python_cold) == len(HACKS)
    assert_earns_nothing(python_cold, hack)


@pytest.mark.parametrize("hack", node_hacks.ALL_HACKS)
def test_node_hack_earns_nothing_on_docker(node_cold: dict[tuple[str, str], GradeResult], hack: str) -> None:
    for name in JS_TASKS:
        result = node_cold[(hack, name)]
        assert result.isolation == "two-process"
        assert result.status is GradeStatus.GRADED, (name, result.problems)
        assert result.score == 0.0 and not result.passed, (name, result.to_dict(with_run=False))


#: The Python sample tasks the warm docker matrix grades: one of each shape the layout treats
#: differently (a module task, hidden tests, a CLI task: ``COLD_TASKS``; a repository task, whose
#: editable globs cover a package). What varies between docker and bwrap is the container's
#: layout, which every task of one shape meets the same way; bwrap's warm matrix
#: (``test_hack_suite``) grades every hack on every Python sample task.
WARM_DOCKER_TASKS = (*COLD_TASKS, "repository/orders-etl")


def test_hacks_earn_nothing_warm_on_docker(docker: Sandbox) -> None:
    """``Grader(warm=True)``: node mode runs two-process runs from warm nodes (pytest forked
    warm, the candidate in its nested sandbox); every hack earns 0 on a task of each shape there
    too (``WARM_DOCKER_TASKS``), and the runs did go warm."""
    tasks = [t for t in python_sample_tasks() if t.id in WARM_DOCKER_TASKS]
    assert len(tasks) == len(WARM_DOCKER_TASKS)
    with Grader(docker, warm=True) as grader:
        results = grade_hacks(grader, tasks, HACKS)
        stats = grader.warm_stats
    # Each task also had one reference run collect its declared tests (Grader.expected_tests).
    assert stats is not None and stats.warm_runs == len(results) + len(tasks) and stats.fallbacks == 0, stats
    for hack in HACKS:
        assert_earns_nothing(results, hack)


def test_each_side_sees_only_its_own_on_docker(docker: Sandbox, tmp_path: Path) -> None:
    """The bwrap suite's view probe (tests, hidden tests, results, harness, /proc, the seal key and
    new user namespaces absent from the candidate; files it writes reach the tests; the tests
    see its code empty), graded in a docker node."""
    python_hacks.test_each_side_sees_only_its_own(docker, tmp_path)


# -- parity with bwrap, honest candidates ----------------------------------------------------------

def honest(task: Task) -> list[GradeRequest]:
    task = parity.roomy(task)
    if task.kind == "pytest":
        return parity.honest_requests(task, mutants=1)
    return [GradeRequest(task, Phase.REFERENCE, label="reference"), GradeRequest(task, Phase.STARTER, label="starter")]


@pytest.fixture(scope="module")
def honest_pairs(docker: Sandbox) -> dict[tuple[str, str], tuple[GradeResult, GradeResult]]:
    tasks = [load_task(p.parent) for p in sorted((ROOT / "sample_tasks").glob("*/task.toml"))]
    requests = [req for task in tasks for req in honest(task)]
    with create_sandbox("bwrap") as bwrap, Grader(bwrap) as on_bwrap, Grader(docker) as on_docker:
        there = {(r.task_id, r.label): r for r in on_bwrap.grade_many(requests, jobs=2)}
        here = {(r.task_id, r.label): r for r in on_docker.grade_many(requests, jobs=2)}
    assert there.keys() == here.keys()
    return {key: (here[key], there[key]) for key in there}


@pytest.mark.bwrap
def test_identical_verdicts_docker_and_bwrap(
        honest_pairs: dict[tuple[str, str], tuple[GradeResult, GradeResult]]) -> None:
    for key, (docker_result, bwrap_result) in sorted(honest_pairs.items()):
        assert docker_result.isolation == bwrap_result.isolation == "two-process", key
        assert parity.verdict(docker_result) == parity.verdict(bwrap_result), (
            key, docker_result.problems, bwrap_result.problems)
    task_ids = {task_id for task_id, _ in honest_pairs}
    assert all(honest_pairs[(t, "reference")][0].passed and not honest_pairs[(t, "starter")][0].passed
               for t in task_ids)


CLI_AND_NODE = ("interface-spec/kv-cli", "data-pipeline/sensor-daily", "coding/word-wrap-js",
                "interface-spec/event-emitter-js")


@pytest.fixture(scope="module")
def cli_and_node_references(docker: Sandbox) -> dict[str, GradeResult]:
    """The references of the CLI and node sample tasks graded on docker (apart from the whole
    docker-against-bwrap matrix, which is in the extended tier)."""
    tasks = [load_task(p.parent) for p in sorted((ROOT / "sample_tasks").glob("*/task.toml"))]
    requests = [GradeRequest(t, Phase.REFERENCE, label="reference") for t in tasks if t.id in CLI_AND_NODE]
    with Grader(docker) as on_docker:
        return {r.task_id: r for r in on_docker.grade_many(requests, jobs=2)}


@pytest.mark.parametrize("task_id", CLI_AND_NODE)
def test_cli_and_node_tasks_pass_two_process_on_docker(
        cli_and_node_references: dict[str, GradeResult], task_id: str) -> None:
    """CLI tasks start the candidate through VERIFY_CANDIDATE_EXEC (in its sandbox); node tasks'
    results are sealed: the references pass, sealed, on docker."""
    result = cli_and_node_references[task_id]
    assert result.isolation == "two-process" and result.passed and result.problems == (), result.problems
    assert result.run.image_digest


def test_single_use_mode_grades_in_process_and_says_why(tmp_path: Path) -> None:
    task = load_task(ROOT / "sample_tasks" / "coding-interval-merge")
    with DockerSandbox(mode="single-use") as box, Grader(box) as grader:
        assert not box.two_process
        result = grader.grade(GradeRequest(task, Phase.REFERENCE))
    assert result.isolation == "in-process" and result.passed
    assert result.isolation_notes == (f"{DockerSandbox.SINGLE_USE_NO_TWO_PROCESS}: the candidate's code "
                                      "runs in the test process",)


def test_the_tests_side_cannot_start_the_candidate_outside_its_sandbox(docker: Sandbox, tmp_path: Path) -> None:
    """Sanity of the layout: in the docker node, the tests see the candidate's code file empty,
    (empty or unreadable), and ``VERIFY_CANDIDATE_EXEC`` runs programs with the candidate's view (no tests folder)."""
    probe = (
        "import os, shlex, subprocess\n\n"
        "def test_layout():\n"
        "    try:\n"
        "        assert open('intervals.py').read() == ''\n"
        "    except OSError:\n"
        "        pass\n"
        "    prefix = shlex.split(os.environ['VERIFY_CANDIDATE_EXEC'])\n"
        "    script = 'ls -a /; echo --; ls -A /opt; echo --; ls -A tests 2>/dev/null; echo --; pwd'\n"
        "    out = subprocess.run(prefix + ['/bin/sh', '-c', script], capture_output=True, text=True)\n"
        "    top, opt, tests, cwd = [part.split() for part in out.stdout.split('--')]\n"
        "    assert not {'results', 'proc', 'sys'} & set(top), top\n"
        "    assert 'verify-harness' not in opt and tests == [] and cwd == ['/workspace'], out.stdout\n"
    )
    root = tmp_path / "layout"
    for folder in ("starter", "solution", "tests"):
        (root / folder).mkdir(parents=True)
    src = ROOT / "sample_tasks" / "coding-interval-merge"
    (root / "task.toml").write_text((src / "task.toml").read_text().replace("coding/interval-merge", "fixture/layout"))
    (root / "prompt.md").write_text("Lay out.\n")
    for folder in ("starter", "solution"):
        (root / folder / "intervals.py").write_text((src / "solution" / "intervals.py").read_text())
    (root / "tests" / "test_layout.py").write_text(probe)
    task = load_task(root)
    with Grader(docker) as grader:
        result = grader.grade(GradeRequest(task, Phase.REFERENCE))
    assert result.isolation == "two-process"
    assert result.passed, (result.problems, result.run.stdout.text[-3000:])


NODE_CLI_TEST = """
const assert = require('node:assert');
const { spawnSync } = require('node:child_process');
const { test } = require('node:test');
const fs = require('node:fs');

test('the candidate runs as a program in its own sandbox', () => {
  const prefix = (process.env.VERIFY_CANDIDATE_EXEC || '').split(' ').filter(Boolean);
  assert.ok(prefix.length, 'two-process grading sets VERIFY_CANDIDATE_EXEC');
  const r = spawnSync(prefix[0], [...prefix.slice(1), 'node', 'shout.js', 'quiet'],
                       { input: 'words', env: { PATH: process.env.PATH } });
  assert.strictEqual(r.status, 3, String(r.stderr));
  assert.strictEqual(String(r.stdout), 'QUIET WORDS|tests:0');
  assert.strictEqual(fs.readFileSync('out.txt', 'utf8'), 'written');
});
"""

NODE_CLI = """
const fs = require('node:fs');
const input = fs.readFileSync(0, 'utf8');
const seen = fs.existsSync('tests') ? fs.readdirSync('tests').length : 0;
fs.writeFileSync('out.txt', 'written');
process.stdout.write(`${process.argv[2]} ${input}`.toUpperCase() + `|tests:${seen}`);
process.exit(3);
"""


def test_a_node_cli_task_starts_the_candidate_without_python(docker: Sandbox, tmp_path: Path) -> None:
    """verify-cli/node:20 has no Python: VERIFY_CANDIDATE_EXEC falls back to the node exec
    client; the program runs in the candidate's sandbox (no tests folder content), gets its
    arguments and stdin, and its output, status and files reach the tests."""
    src = ROOT / "sample_tasks" / "coding-word-wrap-js"
    root = tmp_path / "node-cli"
    for folder in ("starter", "solution", "tests"):
        (root / folder).mkdir(parents=True)
    toml = (src / "task.toml").read_text().replace("coding/word-wrap-js", "fixture/node-cli")
    (root / "task.toml").write_text(toml.replace("wrap.js", "shout.js").replace("wrap.test.js", "shout.test.js"))
    (root / "prompt.md").write_text("Shout.\n")
    (root / "starter" / "shout.js").write_text("process.exit(1);\n")
    (root / "solution" / "shout.js").write_text(NODE_CLI)
    (root / "tests" / "shout.test.js").write_text(NODE_CLI_TEST)
    task = parity.roomy(load_task(root))
    with Grader(docker) as grader:
        result = grader.grade(GradeRequest(task, Phase.REFERENCE))
        starter = grader.grade(GradeRequest(task, Phase.STARTER))
    assert result.isolation == "two-process"
    assert result.passed, (result.problems, [t.message[-1500:] for t in result.tests], result.run.stderr.text[-2000:])
    assert starter.status is GradeStatus.GRADED and not starter.passed


DETACH_CANDIDATE = '''
import os


def detach():
    """Remove the (empty, in this view) test folders and put a file of its own in their place:
    where that works, the kernel detaches the tests' bind mounts on them in the other namespace."""
    done = []
    for name in ("tests", "hidden_tests"):
        try:
            os.rmdir(name)
            os.mkdir(name)
            with open(os.path.join(name, "planted.txt"), "w") as fh:
                fh.write("the candidate's")
            done.append(name)
        except OSError as e:
            done.append(f"{name}: {e.strerror}")
    return done
'''

DETACH_TESTS = '''
import os
from probe import detach


def test_the_candidate_cannot_swap_the_test_folders():
    before = sorted(os.listdir("tests")), sorted(os.listdir("hidden_tests"))
    print(detach())
    assert (sorted(os.listdir("tests")), sorted(os.listdir("hidden_tests"))) == before
'''


@pytest.mark.parametrize("backend", ["docker", pytest.param("bwrap", marks=pytest.mark.bwrap),
                                     pytest.param("bwrap-warm", marks=pytest.mark.bwrap)])
def test_the_candidate_cannot_replace_the_test_folders(docker: Sandbox, backend: str, tmp_path: Path) -> None:
    """The test folders are mount points in the candidate's view too (an empty read-only tmpfs),
    so it cannot remove them and plant its own tests where the tests' side looks."""
    src = ROOT / "sample_tasks" / "coding-interval-merge"
    root = tmp_path / "detach"
    for folder in ("starter", "solution", "tests", "hidden_tests"):
        (root / folder).mkdir(parents=True)
    toml = (src / "task.toml").read_text().replace('editable = ["intervals.py"]', 'editable = ["probe.py"]')
    (root / "task.toml").write_text(toml.replace("coding/interval-merge", "fixture/detach")
                                    .replace(" tests'", " tests hidden_tests'"))
    (root / "prompt.md").write_text("Try to swap the tests.\n")
    (root / "starter" / "probe.py").write_text("def detach():\n    return []\n")
    (root / "solution" / "probe.py").write_text(DETACH_CANDIDATE)
    (root / "tests" / "test_detach.py").write_text(DETACH_TESTS)
    (root / "hidden_tests" / "test_hidden.py").write_text("def test_hidden_exists():\n    assert True\n")
    with contextlib.ExitStack() as stack:
        box = docker if backend == "docker" else stack.enter_context(create_sandbox("bwrap"))
        with Grader(box, warm=backend.endswith("warm")) as grader:
            result = grader.grade(GradeRequest(load_task(root), Phase.REFERENCE))
    assert result.isolation == "two-process"
    assert result.passed, [(t.id, t.message[-500:]) for t in result.tests]
