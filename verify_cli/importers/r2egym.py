"""The ``r2e-gym`` preset: R2E-Gym rows (R2E-Gym-Lite, -Subset, -V1) and local clones of their
repositories become repository tasks.

An R2E-Gym row carries, as R2E-Gym's own runtime reads it (``r2egym.agenthub.runtime.docker``):

- ``repo_name``: the project's short name (``aiohttp``, ``sympy``), its clone under
  ``--repos DIR`` (``DIR/<repo_name>``);
- ``parsed_commit_content``: JSON of the fix commit (``old_commit_hash``, ``new_commit_hash``,
  ``file_diffs``: each file's ``header.file.path``, ``old_file_content``, ``new_file_content``,
  ``is_binary_file``); the files R2E-Gym counts as non-test are the gold patch;
- ``execution_result_content``: JSON of the generated tests (``test_file_names`` and
  ``test_file_codes``, laid out under ``r2e_tests/``) and the ``pytest -rA r2e_tests`` logs at
  the old and the new commit (``old_commit_res_stdout``, ``new_commit_res_stdout``);
- ``expected_output_json``: the tests' statuses at the new commit, keyed as R2E-Gym's log parser
  keys them (``TestClass.test_name``: the node id without its file);
- ``problem_statement`` (its ``[ISSUE]...[/ISSUE]`` part, where marked), ``docker_image``,
  ``commit_hash``.

The starter is the clone's tree at ``old_commit_hash`` (its files checked against the row's old
contents), the reference the non-test files' new contents (``solution/``; ``solution.patch``,
git's diff of the fix, where it deletes a file), the hidden tests ``r2e_tests/``.
FAIL_TO_PASS are the tests expected to pass that did not pass at the old commit, PASS_TO_PASS
those that passed at both (the node ids come from the logs' ``-rA`` summaries). R2E-Gym also
rewards a test expected to *fail* still failing; verify-cli does not grade that (as SWE-bench
does not), and the row's source.json records how many such tests were left out.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verify_cli.errors import TaskFormatError
from verify_cli.importers.model import RowError, TaskDraft, task_id
from verify_cli.importers.sources import Row
from verify_cli.importers.swebench import (
    TEST_FILE_GLOBS,
    WALL_SECONDS,
    _nested_first,
    _tree_files,
    diff_of_fix,
    environment_of,
    find_clone,
)
from verify_cli.importers.writer import dumps_toml
from verify_cli.tasks.loader import validate_document
from verify_cli.tasks.model import TaskKind

COLUMNS: Mapping[str, str] = {
    "id": "instance_id", "repo": "repo_name", "commit": "parsed_commit_content",
    "execution": "execution_result_content", "expected": "expected_output_json",
    "prompt": "problem_statement", "image": "docker_image", "commit_hash": "commit_hash",
}
#: Where R2E-Gym lays out its generated tests (``pytest -rA r2e_tests``).
TESTS_DIR = "r2e_tests"

_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+\.py::\S+)")
_COLOR = re.compile(r"\x1b\[[0-9;]*m")
_ISSUE = re.compile(r"\[ISSUE\](.*)\[/ISSUE\]", re.S)


def _json_field(fields: Mapping[str, Any], name: str, columns: Mapping[str, str]) -> Any:
    value = fields.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise RowError(f"column {columns[name]!r} ({name}) is missing or empty; map another with --map {name}=COLUMN")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise RowError(f"column {columns[name]!r} ({name}) is not JSON") from None
    return value


def _key(name: str, value: Mapping[str, Any], column: str) -> Any:
    if name not in value:
        raise RowError(f"column {column!r} has no {name!r} (an R2E-Gym row's {column} holds it)")
    return value[name]


def is_test_file(path: str) -> bool:
    """R2E-Gym's rule (``FileDiff.is_test_file``): which files of the fix commit are tests."""
    parts = path.split("/")
    return (path.endswith("_test.py") or path.startswith("test_") or parts[-1].startswith("test_")
            or bool({"tests", "Tests", "test", "Test"} & set(parts)))


def summary_statuses(log: str) -> dict[str, str]:
    """Node id -> status from a ``pytest -rA`` log's short summary (ANSI colours removed)."""
    out: dict[str, str] = {}
    for line in _COLOR.sub("", log or "").splitlines():
        match = _SUMMARY.match(line.strip())
        if match:
            out[match.group(2)] = match.group(1)
    return out


def r2e_key(node_id: str) -> str:
    """A node id as R2E-Gym's log parser keys it: its parts after the file, joined by dots."""
    return ".".join(node_id.split("::")[1:])


def convert_r2egym(row: Row, columns: Mapping[str, str], prefix: str, repos: Path) -> TaskDraft:
    """One R2E-Gym row as a repository task draft (see the module's docstring)."""
    from verify_cli.importers.presets import _fields

    fields = _fields(row, columns)
    repo = str(fields.get("repo") or "").strip()
    if not repo:
        raise RowError(f"column {columns['repo']!r} (repo) is missing or empty; map another with --map repo=COLUMN")
    commit = _json_field(fields, "commit", columns)
    execution = _json_field(fields, "execution", columns)
    expected = _json_field(fields, "expected", columns)
    ccol, ecol = columns["commit"], columns["execution"]
    if not isinstance(commit, Mapping) or not isinstance(execution, Mapping) or not isinstance(expected, Mapping):
        raise RowError(f"columns {ccol!r}, {ecol!r} and {columns['expected']!r} must each be a JSON object")
    old = str(_key("old_commit_hash", commit, ccol)).strip()
    new = str(commit.get("new_commit_hash") or fields.get("commit_hash") or "").strip()
    clone = find_clone(repos, repo)
    modes: set[str] = set()
    tree = _tree_files(clone, old, modes)

    solution: dict[str, bytes] = {}
    deleted: list[str] = []
    for diff in _key("file_diffs", commit, ccol):
        path = str(((diff.get("header") or {}).get("file") or {}).get("path") or "")
        if not path:
            raise RowError(f"column {ccol!r}: a file diff has no header.file.path")
        if is_test_file(path):
            continue
        if diff.get("is_binary_file"):
            raise RowError(f"the fix changes the binary file {path!r}, which the row does not carry")
        before, after = str(diff.get("old_file_content") or ""), diff.get("new_file_content")
        if path in tree and tree[path].decode("utf-8", "replace") != before:
            raise RowError(f"{path!r} in the clone at {old[:12]} is not the row's old content "
                           "(the clone holds another history: fetch the project's own)")
        if after is None or "deleted file" in str((diff.get("header") or {}).get("misc_line") or ""):
            if path not in tree:
                raise RowError(f"the fix deletes {path!r}, which the clone at {old[:12]} does not have")
            deleted.append(path)
            continue
        solution[path] = str(after).encode()
    if not solution and not deleted:
        raise RowError(f"column {ccol!r}: the fix changes no non-test file")

    names = _key("test_file_names", execution, ecol)
    codes = _key("test_file_codes", execution, ecol)
    if not isinstance(names, list) or not isinstance(codes, list) or len(names) != len(codes) or not names:
        raise RowError(f"column {ecol!r}: test_file_names and test_file_codes must be lists of the same, "
                       "non-zero length")
    hidden = {f"{TESTS_DIR}/{name}": str(code).encode() for name, code in zip(names, codes, strict=True)}

    old_log = execution.get("old_commit_res_stdout")
    if not old_log:
        raise RowError(f"column {ecol!r} has no old_commit_res_stdout: without the old commit's test log "
                       "FAIL_TO_PASS cannot be told from PASS_TO_PASS")
    before_status = summary_statuses(str(old_log))
    node_ids = {r2e_key(n): n for n in (*summary_statuses(str(execution.get("new_commit_res_stdout") or "")),
                                        *before_status)}
    f2p: list[str] = []
    p2p: list[str] = []
    expected_not_passing = 0
    for raw_key, status in sorted(expected.items()):
        key = _COLOR.sub("", str(raw_key)).split(" - ")[0]
        if status != "PASSED":
            expected_not_passing += 1
            continue
        node = node_ids.get(key)
        if node is None:
            raise RowError(f"column {columns['expected']!r}: test {key!r} is in neither test log of "
                           f"column {ecol!r}, so its file is unknown")
        (p2p if before_status.get(node) == "PASSED" else f2p).append(node)
    if not f2p:
        raise RowError("no test passes at the new commit that did not at the old one: nothing would judge the fix")

    tid = task_id(fields.get("id") or f"{repo}-{(new or old)[:12]}", prefix)
    files: dict[str, str | bytes] = {f"starter/{rel}": data for rel, data in tree.items()}
    files.update({f"hidden_tests/{rel}": data for rel, data in hidden.items()})
    if deleted:  # a solution/ folder only writes files: the fix as a gold patch, which removes them too
        files["solution.patch"] = diff_of_fix(tree, solution, deleted, modes)
    else:
        files.update({f"solution/{rel}": data for rel, data in solution.items()})
    editable = ["**/*.py", *sorted(rel for rel in (*solution, *deleted) if not rel.endswith(".py"))]
    command = ('python -m pytest -p no:cacheprovider -rA --junitxml="$VERIFY_RESULTS_DIR/junit.xml" '
               + shlex.quote(TESTS_DIR))
    doc: dict[str, Any] = {
        "schema_version": 1, "id": tid, "title": f"{repo} {(new or old)[:12]}", "domain": "coding",
        "language": "python", "tags": ["repository", "r2e-gym", repo.lower()],
        "kind": TaskKind.PYTEST.value, "editable": editable, "isolation": "in-process",
        "environment": environment_of(None),
        "test": {"command": command, "results": "junit.xml", "fail_to_pass": f2p, "pass_to_pass": p2p},
        "scoring": {"policy": "swebench"},
        "limits": {"wall_seconds": WALL_SECONDS, "memory_mb": 4096, "processes": 256},
        "repository": {"test_files": [*TEST_FILE_GLOBS, f"{TESTS_DIR}/**"], "test_layout": "repository"},
    }
    try:
        validate_document(Path(tid) / "task.toml", doc)
    except TaskFormatError as e:
        raise RowError(f"{e.pointer}: {e.detail}") from None
    statement = str(fields.get("prompt") or "")
    issue = _ISSUE.search(statement)
    prompt = (issue.group(1) if issue else statement).strip() or f"Resolve the issue fixed by {new[:12]} in {repo}."
    source: dict[str, Any] = {"data_source": "r2e-gym", "index": row.index, "repo": repo, "base_commit": old,
                              "commit_hash": new, "expected_not_passing_left_out": expected_not_passing}
    if fields.get("id"):
        source["original_id"] = fields["id"]
    if fields.get("image"):
        source["image"] = fields["image"]
    return TaskDraft(id=tid, prompt=prompt + "\n", kind=TaskKind.PYTEST, files=files, editable=editable,
                     title=doc["title"], tags=doc["tags"], source=source,
                     executable=frozenset(f"starter/{rel}" for rel in modes),
                     task_toml=dumps_toml(_nested_first(doc)))
