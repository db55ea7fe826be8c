"""An agent's session in a Harbor task's environment: a container of its image at its workdir;
files, commands, the work handed to the grade (the workdir's changes only), the agent timeout."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from verify_cli.environments import Environments
from verify_cli.environments.store import EnvironmentStore
from verify_cli.formats.harbor.session import HarborSession
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.sandbox.sessions.base import ExecVerdict, SessionLimits, SessionState
from verify_cli.tasks import load_task

pytestmark = pytest.mark.docker

FIX_SUM = Path(__file__).resolve().parents[2] / "fixtures" / "harbor" / "sound" / "fix-sum"


def _image(task_dir: Path, store: Path) -> str:
    box = create_sandbox("docker")
    box.start()
    try:
        realised = Environments(box, EnvironmentStore(store)).realise(load_task(task_dir))
    finally:
        box.close()
    assert realised is not None and realised.image
    return realised.image


def test_a_session_works_at_the_tasks_workdir_and_hands_over_only_its_changes(tmp_path: Path) -> None:
    task = load_task(FIX_SUM)
    with HarborSession.open(task, _image(FIX_SUM, tmp_path / "store"), SessionLimits(command_seconds=30)) as s:
        assert s.workdir == "/app"
        ran = s.exec("pwd; cat calc.py")
        assert ran.verdict is ExecVerdict.OK and ran.stdout.text.startswith("/app\n")
        s.write_file("notes/plan.txt", "fix the slice\n")
        assert s.read_file("/app/notes/plan.txt") == b"fix the slice\n"
        s.exec("sed -i 's/numbers\\[:-1\\]/numbers/' calc.py; echo x > /usr/local/bin/not-work")
        assert {e.path for e in s.list_files(".")} >= {"calc.py", "notes", "notes/plan.txt"}
        work = s.snapshot()
        assert set(work) == {"calc.py", "notes/plan.txt"}  # nothing outside the workdir, nothing unchanged
        assert b"return sum(numbers)\n" in work["calc.py"]
    assert s.state is SessionState.CLOSED


def test_the_agent_timeout_bounds_the_episode(tmp_path: Path) -> None:
    folder = tmp_path / "fix-sum"
    shutil.copytree(FIX_SUM, folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\ntimeout_sec = 120.0", "[agent]\ntimeout_sec = 3.0"))
    task = load_task(folder)
    assert task.harbor is not None and task.harbor.agent_timeout_sec == 3.0
    with HarborSession.open(task, _image(folder, tmp_path / "store"), SessionLimits(command_seconds=30)) as s:
        started = time.monotonic()
        assert s.exec("sleep 20").verdict is ExecVerdict.TIMEOUT
        assert time.monotonic() - started < 10
        refused = s.exec("true")
        assert refused.verdict is ExecVerdict.TIMEOUT and "agent timeout" in refused.message
