"""The verl tool over verify-cli serve sessions, its methods called as verl's agent loops call them.

verl is not imported here (``pip install verl`` would replace this project's transformers;
test_verl_framework.py drives the tool with the real verl beside the venv, through verl's tool
registry and ``ToolAgentLoop._call_tool``); the calls are those of
``verl/experimental/agent_loop/tool_agent_loop.py`` (``create(create_kwargs=...)``,
``execute(instance_id, args, agent_data=...)``, ``release`` around every call) and of the older
one-instance-per-trajectory loop (create, executes, ``calc_reward``, ``release``), against a real
service on loopback over the real bwrap sandbox.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import SAMPLE_TASKS
from tests.service.conftest import Served, reference_files, start_server
from verify_cli.adapters.grading import RewardInfraError
from verify_cli.adapters.verl_tool import VerifyCliTool, tool_config, tools_kwargs
from verify_cli.grading import Grader, GradeRequest, Phase
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

ROMAN = SAMPLE_TASKS / "coding-roman-numerals"


@dataclass
class AgentData:
    """What verl's ToolAgentLoop passes as ``agent_data`` (the fields the tool reads)."""

    request_id: str


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    s = start_server([SAMPLE_TASKS], "--max-sessions", "4")
    yield s
    s.stop()


def make_tools(url: str, **config: Any) -> dict[str, VerifyCliTool]:
    """The tools as verl builds them from tool_config(): class, config and schema per entry."""
    tools: dict[str, VerifyCliTool] = {}
    for entry in tool_config(url)["tools"]:
        assert entry["class_name"] == "verify_cli.adapters.verl_tool.VerifyCliTool"
        tool = VerifyCliTool({**entry["config"], **config}, entry["tool_schema"])
        tools[tool.name] = tool
    assert set(tools) == {"bash", "read_file", "write_file", "run_tests", "submit"}
    return tools


async def call_tool(tools: dict[str, VerifyCliTool], kwargs: dict[str, Any], name: str, args: dict[str, Any],
                    agent_data: AgentData) -> tuple[str, float | None, dict[str, Any]]:
    """verl's ToolAgentLoop._call_tool: create, execute, release around one call."""
    tool = tools[name]
    instance_id, _ = await tool.create(create_kwargs=kwargs[name]["create_kwargs"])
    try:
        response, reward, metrics = await tool.execute(instance_id, args, agent_data=agent_data)
    finally:
        await tool.release(instance_id)
    return response.text or "", reward, metrics


def test_tool_agent_loop_episode_keeps_one_session_and_submits_the_trusted_score(served: Served) -> None:
    tools = make_tools(served.url)
    kwargs = tools_kwargs("coding/roman-numerals")
    data = AgentData(uuid.uuid4().hex)

    async def episode() -> list[tuple[str, float | None, dict[str, Any]]]:
        steps = [await call_tool(tools, kwargs, "bash", {"command": "echo state > mark.txt; ls"}, data),
                 await call_tool(tools, kwargs, "read_file", {"path": "mark.txt"}, data),
                 await call_tool(tools, kwargs, "read_file", {"path": "absent.py"}, data),
                 await call_tool(tools, kwargs, "write_file",
                                 {"path": "roman.py", "content": reference_files(ROMAN)["roman.py"]}, data),
                 await call_tool(tools, kwargs, "run_tests", {}, data),
                 await call_tool(tools, kwargs, "submit", {}, data),
                 await call_tool(tools, kwargs, "bash", {"command": "ls"}, data)]
        return steps

    ls, mark, absent, wrote, tests, submit, after = asyncio.run(episode())
    assert ls[0].startswith("exit code 0") and "roman.py" in ls[0] and ls[1] is None
    assert mark[0] == "state\n"  # the file the first call's instance made: the same session
    assert absent[2]["status"] == "error" and "absent.py" in absent[0]
    assert wrote[0].startswith("wrote ")
    first = tests[0].splitlines()[0]
    assert first.endswith(" passed, 0 failed") and not first.startswith("0 passed"), tests[0]
    assert submit[1] == 1.0 and submit[2] == {"status": "passed", "score": 1.0}
    assert after[2]["status"] == "ended"
    assert served.metric("verify_serve_sessions_open") == 0


def test_one_instance_per_trajectory_calc_reward_grades_what_is_left(served: Served) -> None:
    task = load_task(ROMAN)
    with Grader(create_sandbox("bwrap")) as grader:
        expected = grader.grade(GradeRequest(task=task, phase=Phase.STARTER)).score
    tools = make_tools(served.url)

    async def trajectory() -> float:
        bash = tools["bash"]
        instance_id, _ = await bash.create(task_id="coding/roman-numerals")
        response, _, _ = await bash.execute(instance_id, {"command": "grep -c NotImplementedError roman.py"})
        assert (response.text or "").startswith("exit code 0")
        score = await bash.calc_reward(instance_id)
        await bash.release(instance_id)
        return score

    assert asyncio.run(trajectory()) == expected
    assert served.metric("verify_serve_sessions_open") == 0


def test_a_bad_config_or_row_is_refused_by_name(served: Served) -> None:
    schema = {"type": "function", "function": {"name": "rm_rf", "parameters": {}}}
    with pytest.raises(Exception, match="rm_rf"):
        VerifyCliTool({"url": served.url}, schema)
    tool = make_tools(served.url)["bash"]
    with pytest.raises(ValueError, match="task_id"):
        asyncio.run(tool.create(create_kwargs={}))


def test_a_dead_service_is_an_infra_error_never_a_score(tmp_path: Any) -> None:
    s = start_server([SAMPLE_TASKS])
    tools = make_tools(s.url, max_retries=1, max_wait=0.2)

    async def trajectory() -> None:
        bash = tools["bash"]
        instance_id, _ = await bash.create(create_kwargs={"task_id": "coding/roman-numerals"})
        await bash.execute(instance_id, {"command": "true"})
        s.stop(signal.SIGKILL)
        response, reward, metrics = await tools["bash"].execute(instance_id, {"command": "true"})
        assert reward is None and metrics["status"] == "infra_error", response
        with pytest.raises(RewardInfraError):
            await bash.calc_reward(instance_id)
        await bash.release(instance_id)

    try:
        asyncio.run(trajectory())
    finally:
        s.stop(signal.SIGKILL)


def test_trajectories_that_never_submit_do_not_hold_connections_open(served: Served) -> None:
    """verl's loop has no end-of-trajectory hook: a trajectory that stops without submit leaves
    its episode behind. Its connections must not stay with it (a client per trajectory kept one
    open each: file descriptors grew with every unsubmitted trajectory)."""
    import os

    from verify_cli.client import VerifyClient

    tools = make_tools(served.url)
    kwargs = tools_kwargs("coding/roman-numerals")
    with VerifyClient(served.url) as admin:
        async def trajectories(n: int) -> list[str]:
            ids = []
            for _ in range(n):
                data = AgentData(request_id=uuid.uuid4().hex)
                await call_tool(tools, kwargs, "bash", {"command": "true"}, data)
                ids.append(VerifyCliTool._episodes[(served.url, data.request_id)].session_id or "")
                admin.close_session(ids[-1])  # the reward function's submit, in verl: frees the slot
            return ids

        async def run() -> tuple[int, int]:
            await trajectories(2)
            before = len(os.listdir("/proc/self/fd"))
            await trajectories(24)
            return before, len(os.listdir("/proc/self/fd"))

        before, after = asyncio.run(run())
    assert after - before <= 4, (before, after)
