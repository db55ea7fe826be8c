"""Agent episodes end to end: a scripted policy behind a loopback OpenAI-compatible server acts
in real sessions (bwrap), and the trusted grader decides the reward."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import PolicyServer, scripted
from tests.conftest import SAMPLE_TASKS
from verify_cli.agents.episode import EpisodeJob, EpisodeLimits, run_episode, run_episodes
from verify_cli.agents.protocol import agent_model
from verify_cli.grading.grader import Grader, GradeRequest
from verify_cli.grading.workspace import Phase
from verify_cli.models.registry import create_model_backend
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

pytestmark = pytest.mark.bwrap

TASKS = sorted(p.parent.name for p in SAMPLE_TASKS.glob("*/task.toml"))


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with create_sandbox("bwrap") as box:
        yield box


@pytest.fixture(scope="module")
def grader(sandbox: Sandbox) -> Iterator[Grader]:
    with Grader(sandbox, warm=True) as g:
        yield g


def _model(server: PolicyServer, name: str, policy: Any) -> Any:
    server.policies[name] = policy
    return agent_model(create_model_backend("openai", model=name, base_url=server.base_url, max_retries=0))


def _solve(task: Task) -> list[list[tuple[str, Any]]]:
    """Look around, read an editable file, write the reference's files, run the tests, submit."""
    files = task.solution_files()
    first = sorted(task.starter_files()) or sorted(files)
    return [[("bash", {"command": "ls -R"})], [("read_file", {"path": first[0]})],
            [("write_file", {"path": rel, "content": p.read_text()}) for rel, p in sorted(files.items())],
            [("run_tests", {})], [("submit", {})]]


@pytest.mark.parametrize("name", TASKS)
def test_a_policy_that_writes_the_reference_earns_1(name: str, policy_server: PolicyServer, sandbox: Sandbox,
                                                     grader: Grader) -> None:
    task = load_task(SAMPLE_TASKS / name)
    episode = run_episode(task, _model(policy_server, f"solve-{name}", scripted(_solve(task))), sandbox, grader)
    assert episode.end_reason == "submit", episode.to_dict()
    assert episode.status == "passed" and episode.score == 1.0, episode.to_dict()
    assert [t.tool_calls[0]["name"] for t in episode.turns] == ["bash", "read_file", "write_file", "run_tests",
                                                                 "submit"]
    tests_seen = episode.turns[3].observations[0]["text"]
    if task.visible_test_files():  # every visible test ran and passed on the reference
        first = tests_seen.splitlines()[0]
        assert first.endswith(" passed, 0 failed") and int(first.split()[0]) > 0, tests_seen
    else:
        assert "no visible tests" in tests_seen


def test_submitting_the_starter_earns_what_the_starter_earns(policy_server: PolicyServer, sandbox: Sandbox,
                                                             grader: Grader) -> None:
    task = load_task(SAMPLE_TASKS / TASKS[0])
    starter = grader.grade(GradeRequest(task=task, phase=Phase.STARTER))
    episode = run_episode(task, _model(policy_server, "starter", scripted([[("run_tests", {})]])), sandbox, grader)
    assert episode.status == ("passed" if starter.passed else "failed")
    assert episode.score == starter.score


def test_editing_the_visible_tests_or_other_files_gains_nothing(policy_server: PolicyServer, sandbox: Sandbox,
                                                               grader: Grader) -> None:
    task = load_task(SAMPLE_TASKS / TASKS[0])
    starter = grader.grade(GradeRequest(task=task, phase=Phase.STARTER))
    test_files = sorted(p.relative_to(task.root).as_posix() for p in (task.root / "tests").rglob("*.py"))
    cheat = [("write_file", {"path": rel, "content": "def test_ok():\n    assert True\n"}) for rel in test_files]
    cheat += [("write_file", {"path": "conftest.py", "content": "import pytest\n"}),
              ("bash", {"command": "rm -rf tests; mkdir -p hidden_tests; echo 'def test_x(): pass' > "
                                   "hidden_tests/test_x.py"})]
    episode = run_episode(task, _model(policy_server, "cheat", scripted([cheat])), sandbox, grader)
    assert episode.score == starter.score and episode.status != "passed"


def test_hidden_tests_and_the_reference_are_never_in_the_session(policy_server: PolicyServer, sandbox: Sandbox,
                                                                 grader: Grader) -> None:
    task = load_task(SAMPLE_TASKS / TASKS[0])
    hidden = [p.read_text() for p in (task.root / "hidden_tests").rglob("*") if p.is_file()]
    reference = [p.read_text() for p in task.solution_files().values()]
    look = [[("bash", {"command": "ls -laR . /tmp 2>&1; find / -name 'hidden_tests' -o -name 'solution' "
                                  "-o -name 'verify_harness*' 2>/dev/null | head -50; env"})]]
    episode = run_episode(task, _model(policy_server, "look", scripted(look)), sandbox, grader)
    seen = episode.turns[0].observations[0]["text"]
    assert "exit code" in seen
    for text in hidden + reference:
        body = text.strip().splitlines()
        assert all(line.strip() not in seen for line in body if len(line.strip()) > 25), seen
    assert "VERIFY_SEAL" not in seen and "hidden_tests/" not in seen


@pytest.mark.parametrize("kill", ["kill -9 -1", "kill -9 $PPID; sleep 1", ":(){ :|:& };:"])
def test_an_agent_that_kills_its_session_gets_a_graded_failure(kill: str, policy_server: PolicyServer,
                                                               sandbox: Sandbox, grader: Grader) -> None:
    task = load_task(SAMPLE_TASKS / TASKS[0])
    plan = [[("write_file", {"path": rel, "content": p.read_text()}) for rel, p in task.solution_files().items()],
            [("bash", {"command": kill})], [("bash", {"command": "echo still here"})]]
    episode = run_episode(task, _model(policy_server, f"kill-{kill}", scripted(plan)), sandbox, grader,
                          limits=EpisodeLimits(max_turns=4, command_seconds=5))
    assert episode.status != "infra_error", episode.to_dict()
    if episode.end_reason == "session_dead":
        assert episode.status == "failed" and episode.score == 0.0
    else:  # the session survived what it ran (a fork bomb stopped by the process limit)
        assert episode.status == "passed"


def test_malformed_calls_and_replies_without_calls_cost_a_turn(policy_server: PolicyServer, sandbox: Sandbox,
                                                               grader: Grader) -> None:
    task = load_task(SAMPLE_TASKS / TASKS[0])
    plan: Sequence[Any] = ["I think I am done.", [("bash", "{not json")], [("delete_everything", {})],
                           [("write_file", {"path": "x"})]]
    episode = run_episode(task, _model(policy_server, "sloppy", scripted(plan)), sandbox, grader,
                          limits=EpisodeLimits(max_turns=4))
    assert episode.end_reason == "max_turns"
    texts = [t.observations[0]["text"] for t in episode.turns]
    assert "made no tool call" in texts[0]
    assert "not a JSON object" in texts[1]
    assert "unknown tool 'delete_everything'" in texts[2]
    assert "'content' is a required property" in texts[3]
    assert all(t.observations[0]["error"] for t in episode.turns)
    assert episode.status == "failed"


def test_many_episodes_in_flight_each_in_its_own_session(policy_server: PolicyServer, sandbox: Sandbox,
                                                         grader: Grader, tmp_path: Path) -> None:
    task = load_task(SAMPLE_TASKS / TASKS[0])
    # each episode writes a marker and then looks for the others' markers: none may be seen
    plan = [[("bash", {"command": "echo mine > marker_$RANDOM; sleep 0.3; ls marker_* | wc -l"})],
            [("run_tests", {})]]
    jobs = [EpisodeJob(task, i) for i in range(4)]
    model = _model(policy_server, "parallel", scripted(plan))
    episodes = list(run_episodes(jobs, lambda job: model, sandbox, grader, concurrency=4,
                                 limits=EpisodeLimits(max_turns=3)))
    assert sorted(e.sample_index for e in episodes) == [0, 1, 2, 3]
    for e in episodes:
        assert e.turns[0].observations[0]["text"].splitlines()[-1].strip() == "1"


def test_a_session_that_dies_under_the_agent_is_a_graded_failure_not_infra(sandbox: Sandbox,
                                                                          grader: Grader) -> None:
    """The agent cannot reach its exec server (pid 1 of the session's namespaces); should it die
    anyway (here: killed from the host, as if by what ran in it), the episode is graded 0."""
    import os
    import signal

    from verify_cli.agents.environment import TaskEnvironment
    from verify_cli.agents.tools import tool_call

    task = load_task(SAMPLE_TASKS / TASKS[0])
    env = TaskEnvironment.open(task, sandbox, grader)
    try:
        for rel, p in task.solution_files().items():
            assert not env.call(tool_call("write_file", {"path": rel, "content": p.read_text()})).error
        os.kill(env.session._server_pid, signal.SIGKILL)  # type: ignore[attr-defined]
        obs = env.call(tool_call("bash", {"command": "echo hi"}))
        assert "session has died" in obs.text and env.dead is not None and env.broken is None
        outcome = env.outcome()
    finally:
        env.close()
    assert (outcome.status, outcome.score) == ("failed", 0.0)
    assert "session died" in outcome.reason
