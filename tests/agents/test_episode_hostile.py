"""What an agent controls never masks its episode, and run_tests tells it why its code did not
load: on bwrap and docker, a scripted policy behind a loopback server acts in real sessions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.agents.conftest import PolicyServer, scripted
from tests.conftest import SAMPLE_TASKS
from verify_cli.agents.episode import EpisodeLimits, run_episode
from verify_cli.agents.protocol import agent_model
from verify_cli.grading.grader import Grader
from verify_cli.models.registry import create_model_backend
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task


@pytest.fixture(scope="module", params=[pytest.param("bwrap", marks=pytest.mark.bwrap),
                                        pytest.param("docker", marks=pytest.mark.docker)])
def grading(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Grader]]:
    with create_sandbox(request.param) as box, Grader(box) as grader:
        yield box, grader


def _model(server: PolicyServer, name: str, steps: Any) -> Any:
    server.policies[name] = scripted(steps)
    return agent_model(create_model_backend("openai", model=name, base_url=server.base_url, max_retries=0))


def test_a_file_name_that_is_not_utf8_never_masks_the_episode(policy_server: PolicyServer,
                                                             grading: tuple[Any, Grader]) -> None:
    # Made run_tests and the final grade infra_error (UnicodeEncodeError) on docker.
    box, grader = grading
    task = load_task(SAMPLE_TASKS / "repo-inventory-package")
    solution = [("write_file", {"path": rel, "content": p.read_text()}) for rel, p in task.solution_files().items()]
    steps = [[("bash", {"command": "touch \"inventory/$(printf 'caf\\351').py\""}), *solution], [("run_tests", {})]]
    episode = run_episode(task, _model(policy_server, f"latin1-{box.name}", steps), box, grader)
    assert episode.status == "passed" and episode.score == 1.0, episode.to_dict()
    tests_seen = episode.turns[1].observations[0]["text"]
    assert "left out (not graded): 'inventory/caf\\udce9.py' (its name is not valid UTF-8)" in tests_seen, tests_seen
    assert episode.outcome is not None and "not valid UTF-8" in episode.outcome.reason


def test_run_tests_shows_why_the_candidate_did_not_load(policy_server: PolicyServer,
                                                        grading: tuple[Any, Grader]) -> None:
    box, grader = grading
    task = load_task(SAMPLE_TASKS / "coding-roman-numerals")
    broken = "import os\nTABLE = missing_table()\n\n\ndef to_roman(n):\n    return 'I'\n"
    steps = [[("write_file", {"path": "roman.py", "content": broken})], [("run_tests", {})]]
    episode = run_episode(task, _model(policy_server, f"broken-{box.name}", steps), box, grader)
    seen = episode.turns[1].observations[0]["text"]
    assert "why the tests could not load your code:" in seen, seen
    assert 'File "roman.py", line 2' in seen and "TABLE = missing_table()" in seen, seen
    assert "NameError: name 'missing_table' is not defined" in seen, seen
    assert "hidden" not in seen  # run_tests grades the visible tests alone


def test_thousands_of_editable_files_are_a_graded_failure(policy_server: PolicyServer,
                                                          grading: tuple[Any, Grader]) -> None:
    # 3,100 files under inventory/ made the docker grade infra_error (one bubblewrap mount each,
    # past its 9,000 arguments): how many files an agent writes must not mask its episode.
    box, grader = grading
    task = load_task(SAMPLE_TASKS / "repo-inventory-package")
    solution = [("write_file", {"path": rel, "content": p.read_text()}) for rel, p in task.solution_files().items()]
    flood = "for i in $(seq 3100); do echo 'X = 1' > inventory/m$i.py; done"
    steps = [[*solution, ("bash", {"command": flood})], [("run_tests", {})]]
    episode = run_episode(task, _model(policy_server, f"flood-{box.name}", steps), box, grader)
    assert episode.status == "failed" and episode.score == 0.0, episode.to_dict()
    assert episode.outcome is not None and "more than" in episode.outcome.reason, episode.outcome.reason
    assert "nothing was graded" in episode.turns[1].observations[0]["text"]


def test_a_javascript_task_gets_a_session_and_its_reference_earns_one(policy_server: PolicyServer,
                                                                     grading: tuple[Any, Grader]) -> None:
    # verify-cli/node:20 holds no Python: every docker episode of a JavaScript task was infra_error.
    box, grader = grading
    task = load_task(SAMPLE_TASKS / "coding-word-wrap-js")
    steps = [[("bash", {"command": "node --version && ls"})],
             [("write_file", {"path": rel, "content": p.read_text()}) for rel, p in task.solution_files().items()],
             [("run_tests", {})]]
    episode = run_episode(task, _model(policy_server, f"js-{box.name}", steps), box, grader)
    assert episode.status == "passed" and episode.score == 1.0, episode.to_dict()
    assert episode.turns[0].observations[0]["text"].startswith("exit code 0\n--- stdout ---\nv")


def test_a_command_too_long_to_carry_is_refused_and_the_session_lives(policy_server: PolicyServer,
                                                                     grading: tuple[Any, Grader]) -> None:
    # 1.5 MB of command line killed the session (the exec request was too long to send).
    box, grader = grading
    task = load_task(SAMPLE_TASKS / "coding-roman-numerals")
    steps = [[("bash", {"command": ": " + "x" * 1_500_000}), ("read_file", {"path": "p" * 1_000_000}),
              ("bash", {"command": "echo alive"})]]
    episode = run_episode(task, _model(policy_server, f"long-{box.name}", steps), box, grader,
                          limits=EpisodeLimits(token_budget=1_000_000))  # a budget that allows it
    first, path, second = (o["text"] for o in episode.turns[0].observations)
    assert first.startswith("not run: the command is 1500002 bytes"), first
    assert path.startswith("read_file: the path is longer than 4096 bytes"), path
    assert second == "exit code 0\n--- stdout ---\nalive\n", second
    assert episode.end_reason == "submit" and episode.status == "failed"
