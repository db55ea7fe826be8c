"""The exit-code table: every expected error's code is pinned here, and the docs (docs/cli.md, and
the README in short) say the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from verify_cli.cli.app import main
from verify_cli.errors import (
    ExitCode,
    SandboxUnavailableError,
    TaskFormatError,
    UsageError,
    VerifyError,
)
from verify_cli.executors.base import ClusterError, ExecutorUnavailableError
from verify_cli.grading.junit import JUnitParseError
from verify_cli.importers.run import ImportStopped
from verify_cli.models.base import ModelBackendError, ModelBackendUnavailableError
from verify_cli.models.openai_backend import ServerError
from verify_cli.sandbox.bwrap.warm import WorkerError

ROOT = Path(__file__).resolve().parents[2]

EXPECTED: dict[type[VerifyError], int] = {
    VerifyError: 2,
    UsageError: 2,
    TaskFormatError: 2,
    ImportStopped: 2,
    ModelBackendUnavailableError: 2,
    ModelBackendError: 2,
    SandboxUnavailableError: 3,
    ExecutorUnavailableError: 3,
    ClusterError: 3,
    ServerError: 3,
    JUnitParseError: 3,
    WorkerError: 3,
}


def test_exit_code_values() -> None:
    assert {c.name: int(c) for c in ExitCode} == {
        "OK": 0, "DEFECTIVE": 1, "USAGE": 2, "INFRA": 3, "NOT_GRADEABLE": 4, "INTERRUPTED": 130}


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.__name__)
def test_every_expected_error_is_a_verify_error_with_its_code(cls: type[VerifyError]) -> None:
    assert issubclass(cls, VerifyError)
    assert int(cls.exit_code) == EXPECTED[cls]


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.__name__)
def test_the_errors_docstring_lists_every_error_with_its_code(cls: type[VerifyError]) -> None:
    import verify_cli.errors

    doc = verify_cli.errors.__doc__ or ""
    assert f"{cls.__name__} [{EXPECTED[cls]}]" in doc


def test_the_docs_state_the_same_codes() -> None:
    conventions = " ".join((ROOT / "docs" / "cli.md").read_text().split())
    for text in ("`0` success", "`1` defective", "`2` usage", "`3` infrastructure error",
                 "a sandbox backend is unavailable", "`4` (check-tasks)", "`130` interrupted",
                 "and the run exits `1`"):
        assert text in conventions, text
    readme = " ".join((ROOT / "README.md").read_text().split())
    for text in ("`0` success", "`1` defective", "`2` usage error", "`3` infrastructure error",
                 "`130` interrupted", "(docs/cli.md)"):
        assert text in readme, text


def test_an_unavailable_sandbox_exits_3(monkeypatch: pytest.MonkeyPatch, make_task: Any,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import verify_cli.cli.check_tasks as check_tasks_cli

    def unavailable(*_a: object, **_k: object) -> None:
        raise SandboxUnavailableError("no backend here", hint="install one")

    root = make_task("ok")
    monkeypatch.setattr(check_tasks_cli, "open_executor", unavailable)
    assert main(["check-tasks", str(root), "--sandbox", "process", "--no-cache"]) == 3
    assert "no backend here" in capsys.readouterr().err


def test_a_bad_task_file_is_a_finding_for_audit_and_check_tasks(
        make_task: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_task("bad", mutate=lambda doc: doc["limits"].update(wall_seconds=-1))
    assert main(["audit", str(root), "--sandbox", "process"]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert main(["check-tasks", str(root), "--sandbox", "process", "--no-cache"]) == 1


def test_audit_of_a_task_that_does_not_load_says_why_first(
        make_task: Any, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_task("bad", mutate=lambda doc: doc["limits"].update(wall_seconds=-1))
    main(["audit", str(root), "--sandbox", "process"])
    out = capsys.readouterr().out
    assert "nothing measured" not in out
    assert out.index("does not load") < out.index("audit: 1 task(s)")
