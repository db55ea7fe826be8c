"""Episodes over an executor (it opens the sessions and grades), and the re-queue of an episode
whose session the machinery lost. The Ray form is in tests/executors/test_ray_executor.py."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from tests.agents.conftest import PolicyServer, scripted
from tests.conftest import SAMPLE_TASKS
from verify_cli.agents.episode import EpisodeJob, run_episode, run_episodes
from verify_cli.agents.protocol import agent_model
from verify_cli.errors import UsageError
from verify_cli.executors.local import LocalExecutor
from verify_cli.models.registry import create_model_backend
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.sandbox.sessions.base import Session, SessionInfraError, SessionLimits, Workspace
from verify_cli.tasks.loader import load_task

pytestmark = pytest.mark.bwrap

TASK = SAMPLE_TASKS / "coding-roman-numerals"


@pytest.fixture(scope="module")
def executor() -> Iterator[LocalExecutor]:
    with create_sandbox("bwrap") as box, LocalExecutor(sandbox=box) as ex:
        yield ex


def _solver(server: PolicyServer, name: str) -> Any:
    task = load_task(TASK)
    server.policies[name] = scripted(
        [[("bash", {"command": "echo noted > note"})],
         [("write_file", {"path": rel, "content": p.read_text()}) for rel, p in sorted(task.solution_files().items())],
         [("bash", {"command": "cat note"})], [("submit", {})]])
    return agent_model(create_model_backend("openai", model=name, base_url=server.base_url, max_retries=0))


def test_an_episode_over_an_executor_alone_earns_1(executor: LocalExecutor, policy_server: PolicyServer) -> None:
    session = executor.open_session({"a.txt": b"x"}, SessionLimits(command_seconds=20))
    try:
        assert session.backend == "bwrap" and session.node == ""
        assert session.exec("cat a.txt").stdout.text == "x"
    finally:
        session.close()
    episode = run_episode(load_task(TASK), _solver(policy_server, "over-executor"), executor)
    assert (episode.status, episode.score, episode.end_reason) == ("passed", 1.0, "submit")
    assert episode.turns[2].observations[0]["text"].strip().endswith("noted")


def test_an_episode_over_a_sandbox_needs_a_grader(executor: LocalExecutor, policy_server: PolicyServer) -> None:
    with pytest.raises(UsageError, match="needs a grader"):
        run_episode(load_task(TASK), _solver(policy_server, "no-grader"), executor.sandbox)


class _LosesFirstSessions:
    """The executor's sandbox, whose first ``n`` sessions cannot be opened (the machinery fails)."""

    def __init__(self, box: Sandbox, n: int) -> None:
        self.box, self.left, self.opened = box, n, 0

    def open_session(self, workspace: Workspace = None, limits: SessionLimits | None = None, *,
                     env: Mapping[str, str] | None = None, image: str | None = None,
                     labels: Mapping[str, str] | None = None) -> Session:
        self.opened += 1
        if self.left > 0:
            self.left -= 1
            raise SessionInfraError("the host ran out of descriptors")
        return self.box.open_session(workspace, limits, env=env, image=image, labels=labels)


@pytest.mark.parametrize(("lose", "requeue", "status"), [(1, 1, "passed"), (2, 1, "infra_error"),
                                                         (1, 0, "infra_error")])
def test_an_episode_the_sandbox_lost_is_requeued_as_often_as_asked(
        lose: int, requeue: int, status: str, executor: LocalExecutor, policy_server: PolicyServer) -> None:
    opener = _LosesFirstSessions(executor.sandbox, lose)
    episodes = list(run_episodes([EpisodeJob(load_task(TASK), 3)], lambda job: _solver(policy_server, "requeue"),
                                 opener, executor, requeue=requeue))
    assert len(episodes) == 1 and episodes[0].sample_index == 3
    (episode,) = episodes
    assert episode.status == status and opener.opened == 1 + requeue
    assert len(episode.lost) == min(lose, requeue)
    assert all("ran out of descriptors" in reason for reason in episode.lost)
    if status == "passed":
        assert episode.score == 1.0
    else:
        assert episode.score is None and episode.machinery == "sandbox"
