"""The calls runner's per-task set-up done once (issue 40's lever "trusted-prepared"): the warm
worker's parent parses a task's test files (``task_sources``, ``prepare_task``) and each run it
forks takes a parsed form only where its own copy of the file hashes the same. These tests load
the harness module as the worker does (its folder on ``sys.path``) and check the runner's side;
tests/grading/test_warm_runners.py runs it warm on bwrap."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import verify_cli

RUNNERS = Path(verify_cli.__file__).parent / "harness" / "runners"
_MODULES = ("verify_calls", "verify_runner_common")


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(RUNNERS))
    for name in _MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    module = importlib.import_module("verify_calls")
    yield module
    for name in _MODULES:
        sys.modules.pop(name, None)


def _task(root: Path, style: str, files: dict[str, str]) -> dict[str, str]:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return {"VERIFY_RUNNER_CONFIG": json.dumps({"style": style, "entry_point": "f"}),
            "VERIFY_WORKDIR": str(root)}


def _outcomes(calls: ModuleType, root: Path, style: str) -> list[str]:
    """Each test's outcome against a candidate ``f(x) = 2x`` as the run would see them."""
    digests = calls.hash_test_files(str(root))
    results = []
    for case, run in calls.load_tests(str(root), style, "f", digests):
        try:
            run(lambda x: 2 * x)
            results.append(case.outcome)
        except AssertionError as e:
            results.append(f"failed: {e}")
    return results


def test_a_run_takes_the_prepared_form_only_where_its_file_hashes_the_same(calls: ModuleType,
                                                                          tmp_path: Path) -> None:
    env = _task(tmp_path, "check", {"hidden_tests/check.py": "def check(c):\n    assert c(2) == 4\n"})
    sources = calls.task_sources(str(tmp_path), env)
    assert calls.prepare_task(sources) == 1
    ((key, code),) = calls.PREPARED.items()
    assert key[:2] == ("check", str(tmp_path / "hidden_tests" / "check.py"))
    # Stand in a marked form for the prepared one: the run takes it, not the file's text...
    calls.PREPARED[key] = compile("def check(c):\n    raise AssertionError('prepared')\n",
                                  code.co_filename, "exec")
    assert _outcomes(calls, tmp_path, "check") == ["failed: prepared"]
    # ...a run the host did not ask to take prepared forms parses the file...
    calls.USE_PREPARED = False
    assert _outcomes(calls, tmp_path, "check") == ["passed"]
    calls.USE_PREPARED = True
    # ...and so does a run whose file is not the one prepared (another task, or one changed).
    (tmp_path / "hidden_tests" / "check.py").write_text("def check(c):\n    assert c(3) == 7, 'own'\n")
    assert _outcomes(calls, tmp_path, "check") == ["failed: own"]


def test_preparing_parses_every_style_and_runs_nothing_of_the_files(calls: ModuleType,
                                                                   tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    effect = f"open({str(marker)!r}, 'w').close()\n"
    cases = {
        "check": ({"tests/check.py": effect + "def check(c):\n    assert c(1) == 2\n"}, ["passed"]),
        "asserts": ({"tests/asserts.py": effect + "assert f(1) == 2\nassert f(2) == 5\n"},
                    ["passed", "failed: "]),
        "table": ({"tests/table.json": json.dumps([{"args": [1], "expected": 2}])}, ["passed"]),
    }
    for style, (files, expected) in cases.items():
        root = tmp_path / style
        env = _task(root, style, files)
        assert calls.prepare_task(calls.task_sources(str(root), env)) == 1, style
        assert not marker.exists(), f"preparing {style} ran the file"
        # The prepared forms give the outcomes the files give when each run parses them.
        assert _outcomes(calls, root, style) == expected, style
        calls.USE_PREPARED = False
        try:
            assert _outcomes(calls, root, style) == expected, style
        finally:
            calls.USE_PREPARED = True
        marker.unlink(missing_ok=True)
    # A new task's preparation replaces the last one's.
    assert {key[0] for key in calls.PREPARED} == {"table"}


def test_what_the_parent_leaves_to_the_runs(calls: ModuleType, tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text("def check(c):\n    pass\n")
    env = _task(tmp_path / "t", "check", {})
    (tmp_path / "t" / "tests").mkdir(parents=True)
    (tmp_path / "t" / "tests" / "check.py").symlink_to(outside)
    assert calls.task_sources(str(tmp_path / "t"), env) is None  # a link: the run reads it itself
    env = _task(tmp_path / "big", "check", {"tests/check.py": "#" * (calls.PREPARE_MAX_BYTES + 1)})
    assert calls.task_sources(str(tmp_path / "big"), env) is None  # past the size bound
    env = _task(tmp_path / "bad", "check", {"tests/check.py": "def check(c):\n    return (\n"})
    assert calls.prepare_task(calls.task_sources(str(tmp_path / "bad"), env)) == 0  # the run reports it
    assert _outcomes(calls, tmp_path / "bad", "check") == ["error"]
    assert calls.task_sources(str(tmp_path / "bad"), {"VERIFY_RUNNER_CONFIG": "{"}) is None
