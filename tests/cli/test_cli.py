"""The command line: exit codes, report files, and no traceback for any mistake a user can make."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from verify_cli import __version__
from verify_cli.cli import console
from verify_cli.cli.app import main
from verify_cli.tasks import load_task
from verify_cli.tasks.schema import task_schema


def check_tasks(path: Path, tmp_path: Path, *extra: str) -> int:
    """``verify-cli check-tasks`` on the process backend, with a cache that lives in tmp_path."""
    return main(
        [
            "check-tasks",
            str(path),
            "--sandbox",
            "process",
            "--repeats",
            "2",
            "--jobs",
            "2",
            "--cache-dir",
            str(tmp_path / "cache"),
            *extra,
        ]
    )


def no_traceback(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "Traceback" not in output
    return output


# --- exit codes ---------------------------------------------------------------------------


def test_sound_task_exits_0(
    sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check_tasks(sample_tasks_dir / "coding-interval-merge", tmp_path) == 0
    output = no_traceback(capsys)
    assert "coding/interval-merge" in output
    assert "1 sound, 0 defective, 0 error" in output
    # The summary says what the repeat count can promise about flaky tests.
    assert ("flakiness: 2 run(s) detect a 1-in-4 flaky test with 44% probability "
            "(below the 95% target: raise --repeats)") in output


def test_defective_set_exits_1_and_writes_reports(
    sample_tasks_dir: Path,
    defective_tasks_dir: Path,
    copy_task: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    copy_task(sample_tasks_dir / "coding-interval-merge", "set/a-sound")
    copy_task(defective_tasks_dir / "starter-passes", "set/b-trivial")
    json_out, junit_out = tmp_path / "out" / "report.json", tmp_path / "out" / "report.xml"
    code = check_tasks(
        tmp_path / "set", tmp_path, "--json", str(json_out), "--junit", str(junit_out)
    )
    assert code == 1
    output = no_traceback(capsys)
    assert "1 sound, 1 defective, 0 error" in output

    doc = json.loads(json_out.read_text())
    assert doc["command"] == "check-tasks"
    assert doc["version"] == __version__
    assert doc["sandbox"]["backend"] == "process"
    assert doc["repeats"] == 2
    assert doc["flakiness_power"] == {"repeats": 2, "flake_rate": 0.25, "detection_probability": 0.4375,
                                      "target": 0.95, "meets_target": False}
    assert doc["summary"] == {"sound": 1, "defective": 1, "not-gradeable-two-process": 0, "error": 0,
                              "environment-error": 0}
    tasks = {t["task_id"]: t for t in doc["tasks"]}
    assert set(tasks) == {"coding/interval-merge", "defective/starter-passes"}
    assert tasks["coding/interval-merge"]["verdict"] == "sound"
    trivial = tasks["defective/starter-passes"]
    assert trivial["verdict"] == "defective"
    assert {c["name"]: c["status"] for c in trivial["checks"]}["starter-fails"] == "fail"
    for task in doc["tasks"]:
        assert len(task["runs"]) == 3
        for run in task["runs"]:
            assert run["tests"], "every run carries its per-test outcomes"
            assert all(
                t["outcome"] in {"passed", "failed", "error", "skipped", "missing"}
                for t in run["tests"]
            )
            assert run["run"]["verdict"] in {"ok", "nonzero_exit"}
    starter_run = next(r for r in trivial["runs"] if r["phase"] == "starter")
    assert {t["outcome"] for t in starter_run["tests"]} == {"passed"}

    suite = ET.parse(junit_out).getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == {"coding/interval-merge", "defective/starter-passes"}
    assert cases["coding/interval-merge"].find("failure") is None
    failure = cases["defective/starter-passes"].find("failure")
    assert failure is not None
    assert failure.get("message") == "defective: starter-fails"
    assert "starter already passes all" in (failure.text or "")
    assert suite.get("tests") == "2" and suite.get("failures") == "1"


def test_missing_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check_tasks(tmp_path / "nope", tmp_path) == 2
    assert f"{tmp_path / 'nope'}: no such file or folder" in no_traceback(capsys)


def test_folder_without_tasks_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert check_tasks(tmp_path / "empty", tmp_path) == 2
    assert "no task.toml found under this folder" in no_traceback(capsys)


def test_unknown_sandbox_exits_2(
    make_task: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["check-tasks", str(make_task()), "--sandbox", "nope", "--cache-dir", str(tmp_path)]
    )
    assert code == 2
    output = no_traceback(capsys)
    assert "unknown sandbox backend 'nope'" in output
    assert "choose one of: auto," in output


@pytest.mark.parametrize(
    "argv",
    [
        ["check-tasks", "--bogus"],
        ["check-tasks"],
        ["check-tasks", ".", "--repeats", "0"],
        ["check-tasks", ".", "--jobs", "many"],
        ["no-such-command"],
    ],
)
def test_bad_usage_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    no_traceback(capsys)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"verify-cli {__version__}"


def test_sandbox_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "list"]) == 0
    output = no_traceback(capsys)
    assert "process" in output and "bwrap" in output


def test_json_to_stdout(
    make_task: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(console, "out", console.out)  # `--json -` sends the table to stderr
    assert check_tasks(make_task(fast=True), tmp_path, "--json", "-") == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["summary"]["sound"] == 1
    assert "check-tasks: 1 task(s)" in captured.err


# --- bad task files: a clear message, no traceback ----------------------------------------


def _set(pointer: str, value: Any) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        *parents, last = pointer.strip("/").split("/")
        node = doc
        for p in parents:
            node = node[p]
        node[last] = value

    return mutate


def _rename(old: str, new: str, table: str | None = None) -> Any:
    def mutate(doc: dict[str, Any]) -> None:
        node = doc[table] if table else doc
        node[new] = node.pop(old)

    return mutate


BAD_TASKS: dict[str, tuple[dict[str, Any], str]] = {
    "toml-syntax": (
        {"toml_text": 'id = "x"\nschema_version = = 1\n'},
        "task.toml:2:18: TOML syntax error at line 2, column 18",
    ),
    "misspelt-key": (
        {"mutate": _rename("editable", "edtable")},
        "task.toml: /edtable: unknown field 'edtable'; did you mean 'editable'?",
    ),
    "nested-key": (
        {"mutate": _rename("wall_seconds", "wall_secs", "limits")},
        "task.toml: /limits/wall_secs: unknown field 'wall_secs'; did you mean 'wall_seconds'?",
    ),
    "missing-field": (
        {"mutate": lambda doc: doc.pop("language")},
        "task.toml: /language: missing required field 'language'",
    ),
    "wrong-type": (
        {"mutate": _set("/limits/memory_mb", "lots")},
        "task.toml: /limits/memory_mb: expected an integer, got 'lots'",
    ),
    "bad-enum": (
        {"mutate": _set("/environment/runtime", "pyhton")},
        "task.toml: /environment/runtime: 'pyhton' is not one of: python, node, shell; "
        "did you mean 'python'?",
    ),
    "no-solution": (
        {"files": {"solution/solution.py": None}},
        "solution: missing folder solution/ (the reference solution)",
    ),
    "no-tests": (
        {"files": {"tests/test_solution.py": None}},
        "tests: missing folder tests/ (and no hidden_tests/)",
    ),
    "editable-matches-nothing": (
        {"mutate": _set("/editable", ["nothing.py", "solution.py"])},
        "task.toml: /editable/0: editable glob 'nothing.py' matches no file in solution/",
    ),
    "solution-not-editable": (
        {"files": {"solution/extra.py": "X = 1\n"}},
        "solution/extra.py: solution file is not covered by any editable glob",
    ),
    "dotdot-glob": (
        {"mutate": _set("/editable", ["../x", "solution.py"])},
        "task.toml: /editable/0: editable glob '../x' contains '..' and could escape the task "
        "folder",
    ),
    "absolute-glob": (
        {"mutate": _set("/editable", ["/abs/x.py"])},
        "task.toml: /editable/0: editable glob '/abs/x.py' is absolute",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_TASKS))
def test_bad_task_is_reported_without_traceback(
    case: str, make_task: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kwargs, message = BAD_TASKS[case]
    root = make_task(case, **kwargs)
    json_out = tmp_path / "report.json"
    assert check_tasks(root, tmp_path, "--json", str(json_out)) == 1
    output = no_traceback(capsys)
    assert "0 sound, 1 defective, 0 error" in output
    (task,) = json.loads(json_out.read_text())["tasks"]
    (schema,) = task["checks"]
    assert schema["name"] == "schema"
    assert schema["status"] == "fail"
    assert f"{root}/{message}" in schema["message"]


def test_escaping_symlink_is_reported_without_traceback(
    make_task: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_task()
    os.symlink("/etc/hostname", root / "tests" / "host.txt")
    json_out = tmp_path / "report.json"
    assert check_tasks(root, tmp_path, "--json", str(json_out)) == 1
    no_traceback(capsys)
    (task,) = json.loads(json_out.read_text())["tasks"]
    assert (
        f"{root}/tests/host.txt: symlink points outside the task folder (to '/etc/hostname')"
        in task["checks"][0]["message"]
    )


def test_duplicate_id_is_reported_without_traceback(
    make_task: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = make_task("set/a", fast=True)
    second = make_task("set/b", fast=True)
    json_out = tmp_path / "report.json"
    assert check_tasks(tmp_path / "set", tmp_path, "--json", str(json_out)) == 1
    no_traceback(capsys)
    tasks = json.loads(json_out.read_text())["tasks"]
    assert [t["verdict"] for t in tasks] == ["sound", "defective"]
    assert (
        f"{second}/task.toml: /id: id 'demo/total' is already used by {first}/task.toml"
        in tasks[1]["checks"][0]["message"]
    )


# --- the cache through the CLI ------------------------------------------------------------


def cached_flags(json_out: Path) -> list[bool]:
    return [t["cached"] for t in json.loads(json_out.read_text())["tasks"]]


def test_cache_and_no_cache(
    make_task: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_task(fast=True)
    out = tmp_path / "r.json"
    assert check_tasks(root, tmp_path, "--json", str(out)) == 0
    assert cached_flags(out) == [False]
    assert any((tmp_path / "cache").rglob("*.json"))
    assert check_tasks(root, tmp_path, "--json", str(out)) == 0
    assert cached_flags(out) == [True]
    assert "(cached)" in no_traceback(capsys)
    assert check_tasks(root, tmp_path, "--json", str(out), "--no-cache") == 0
    assert cached_flags(out) == [False]


def test_no_cache_writes_no_cache(make_task: Any, tmp_path: Path) -> None:
    assert check_tasks(make_task(fast=True), tmp_path, "--no-cache") == 0
    assert not (tmp_path / "cache").exists()


# --- schema and new-task ------------------------------------------------------------------


def test_schema_prints_valid_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    Draft202012Validator.check_schema(schema)
    assert schema == task_schema()


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_new_task_is_sound(
    language: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "My Task"
    assert main(["new-task", str(dest), "--language", language]) == 0
    task = load_task(dest)
    assert task.id == "my-task"
    assert task.language == language
    out = tmp_path / "r.json"
    assert check_tasks(dest, tmp_path, "--json", str(out)) == 0
    no_traceback(capsys)
    (report,) = json.loads(out.read_text())["tasks"]
    assert report["verdict"] == "sound"
    assert all(c["status"] == "pass" for c in report["checks"])


def test_new_task_refuses_an_existing_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "taken"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    assert main(["new-task", str(dest)]) == 2
    assert f"{dest}: already exists" in no_traceback(capsys)
    assert [p.name for p in dest.iterdir()] == ["keep.txt"]


def test_new_task_unknown_language(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-task", str(tmp_path / "t"), "--language", "cobol"]) == 2
    assert "no template for language 'cobol'" in no_traceback(capsys)
    assert not (tmp_path / "t").exists()


# --- the one handler ----------------------------------------------------------------------


def test_ctrl_c_exits_130(
    make_task: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from verify_cli.cli import check_tasks as command

    def interrupted(path: Path) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "load_task_set", interrupted)
    assert check_tasks(make_task(), tmp_path) == 130
    no_traceback(capsys)


def test_unexpected_errors_keep_their_traceback(
    make_task: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verify_cli.cli import check_tasks as command

    def bug(path: Path) -> Any:
        raise ZeroDivisionError("a bug, not a user mistake")

    monkeypatch.setattr(command, "load_task_set", bug)
    with pytest.raises(ZeroDivisionError):
        check_tasks(make_task(), tmp_path)


def test_new_task_id_starts_with_a_letter_or_digit(tmp_path: Path) -> None:
    dest = tmp_path / "_Draft Task"
    assert main(["new-task", str(dest)]) == 0
    assert load_task(dest).id == "draft-task"


def test_new_task_unknown_domain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["new-task", str(tmp_path / "t"), "--domain", "codng"]) == 2
    output = no_traceback(capsys)
    assert "unknown domain 'codng'" in output
    assert "choose one of: coding, data-pipeline" in output
    assert not (tmp_path / "t").exists()


# --- messages print as written --------------------------------------------------------------


def test_brackets_in_errors_are_not_eaten(
    make_task: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["check-tasks", str(make_task()), "--sandbox", "[red]nope", "--cache-dir", str(tmp_path)]
    )
    assert code == 2
    assert "unknown sandbox backend '[red]nope'" in no_traceback(capsys)


def test_brackets_in_check_messages_are_not_eaten(
    make_task: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def weighted(doc: dict[str, Any]) -> None:
        doc["scoring"]["policy"] = "weighted"

    make_task("t", mutate=weighted)
    monkeypatch.chdir(tmp_path)  # a short relative path keeps the message on one table line
    assert check_tasks(Path("t"), tmp_path) == 1
    output = no_traceback(capsys)
    assert (
        "t/task.toml: /scoring/weights: policy 'weighted' needs a [scoring.weights] table" in output
    )


@pytest.mark.parametrize("option", ["--json", "--junit"])
def test_unwritable_report_path_exits_2(
    option: str, make_task: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    assert check_tasks(make_task(fast=True), tmp_path, option, str(folder)) == 2
    assert f"{folder}: cannot write the report: Is a directory" in no_traceback(capsys)
    assert list(folder.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
