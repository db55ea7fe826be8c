"""The ``log`` kind: a project's own test runner (Django's ``tests/runtests.py``, SymPy's
``bin/test``), whose log is read into per-test results as SWE-bench's log parsers read it
(``[test] log_parser``). The runner runs as the project runs it; its output is kept in the
results folder and parsed there by the harness's ``verify_log_junit`` (standard library only, in
the task's environment). Nothing is sealed and the candidate's code runs in the test process (as
a repository task's does): audit reports such a task as trusting its candidate."""

from __future__ import annotations

from typing import ClassVar

from verify_cli.kinds.base import Kind
from verify_cli.kinds.registry import register_kind
from verify_cli.tasks.model import Task

#: The runner's whole log, in the results folder (read back with the JUnit XML).
LOG_FILE = "test-output.log"
#: How much of the log the run's own output shows (the file holds it all).
SHOWN_BYTES = 65536


class LogKind(Kind):
    name: ClassVar[str] = "log"
    summary: ClassVar[str] = ("a project's own test runner, its log parsed into results "
                              "(Django, SymPy, pytest -rA), unsealed, in-process")
    harness_files: ClassVar[tuple[str, ...]] = ("verify_log_junit.py",)

    def test_command(self, task: Task) -> str:
        log = f'"$VERIFY_RESULTS_DIR/{LOG_FILE}"'
        return (f"( {task.test.command}\n) >{log} 2>&1; status=$?; tail -c {SHOWN_BYTES} {log}; "
                f'python -S -m verify_log_junit {task.test.log_parser} {log} "$VERIFY_RESULTS_DIR/junit.xml" '
                "|| exit 125; exit $status")


register_kind(LogKind())
