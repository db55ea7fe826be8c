"""A run whose caller has gone is stopped on every backend (``RunSpec.cancel``): its processes
are killed at once, the backend frees what it held, and the verdict is ``infra_error`` (never
the code's fault)."""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import BACKEND_PARAMS, PYTHON_IMAGE, SandboxFor
from verify_cli.sandbox.base import CANCELLED_MESSAGE, Cancellation, Limits, RunSpec, Verdict
from verify_cli.sandbox.kit.conformance import processes_with_token


def _spawner(token: str) -> str:
    """A program that leaves a child behind (with ``token`` in its argv), then sleeps."""
    return ("import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{token}'],\n"
            "                 start_new_session=True)\n"
            "print('started', flush=True)\n"
            "time.sleep(600)\n")


def _gone(token: str, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while processes_with_token(token):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_a_cancelled_run_is_killed_at_once_and_leaves_nothing(backend: str, sandbox_for: SandboxFor,
                                                              tmp_path: Path) -> None:
    box = sandbox_for(backend)
    token = f"vc-cancel-{secrets.token_hex(8)}"
    (tmp_path / "main.py").write_text(_spawner(token))
    cancel = Cancellation()
    spec = RunSpec(command=["python", "main.py"], workdir=tmp_path, limits=Limits(wall_seconds=120),
                   image=PYTHON_IMAGE, runtime="python", cancel=cancel)

    def cancel_when_started() -> None:
        deadline = time.monotonic() + 20
        while not processes_with_token(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        cancel.set()

    threading.Thread(target=cancel_when_started, daemon=True).start()
    started = time.monotonic()
    result = box.run(spec)
    took = time.monotonic() - started
    assert result.verdict is Verdict.INFRA_ERROR, result.to_dict()
    assert result.message == CANCELLED_MESSAGE
    assert took < 20, f"the run was not stopped: {took:.1f} s"
    assert _gone(token), f"{backend}: the run's child outlived its cancellation"
    # the backend is whole: the next run runs
    (tmp_path / "main.py").write_text("print('next')\n")
    after = box.run(RunSpec(command=["python", "main.py"], workdir=tmp_path, image=PYTHON_IMAGE,
                            runtime="python"))
    assert after.verdict is Verdict.OK and after.stdout.text == "next\n", after.to_dict()


def test_a_run_cancelled_before_it_starts_never_runs(sandbox_for: SandboxFor, tmp_path: Path) -> None:
    cancel = Cancellation()
    cancel.set()
    result = sandbox_for("process").run(RunSpec(command=["sh", "-c", "touch ran"], workdir=tmp_path,
                                                cancel=cancel))
    assert result.verdict is Verdict.INFRA_ERROR and result.message == CANCELLED_MESSAGE
    assert not (tmp_path / "ran").exists()


def test_cancellation_calls_each_subscriber_once_and_not_after_unsubscribing() -> None:
    cancel = Cancellation()
    calls: list[str] = []
    keep = cancel.subscribe(lambda: calls.append("a"))
    drop = cancel.subscribe(lambda: calls.append("b"))
    drop()
    cancel.set()
    cancel.set()
    cancel.subscribe(lambda: calls.append("late"))  # already cancelled: at once
    keep()
    assert calls == ["a", "late"] and cancel.is_set()
