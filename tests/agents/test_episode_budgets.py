"""An episode's budgets hold where time and tokens are spent: the wall limit bounds the model's
requests and every tool call of a reply, a reply runs a bounded number of calls, the token budget
counts everything the model wrote (tool-call arguments, the server's ``usage``), and the end
reason names the limit that ended the episode. A scripted policy behind a loopback
OpenAI-compatible server acts in real bwrap sessions."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pytest

from tests.agents.conftest import PolicyServer, scripted
from tests.conftest import SAMPLE_TASKS
from verify_cli.agents.episode import MAX_TOOL_CALLS_PER_REPLY, EpisodeLimits, run_episode
from verify_cli.agents.protocol import agent_model
from verify_cli.errors import UsageError
from verify_cli.grading.grader import Grader
from verify_cli.models.registry import create_model_backend
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

pytestmark = pytest.mark.bwrap


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with create_sandbox("bwrap") as box:
        yield box


@pytest.fixture(scope="module")
def grader(sandbox: Sandbox) -> Iterator[Grader]:
    with Grader(sandbox, warm=True) as g:
        yield g


@pytest.fixture(scope="module")
def task() -> Task:
    return load_task(SAMPLE_TASKS / "coding-roman-numerals")


def _model(server: PolicyServer, name: str, policy: Any) -> Any:
    server.policies[name] = policy
    return agent_model(create_model_backend("openai", model=name, base_url=server.base_url, max_retries=0))


def test_the_wall_limit_bounds_every_call_of_one_reply(policy_server: PolicyServer, sandbox: Sandbox,
                                                       grader: Grader, task: Task) -> None:
    # Six 4-second commands in one reply under a 7 s limit: ran six times as long before.
    model = _model(policy_server, "six-sleeps", scripted([[("bash", {"command": "sleep 4"})] * 6]))
    started = time.monotonic()
    episode = run_episode(task, model, sandbox, grader, limits=EpisodeLimits(wall_seconds=7))
    elapsed = time.monotonic() - started  # its grade included
    assert episode.end_reason == "wall", episode.to_dict()
    assert elapsed < 7 + 8, episode.to_dict()
    texts = [o["text"] for o in episode.turns[0].observations]
    assert len(texts) == 6 and texts[0].startswith("exit code 0"), texts
    assert texts[1].startswith("timed out"), texts
    assert all("wall-clock limit" in t for t in texts[2:]), texts
    assert episode.status != "infra_error"  # the files are graded as the limit left them


def test_a_model_request_that_hangs_ends_at_the_wall_limit(policy_server: PolicyServer, sandbox: Sandbox,
                                                           grader: Grader, task: Task) -> None:
    def hangs(messages: Sequence[dict[str, Any]]) -> list[tuple[str, Any]]:
        time.sleep(12)
        return [("submit", {})]

    started = time.monotonic()
    episode = run_episode(task, _model(policy_server, "hangs", hangs), sandbox, grader,
                          limits=EpisodeLimits(wall_seconds=3))
    assert episode.end_reason == "wall", episode.to_dict()
    assert time.monotonic() - started < 3 + 8  # its grade included; not the 12 s the server took
    assert episode.status == "failed"  # graded (the starter), never masked


def test_a_reply_runs_at_most_max_tool_calls(policy_server: PolicyServer, sandbox: Sandbox, grader: Grader,
                                             task: Task) -> None:
    calls = [("bash", {"command": f"echo {i} >> ran.txt"}) for i in range(20)]
    model = _model(policy_server, "many-calls", scripted([calls, [("bash", {"command": "cat ran.txt"})]]))
    episode = run_episode(task, model, sandbox, grader, limits=EpisodeLimits(max_tool_calls=3))
    first = episode.turns[0].observations
    assert len(first) == 20  # every call is answered
    assert [o["text"] for o in first[3:]] == ["not run: a reply may make at most 3 tool calls"] * 17
    assert episode.turns[1].observations[0]["text"].split("--- stdout ---\n")[1].split() == ["0", "1", "2"]
    tool_ids = [m["tool_call_id"] for m in episode.messages if m["role"] == "tool"]
    assert len(tool_ids) == len(set(tool_ids)) == 22  # the 20, the cat, the submit
    assert EpisodeLimits().max_tool_calls == MAX_TOOL_CALLS_PER_REPLY


def test_the_token_budget_counts_tool_call_arguments(policy_server: PolicyServer, sandbox: Sandbox,
                                                     grader: Grader, task: Task) -> None:
    # 600 kB through write_file arguments counted 4 tokens under a budget of 50.
    big = [[("write_file", {"path": f"big{i}.txt", "content": "x" * 200_000})] for i in range(3)]
    model = _model(policy_server, "big-writes", scripted([*big, [("bash", {"command": "ls"})]]))
    episode = run_episode(task, model, sandbox, grader, limits=EpisodeLimits(token_budget=50))
    assert episode.end_reason == "token_budget", episode.to_dict()
    assert len(episode.turns) == 1 and episode.tokens >= 50_000
    assert episode.turns[0].observations[0]["text"] == "not run: the episode's token budget was spent"


def test_the_token_budget_takes_the_servers_usage(policy_server: PolicyServer, sandbox: Sandbox,
                                                  grader: Grader, task: Task) -> None:
    policy_server.usage["usage-heavy"] = 400  # short text, many tokens (a long hidden reasoning)
    model = _model(policy_server, "usage-heavy", scripted([[("bash", {"command": "true"})]] * 5))
    episode = run_episode(task, model, sandbox, grader, limits=EpisodeLimits(token_budget=1000))
    assert episode.end_reason == "token_budget", episode.to_dict()
    assert episode.tokens == 1200 and len(episode.turns) == 3


def test_what_a_model_writes_is_always_storable(policy_server: PolicyServer, sandbox: Sandbox, grader: Grader,
                                                task: Task) -> None:
    # Lone surrogates (JSON "\\ud800") in a reply's text, a path and a file's content.
    raw = '{"path": "caf\\udce9.txt", "content": "a\\ud800b"}'
    steps: list[Any] = [[("write_file", raw), ("read_file", '{"path": "caf\\udce9.txt"}'),
                         ("read_file", '{"path": "gone\\ud800"}')]]
    episode = run_episode(task, _model(policy_server, "surrogates", scripted(steps)), sandbox, grader)
    assert episode.status == "failed" and episode.end_reason == "submit", episode.to_dict()
    observations = [o["text"] for o in episode.turns[0].observations]
    assert observations[0].startswith("wrote "), observations
    document = json.dumps(episode.to_dict(), ensure_ascii=False)
    document.encode("utf-8")  # raised UnicodeEncodeError before
    pa.array([json.dumps(m, ensure_ascii=False) for m in episode.messages])


@pytest.mark.parametrize(("field", "value"), [("max_tool_calls", 0), ("token_budget", 0), ("wall_seconds", 0.0)])
def test_bad_episode_limits_say_which(field: str, value: float) -> None:
    with pytest.raises(UsageError, match=field):
        EpisodeLimits(**{field: value})
