"""Loading task folders: each bad input names the file, the field (JSON pointer) and the fault."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from verify_cli.errors import TaskFormatError, UsageError
from verify_cli.tasks import (
    ScoringPolicy,
    Task,
    TaskLoadFailure,
    discover_task_dirs,
    load_task,
    load_task_set,
)


def load_error(folder: Path) -> TaskFormatError:
    with pytest.raises(TaskFormatError) as info:
        load_task(folder)
    return info.value


def test_minimal_task_loads(make_task: Any) -> None:
    root = make_task()
    task = load_task(root)
    assert isinstance(task, Task)
    assert task.id == "demo/total"
    assert task.root == root
    assert task.editable == ("solution.py",)
    assert task.scoring.policy is ScoringPolicy.ALL_OR_NOTHING
    assert task.limits.wall_seconds == 30.0
    assert task.limits.output_bytes == 1048576  # default, not in the file
    assert set(task.solution_files()) == {"solution.py"}
    assert set(task.test_files()) == {"tests/test_solution.py"}
    assert task.prompt.startswith("# Sum")


def test_sample_tasks_all_load(sample_tasks_dir: Path) -> None:
    items = list(load_task_set(sample_tasks_dir))
    assert items, "sample_tasks/ holds no task"
    failures = [str(i.error) for i in items if isinstance(i, TaskLoadFailure)]
    assert failures == []


def test_toml_syntax_error_names_line_and_column(make_task: Any) -> None:
    text = 'schema_version = 1\nid = "demo/total"\ndomain = = "coding"\n'
    root = make_task(toml_text=text)
    err = load_error(root)
    task_file = root / "task.toml"
    assert f"{task_file}:3:10: TOML syntax error at line 3, column 10" in str(err)
    assert err.path == f"{task_file}:3:10"


def test_misspelt_key_suggests_the_right_one(make_task: Any) -> None:
    def misspell(doc: dict[str, Any]) -> None:
        doc["edtable"] = doc.pop("editable")

    root = make_task(mutate=misspell)
    err = load_error(root)
    assert (
        f"{root / 'task.toml'}: /edtable: unknown field 'edtable'; did you mean 'editable'?"
        in str(err)
    )
    assert err.pointer == "/edtable"
    assert "valid fields here:" in str(err)


def test_nested_unknown_key_has_nested_pointer(make_task: Any) -> None:
    def misspell(doc: dict[str, Any]) -> None:
        doc["limits"]["wall_secs"] = doc["limits"].pop("wall_seconds")

    root = make_task(mutate=misspell)
    err = load_error(root)
    assert (
        f"{root / 'task.toml'}: /limits/wall_secs: unknown field 'wall_secs'; "
        "did you mean 'wall_seconds'?"
    ) in str(err)
    assert err.pointer == "/limits/wall_secs"


def test_missing_required_field(make_task: Any) -> None:
    root = make_task(mutate=lambda doc: doc.pop("domain"))
    err = load_error(root)
    assert f"{root / 'task.toml'}: /domain: missing required field 'domain'" in str(err)
    assert "What kind of work the task is." in str(err)  # the schema's description as the hint


def test_missing_required_nested_field(make_task: Any) -> None:
    root = make_task(mutate=lambda doc: doc["test"].pop("command"))
    err = load_error(root)
    assert f"{root / 'task.toml'}: /test/command: missing required field 'command'" in str(err)


def test_wrong_type(make_task: Any) -> None:
    def wrong(doc: dict[str, Any]) -> None:
        doc["limits"]["wall_seconds"] = "ten"

    root = make_task(mutate=wrong)
    err = load_error(root)
    assert f"{root / 'task.toml'}: /limits/wall_seconds: expected a number, got 'ten'" in str(err)


def test_editable_must_be_an_array(make_task: Any) -> None:
    def wrong(doc: dict[str, Any]) -> None:
        doc["editable"] = "solution.py"

    root = make_task(mutate=wrong)
    err = load_error(root)
    assert f"{root / 'task.toml'}: /editable: expected an array, got 'solution.py'" in str(err)


def test_bad_enum_suggests_the_nearest_choice(make_task: Any) -> None:
    def typo(doc: dict[str, Any]) -> None:
        doc["domain"] = "codng"

    root = make_task(mutate=typo)
    err = load_error(root)
    assert f"{root / 'task.toml'}: /domain: 'codng' is not one of: coding, " in str(err)
    assert "; did you mean 'coding'?" in str(err)


def test_bad_nested_enum(make_task: Any) -> None:
    def typo(doc: dict[str, Any]) -> None:
        doc["scoring"]["policy"] = "fractoin"

    root = make_task(mutate=typo)
    err = load_error(root)
    assert (
        f"{root / 'task.toml'}: /scoring/policy: 'fractoin' is not one of: all-or-nothing, "
        "fraction, weighted, swebench, fail-to-pass-fraction; did you mean 'fraction'?"
    ) in str(err)


def test_wrong_schema_version(make_task: Any) -> None:
    def bump(doc: dict[str, Any]) -> None:
        doc["schema_version"] = 2

    root = make_task(mutate=bump)
    err = load_error(root)
    assert f"{root / 'task.toml'}: /schema_version: expected 1, got 2" in str(err)


def test_bad_id_pattern_explains_the_rule(make_task: Any) -> None:
    def shout(doc: dict[str, Any]) -> None:
        doc["id"] = "Demo Total"

    root = make_task(mutate=shout)
    err = load_error(root)
    assert f"{root / 'task.toml'}: /id: 'Demo Total' does not match the pattern" in str(err)
    assert "lower-case letters" in str(err)


def test_several_problems_are_counted(make_task: Any) -> None:
    def break_two(doc: dict[str, Any]) -> None:
        doc.pop("domain")
        doc.pop("language")

    root = make_task(mutate=break_two)
    err = load_error(root)
    assert "missing required field 'domain' (and 1 more problem)" in str(err)


def test_weighted_policy_needs_weights(make_task: Any) -> None:
    def weighted(doc: dict[str, Any]) -> None:
        doc["scoring"]["policy"] = "weighted"

    root = make_task(mutate=weighted)
    err = load_error(root)
    assert (
        f"{root / 'task.toml'}: /scoring/weights: policy 'weighted' needs a [scoring.weights] table"
    ) in str(err)


def test_missing_solution_folder(make_task: Any) -> None:
    root = make_task(files={"solution/solution.py": None})
    assert not (root / "solution").exists()
    err = load_error(root)
    assert f"{root / 'solution'}: missing folder solution/ (the reference solution)" in str(err)


def test_empty_solution_folder(make_task: Any) -> None:
    root = make_task(files={"solution/solution.py": None})
    (root / "solution").mkdir()
    err = load_error(root)
    assert f"{root / 'solution'}: the reference solution folder is empty" in str(err)


def test_missing_tests_and_hidden_tests(make_task: Any) -> None:
    root = make_task(files={"tests/test_solution.py": None})
    assert not (root / "tests").exists()
    err = load_error(root)
    assert f"{root / 'tests'}: missing folder tests/ (and no hidden_tests/)" in str(err)


def test_hidden_tests_alone_are_enough(make_task: Any) -> None:
    root = make_task(
        files={
            "tests/test_solution.py": None,
            "hidden_tests/test_hidden.py": "def test_x():\n    pass\n",
        }
    )
    task = load_task(root)
    assert set(task.test_files()) == {"hidden_tests/test_hidden.py"}


def test_missing_task_toml(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    err = load_error(tmp_path / "t")
    assert f"{tmp_path / 't' / 'task.toml'}: missing task.toml" in str(err)
    assert "new-task" in str(err)


def test_not_utf8(make_task: Any) -> None:
    root = make_task()
    (root / "task.toml").write_bytes(b'id = "\xff"\n')
    err = load_error(root)
    assert f"{root / 'task.toml'}: not UTF-8 text" in str(err)


def test_editable_glob_matching_nothing(make_task: Any) -> None:
    def add_glob(doc: dict[str, Any]) -> None:
        doc["editable"] = ["nothing.py", "solution.py"]

    root = make_task(mutate=add_glob)
    err = load_error(root)
    assert (
        f"{root / 'task.toml'}: /editable/0: editable glob 'nothing.py' matches no file "
        "in solution/"
    ) in str(err)
    assert err.pointer == "/editable/0"
    assert "solution/ has: solution.py" in str(err)


def test_solution_file_not_covered_by_editable(make_task: Any) -> None:
    root = make_task(files={"solution/helper.py": "X = 1\n"})
    err = load_error(root)
    assert (
        f"{root / 'solution' / 'helper.py'}: solution file is not covered by any editable glob, "
        "so grading would ignore it"
    ) in str(err)


def test_recursive_editable_glob_covers_subfolders(make_task: Any) -> None:
    def recursive(doc: dict[str, Any]) -> None:
        doc["editable"] = ["**/*.py"]

    root = make_task(mutate=recursive, files={"solution/pkg/helper.py": "X = 1\n"})
    assert load_task(root).editable == ("**/*.py",)


def test_dotdot_glob_is_refused(make_task: Any) -> None:
    def escape(doc: dict[str, Any]) -> None:
        doc["editable"] = ["../x", "solution.py"]

    root = make_task(mutate=escape)
    err = load_error(root)
    assert (
        f"{root / 'task.toml'}: /editable/0: editable glob '../x' contains '..' and could escape "
        "the task folder"
    ) in str(err)


def test_absolute_glob_is_refused(make_task: Any) -> None:
    def absolute(doc: dict[str, Any]) -> None:
        doc["editable"] = ["solution.py", "/etc/*"]

    root = make_task(mutate=absolute)
    err = load_error(root)
    assert (
        f"{root / 'task.toml'}: /editable/1: editable glob '/etc/*' is absolute; use a path "
        "relative to the task folder"
    ) in str(err)


def test_escaping_results_glob_is_refused(make_task: Any) -> None:
    def escape(doc: dict[str, Any]) -> None:
        doc["test"]["results"] = "../junit.xml"

    root = make_task(mutate=escape)
    err = load_error(root)
    assert (
        f"{root / 'task.toml'}: /test/results: results glob contains '..' and could escape the "
        "task folder"
    ) in str(err)


def test_symlink_outside_the_task_folder_is_refused(make_task: Any, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    root = make_task()
    link = root / "tests" / "data.txt"
    os.symlink(secret, link)
    err = load_error(root)
    assert f"{link}: symlink points outside the task folder (to '{secret}')" in str(err)


def test_relative_symlink_escaping_is_refused(make_task: Any, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    root = make_task()
    link = root / "starter" / "up"
    os.symlink("../../outside", link)
    err = load_error(root)
    assert f"{link}: symlink points outside the task folder (to '../../outside')" in str(err)


def test_symlink_inside_the_task_folder_is_fine(make_task: Any) -> None:
    root = make_task(files={"tests/data.txt": "1 2 3\n"})
    os.symlink("data.txt", root / "tests" / "alias.txt")
    assert load_task(root).id == "demo/total"


def test_duplicate_id_in_a_set_names_the_first_file(make_task: Any, tmp_path: Path) -> None:
    first = make_task("set/a")
    second = make_task("set/b")
    items = list(load_task_set(tmp_path / "set"))
    assert isinstance(items[0], Task)
    assert items[0].root == first
    failure = items[1]
    assert isinstance(failure, TaskLoadFailure)
    assert failure.root == second
    assert failure.error.pointer == "/id"
    assert (
        f"{second / 'task.toml'}: /id: id 'demo/total' is already used by {first / 'task.toml'}"
    ) in str(failure.error)


def test_load_task_set_keeps_going_past_a_bad_task(make_task: Any, tmp_path: Path) -> None:
    make_task("set/a-good")
    make_task("set/b-bad", mutate=lambda doc: doc.pop("domain"))

    def other_id(doc: dict[str, Any]) -> None:
        doc["id"] = "demo/other"

    make_task("set/c-good", mutate=other_id)
    items = list(load_task_set(tmp_path / "set"))
    assert [type(i).__name__ for i in items] == ["Task", "TaskLoadFailure", "Task"]
    assert items[1].id == "b-bad"


def test_discover_ignores_nested_and_hidden_folders(make_task: Any, tmp_path: Path) -> None:
    outer = make_task("set/outer")
    make_task("set/outer/starter/inner")  # inside a task: not a task of its own
    make_task("set/.hidden/task")
    assert discover_task_dirs(tmp_path / "set") == [outer]
    assert discover_task_dirs(outer / "task.toml") == [outer]


def test_discover_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or folder"):
        discover_task_dirs(tmp_path / "nope")


def test_empty_set_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no task\.toml found under this folder"):
        list(load_task_set(tmp_path))


def test_content_hash_changes_with_any_file(make_task: Any) -> None:
    root = make_task()
    before = load_task(root).content_hash()
    assert load_task(root).content_hash() == before
    (root / "tests" / "test_solution.py").write_text("def test_x():\n    pass\n")
    assert load_task(root).content_hash() != before
