"""verify-cli tasks as an OpenEnv environment, driven by OpenEnv's own client over a real server."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openenv", reason="the openenv extra is not installed: pip install 'verify-cli[openenv]'")

from tests.conftest import SAMPLE_TASKS
from verify_cli.grading import Grader, GradeRequest, Phase
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

ROMAN = SAMPLE_TASKS / "coding-roman-numerals"


@pytest.fixture(scope="module")
def env_url() -> Iterator[str]:
    import uvicorn

    from verify_cli.adapters.openenv import create_openenv_app

    app = create_openenv_app(tasks=[ROMAN, SAMPLE_TASKS / "coding-interval-merge"], sandbox="bwrap")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


def test_an_episode_writes_the_reference_runs_the_visible_tests_and_earns_one(env_url: str) -> None:
    from verify_cli.adapters.openenv import TaskAction, VerifyCliEnvClient

    source = (ROMAN / "solution" / "roman.py").read_text()
    with VerifyCliEnvClient(base_url=env_url).sync() as env:
        first = env.reset(task_id="coding/roman-numerals").observation
        assert first.task_id == "coding/roman-numerals" and "roman.py" in first.files
        assert "Answer format" in first.prompt
        assert env.step(TaskAction(tool="read_file", path="roman.py")).observation.output == \
            (ROMAN / "starter" / "roman.py").read_text()
        refused = env.step(TaskAction(tool="write_file", path="tests/test_roman.py", content="")).observation
        assert refused.error == "not editable"
        env.step(TaskAction(tool="write_file", path="roman.py", content=source))
        ran = env.step(TaskAction(tool="run_tests"))
        assert ran.reward is None and not ran.done
        assert ran.observation.tests and all(t["id"].startswith("tests.") for t in ran.observation.tests)
        assert all(t["outcome"] == "passed" for t in ran.observation.tests)
        done = env.step(TaskAction(tool="submit"))
        assert (done.reward, done.done, done.observation.status) == (1.0, True, "graded")


def test_submitting_the_starter_earns_its_trusted_grade(env_url: str, tmp_path: Path) -> None:
    from verify_cli.adapters.openenv import TaskAction, VerifyCliEnvClient

    task = load_task(ROMAN)
    with Grader(create_sandbox("bwrap")) as grader:
        expected = grader.grade(GradeRequest(task=task, phase=Phase.STARTER)).score
    with VerifyCliEnvClient(base_url=env_url).sync() as env:
        env.reset(task_id=task.id)
        result = env.step(TaskAction(tool="submit"))
    assert result.done and result.reward == expected
