"""The ``pytest`` kind: the task's ``python -m pytest`` command, with verify-cli's plugins
(``verify_shuffle``: seeded test order; ``verify_harness``: the signed session record, test
selection, fail-fast, coverage), warm where the command is recognisably one pytest run
(:mod:`verify_cli.kinds.pytest_command`), and two-process through the ``verify_standin`` plugin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from verify_cli.grading.junit import TestOutcome
from verify_cli.grading.seal import SEAL_KEY_ENV, TEST_DIRS_ENV
from verify_cli.grading.two_process import python_candidate_modules
from verify_cli.kinds.base import HarnessOptions, Kind, TwoProcessRuntime
from verify_cli.kinds.pytest_command import parse_pytest_command, parse_pytest_words
from verify_cli.kinds.pytest_config import TRUSTED_ADDOPTS, TRUSTED_INI, trusted_ini
from verify_cli.kinds.record import check_record
from verify_cli.kinds.registry import register_kind
from verify_cli.sandbox.base import RunResult, RunSpec, WarmHost, WarmInvocation
from verify_cli.tasks.model import HIDDEN_TESTS_DIR, TESTS_DIR, Isolation, Task


def _trusted_env(task: Task, root: Path, env: dict[str, str]) -> dict[str, str]:
    plugins = [p for p in env.get("PYTEST_PLUGINS", "").split(",") if p]
    return {"PYTEST_PLUGINS": ",".join(["verify_standin", *plugins]),
            "VERIFY_CANDIDATE_MODULES": json.dumps(python_candidate_modules(task, root)),
            # No interpreter of the tests' side puts its working folder (the shared work folder)
            # on sys.path (python -P, 3.11+): `python -m pytest` would import, before the
            # stand-in plugin takes the folder off sys.path, a pytest.py the candidate wrote
            # there (a second session of the command, after the candidate ran).
            "PYTHONSAFEPATH": "1"}


class PytestKind(Kind):
    name: ClassVar[str] = "pytest"
    summary: ClassVar[str] = "the task's pytest command, sealed, warm and two-process"
    legacy_framework: ClassVar[str | None] = "pytest"
    harness_files: ClassVar[tuple[str, ...]] = (
        "verify_shuffle.py", "verify_harness.py", "verify_standin.py", "verify_standin_trace.py", "warm_worker.py",
        "candidate/verify_candidate_server.py")

    def __init__(self) -> None:
        super().__init__()
        self.two_process = TwoProcessRuntime(
            kind=self.name,
            server_command=("/bin/sh", "-c", 'exec python "$VERIFY_CANDIDATE_HARNESS/verify_candidate_server.py"'),
            trusted_env=_trusted_env, code_suffixes=(".py",))

    def run_environment(self, task: Task) -> dict[str, str]:
        return {
            "PYTEST_PLUGINS": "verify_shuffle,verify_harness",
            TEST_DIRS_ENV: f"{TESTS_DIR},{HIDDEN_TESTS_DIR}",
            # Plugins that happen to be installed where the runtime lives (xdist, benchmark...)
            # must not change grading or slow every run; a task that needs one names it with -p.
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            # Which tests run is the trusted side's decision: pytest reads the pristine task's
            # configuration only, never a tox.ini/setup.cfg/pyproject.toml a candidate wrote
            # (verify_cli.kinds.pytest_config).
            "PYTEST_ADDOPTS": TRUSTED_ADDOPTS,
        }

    def trusted_files(self, task: Task) -> dict[str, bytes]:
        return {TRUSTED_INI: trusted_ini(task)}

    def needs_seal_key(self, task: Task) -> bool:
        return True

    def request_environment(self, task: Task, options: HarnessOptions,
                            seal_key: str | None) -> dict[str, str]:
        env: dict[str, str] = {}
        if seal_key:
            env[SEAL_KEY_ENV] = seal_key
        if options.select_tests is not None:
            env["VERIFY_SELECT_TESTS"] = json.dumps(sorted(options.select_tests))
        if options.fail_fast:
            env["VERIFY_FAIL_FAST"] = "1"
            if options.test_seconds:
                env["VERIFY_TEST_TIMEOUT"] = f"{options.test_seconds:.3f}"
        if options.coverage_files:
            wanted = dict(options.coverage_lines)
            env["VERIFY_COVERAGE"] = json.dumps(
                {f: sorted(wanted[f]) for f in options.coverage_files if f in wanted} if wanted
                else list(options.coverage_files))
        return env

    def check_seal(self, task: Task, run: RunResult, key: str, tests: list[TestOutcome],
                   problems: list[str]) -> bool:
        return check_record(run, key, tests, problems)

    def warm_invocation(self, task: Task, host: WarmHost, spec: RunSpec) -> WarmInvocation | None:
        if task.language != "python":
            return None
        env = host.environment(spec)
        if host.programs_here(spec):
            return parse_pytest_command(task.test.command, env)
        words = parse_pytest_words(task.test.command, env)
        if words is None:
            return None
        mode, argv0, args = words
        return WarmInvocation(mode, "", "", argv0, args)

    def traces_coverage(self, task: Task) -> bool:
        return task.language == "python"

    def stops_early(self, task: Task) -> bool:
        return True

    def traceable(self, task: Task) -> bool:
        return task.language == "python" and task.isolation is not Isolation.IN_PROCESS


register_kind(PytestKind())
