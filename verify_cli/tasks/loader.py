"""Load and validate task folders; every error names the file, the field and what to do."""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import ValidationError

from verify_cli.errors import TaskFormatError, UsageError
from verify_cli.formats.harbor.config import HARBOR_KIND, is_harbor_folder, load_harbor_task
from verify_cli.formats.harbor.spec import TB1_SPEC
from verify_cli.formats.harbor.terminal_bench import is_terminal_bench_folder, load_terminal_bench_task
from verify_cli.kinds.registry import kind_names
from verify_cli.tasks.model import (
    HIDDEN_TESTS_DIR,
    LEGACY_FRAMEWORKS,
    LEGACY_TESTS_KIND,
    RUNNER_COMMANDS,
    RUNNER_RESULTS,
    SOLUTION_DIR,
    TASK_FILE,
    TESTS_DIR,
    CallsSpec,
    Environment,
    Isolation,
    Scoring,
    ScoringPolicy,
    StdioSpec,
    Task,
    TaskKind,
    TaskLimits,
    TestSpec,
)
from verify_cli.tasks.paths import escaping_symlinks, list_files, matches_any, unsafe_relative_path
from verify_cli.tasks.repository import (
    SOLUTION_PATCH,
    RepositorySpec,
    read_test_ids,
    solution_patch_removals,
    unpacked_starter,
)
from verify_cli.tasks.schema import task_schema, task_validator


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _schema_at(path: list[Any]) -> dict[str, Any]:
    """The sub-schema describing the object at ``path`` (object properties only)."""
    node = task_schema()
    for part in path:
        props = node.get("properties", {})
        if isinstance(part, str) and part in props:
            node = props[part]
        elif isinstance(part, int) and "items" in node:
            node = node["items"]
        else:
            return {}
    return node


def _suggest(word: str, choices: list[str]) -> str | None:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return close[0] if close else None


_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number",
               "array": "an array", "object": "a table", "boolean": "true or false"}


def _describe(error: ValidationError) -> tuple[str, str, str | None]:
    """(pointer, message, hint) for one schema violation."""
    path = list(error.absolute_path)
    v = error.validator
    if v == "additionalProperties":
        allowed = sorted(_schema_at(path).get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        key = extra[0] if extra else "?"
        guess = _suggest(key, allowed)
        msg = f"unknown field '{key}'"
        if guess:
            msg += f"; did you mean '{guess}'?"
        return _pointer([*path, key]), msg, f"valid fields here: {', '.join(allowed)}"
    if v == "required":
        m = re.search(r"'([^']+)' is a required property", error.message)
        key = m.group(1) if m else str(error.validator_value)
        desc = _schema_at([*path, key]).get("description")
        return _pointer([*path, key]), f"missing required field '{key}'", desc
    if v == "enum":
        choices = [str(c) for c in error.validator_value]
        msg = f"{error.instance!r} is not one of: {', '.join(choices)}"
        guess = _suggest(str(error.instance), choices)
        return _pointer(path), msg + (f"; did you mean '{guess}'?" if guess else ""), None
    if v == "const":
        return _pointer(path), f"expected {error.validator_value!r}, got {error.instance!r}", None
    if v == "type":
        want = error.validator_value
        names = [_TYPE_NAMES.get(str(t), str(t)) for t in (want if isinstance(want, list) else [want])]
        return _pointer(path), f"expected {' or '.join(names)}, got {error.instance!r}", None
    if v == "pattern":
        desc = _schema_at(path).get("description")
        return _pointer(path), f"{error.instance!r} does not match the pattern {error.validator_value}", desc
    if v in ("maximum", "minimum", "exclusiveMinimum", "exclusiveMaximum", "maxLength"):
        return _pointer(path), error.message, _schema_at(path).get("description")
    return _pointer(path), error.message, None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise TaskFormatError(str(path), f"not UTF-8 text ({e.reason})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        detail = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
        if m:
            where = f"line {m.group(1)}, column {m.group(2)}"
            raise TaskFormatError(f"{path}:{m.group(1)}:{m.group(2)}",
                                  f"TOML syntax error at {where}: {detail}") from None
        raise TaskFormatError(str(path), f"TOML syntax error: {detail}") from None


def _non_finite(value: Any, path: list[str | int]) -> list[str | int] | None:
    """The path of the first nan or inf number in a TOML document (JSON Schema lets them pass)."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if (found := _non_finite(item, [*path, key])) is not None:
            return found
    return None


def validate_document(path: Path, data: dict[str, Any]) -> None:
    """Raise TaskFormatError for the first schema violation (sorted by position)."""
    if (where := _non_finite(data, [])) is not None:
        raise TaskFormatError(str(path), "nan and inf are not numbers a task can use",
                              pointer=_pointer(where),
                              hint=_schema_at(where).get("description") or "write a finite number")
    errors = sorted(task_validator().iter_errors(data), key=lambda e: (len(e.absolute_path),
                                                                        [str(p) for p in e.absolute_path]))
    if not errors:
        return
    pointer, msg, hint = _describe(errors[0])
    if len(errors) > 1:
        msg += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    raise TaskFormatError(str(path), msg, pointer=pointer, hint=hint)


def _test_ids(task_file: Path, test: dict[str, Any], key: str) -> tuple[str, ...]:
    """``[test] fail_to_pass`` / ``pass_to_pass``: a list of ids, or a list file's ids."""
    value = test.get(key, [])
    if isinstance(value, list):
        return tuple(value)
    why = unsafe_relative_path(value)
    path = task_file.parent / value
    if why or not path.is_file():
        raise TaskFormatError(str(task_file), f"test.{key} names {value!r}, "
                              + (f"which {why}" if why else "which is not a file of the task folder"),
                              pointer=f"/test/{key}",
                              hint="give a list of test ids, or a file in the task folder with one id per line")
    try:
        return read_test_ids(path)
    except (OSError, UnicodeDecodeError) as e:
        raise TaskFormatError(str(path), f"cannot read the test list: {e}") from None


def _environment(env: dict[str, Any]) -> Environment:
    return Environment(image=env["image"], runtime=env["runtime"], preload=tuple(env.get("preload", ())),
                       requirements=tuple(env.get("requirements", ())),
                       requirements_file=env.get("requirements_file"), python=env.get("python"),
                       system_packages=tuple(env.get("system_packages", ())),
                       setup=tuple(env.get("setup", ())), dockerfile=env.get("dockerfile"))


def _check_environment(folder: Path, task_file: Path, data: dict[str, Any]) -> None:
    """The files ``[environment]`` names are in the task folder."""
    env = data["environment"]
    for field in ("requirements_file", "dockerfile"):
        rel = env.get(field)
        if rel is None:
            continue
        why = unsafe_relative_path(rel)
        if why:
            raise TaskFormatError(str(task_file), f"{field} {rel!r} {why}", pointer=f"/environment/{field}",
                                  hint="name a file inside the task folder")
        if not (folder / rel).is_file():
            raise TaskFormatError(str(task_file), f"{field} {rel!r}: no such file in the task folder",
                                  pointer=f"/environment/{field}",
                                  hint=f"add {rel} to the task folder, or remove {field}")


def _repository(d: dict[str, Any]) -> RepositorySpec | None:
    if "repository" not in d:
        return None
    r = d["repository"]
    return RepositorySpec(bundle=r.get("bundle", ""), archive=r.get("archive", ""),
                          base_commit=r.get("base_commit", ""), test_files=tuple(r.get("test_files", ())),
                          test_layout=r.get("test_layout", "task"))


def _check_repository(task_file: Path, data: dict[str, Any], kind: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ``[repository]`` table and the test lists hold together; returns the lists."""
    folder = task_file.parent
    test = data["test"]
    f2p, p2p = _test_ids(task_file, test, "fail_to_pass"), _test_ids(task_file, test, "pass_to_pass")
    for key, ids in (("fail_to_pass", f2p), ("pass_to_pass", p2p)):
        for i, tid in enumerate(ids):
            path = tid.split("::", 1)[0]
            if kind == TaskKind.LOG:  # the runner's own ids (Django's "test_x (mod.Class)")
                if not tid.strip():
                    raise TaskFormatError(str(task_file), "an empty test id", pointer=f"/test/{key}/{i}")
                continue
            if "::" not in tid or not path.endswith(".py") or unsafe_relative_path(path):
                raise TaskFormatError(str(task_file), f"test id {tid!r} is not a pytest node id",
                                      pointer=f"/test/{key}/{i}",
                                      hint="write ids as pytest prints them: tests/test_x.py::test_y")
    both = sorted(set(f2p) & set(p2p))
    if both:
        raise TaskFormatError(str(task_file), f"test {both[0]!r} is in both fail_to_pass and pass_to_pass",
                              pointer="/test/pass_to_pass", hint="a test either starts failing or starts passing")
    policy = ScoringPolicy(data["scoring"]["policy"])
    if policy.uses_test_lists and not f2p:
        raise TaskFormatError(str(task_file), f"policy {policy.value!r} needs test.fail_to_pass",
                              pointer="/test/fail_to_pass",
                              hint="list the tests the reference makes pass (pytest node ids)")
    if (f2p or p2p) and kind not in (TaskKind.PYTEST, TaskKind.LOG):
        raise TaskFormatError(str(task_file), "fail_to_pass and pass_to_pass name pytest node ids "
                              "(or, for kind = \"log\", the ids its runner's log gives)",
                              pointer="/kind", hint='set kind = "pytest" (or "log" with [test] log_parser)')
    repo = data.get("repository", {})
    if repo.get("bundle") and repo.get("archive"):
        raise TaskFormatError(str(task_file), "give a bundle or an archive, not both", pointer="/repository")
    if repo.get("bundle") and not repo.get("base_commit"):
        raise TaskFormatError(str(task_file), "a bundle needs the base_commit whose tree is the starter",
                              pointer="/repository/base_commit")
    for field in ("bundle", "archive"):
        if repo.get(field):
            if why := unsafe_relative_path(repo[field]):
                raise TaskFormatError(str(task_file), f"{field} {why}", pointer=f"/repository/{field}")
            if (folder / "starter").is_dir():
                raise TaskFormatError(str(folder / "starter"), f"a task with a {field} has no starter/ folder",
                                      hint=f"the {field} is the starter: remove starter/ or the {field}")
    for i, pattern in enumerate(repo.get("test_files", ())):
        if why := unsafe_relative_path(pattern):
            raise TaskFormatError(str(task_file), f"test_files glob {pattern!r} {why}",
                                  pointer=f"/repository/test_files/{i}")
    return f2p, p2p


def resolve_kind(task_file: Path, data: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The task's kind name, and the deprecation notes of any old form the document uses.

    The old form (``kind = "tests"`` or no kind, with ``[test] framework`` naming the runner)
    still loads: ``framework = "pytest"`` is kind "pytest", "node" is "node", "other" (or none)
    is "command". In the new form ``kind`` alone names it; a ``framework`` that agrees is noted,
    one that contradicts the kind is an error.
    """
    raw = data.get("kind")
    framework = data["test"].get("framework")
    new_form = "write kind = \"{kind}\" and drop [test] framework"
    if raw is None or raw == LEGACY_TESTS_KIND:
        if raw is None and framework is None:
            return TaskKind.COMMAND, ()
        legacy = LEGACY_FRAMEWORKS[framework or "other"]
        old = " with ".join(x for x in (f'kind = "{raw}"' if raw else "",
                                         f'framework = "{framework}"' if framework else "") if x)
        return legacy, (f"{task_file}: {old} is the old form of kind = \"{legacy}\": "
                        + new_form.format(kind=legacy),)
    names = kind_names()
    if raw not in names:
        guess = _suggest(str(raw), names)
        raise TaskFormatError(str(task_file), f"{raw!r} is not one of: {', '.join(names)}"
                              + (f"; did you mean '{guess}'?" if guess else ""), pointer="/kind",
                              hint="a task kind is a module of verify_cli.kinds or a verify_cli.task_kinds plugin")
    kind: str = TaskKind(raw) if raw in TaskKind._value2member_map_ else str(raw)
    if framework is None:
        return kind, ()
    if LEGACY_FRAMEWORKS.get(framework) == kind:
        return kind, (f"{task_file}: [test] framework is the old form (kind = \"{kind}\" says it): drop it",)
    if kind in (TaskKind.STDIO, TaskKind.CALLS):
        return kind, (f"{task_file}: [test] framework (the old form) is ignored for kind = \"{kind}\": drop it",)
    raise TaskFormatError(str(task_file), f"framework {framework!r} contradicts kind = {raw!r}",
                          pointer="/test/framework", hint="drop [test] framework: kind names the runner")


def _build(root: Path, d: dict[str, Any], kind: str, notes: tuple[str, ...]) -> Task:
    env = d["environment"]
    test = d["test"]
    sc = d["scoring"]
    lim = d["limits"]
    return Task(
        root=root,
        schema_version=d["schema_version"],
        id=d["id"],
        title=d.get("title", ""),
        domain=d["domain"],
        language=d["language"],
        tags=tuple(d.get("tags", ())),
        environment=_environment(env),
        test=TestSpec(command=test["command"], results=test.get("results", "*.xml"),
                      fail_to_pass=_test_ids(root / TASK_FILE, test, "fail_to_pass"),
                      pass_to_pass=_test_ids(root / TASK_FILE, test, "pass_to_pass"),
                      log_parser=test.get("log_parser", "")),
        scoring=Scoring(policy=ScoringPolicy(sc["policy"]), weights=dict(sc.get("weights", {})),
                        default_weight=float(sc.get("default_weight", 1.0))),
        limits=TaskLimits(wall_seconds=float(lim["wall_seconds"]),
                          memory_mb=int(lim.get("memory_mb", 1024)),
                          processes=int(lim.get("processes", 128)),
                          output_bytes=int(lim.get("output_bytes", 1048576))),
        editable=tuple(d["editable"]),
        isolation=Isolation(d.get("isolation", Isolation.TWO_PROCESS.value)),
        difficulty=d.get("difficulty"),
        kind=kind,
        stdio=StdioSpec(**d["stdio"]) if "stdio" in d else None,
        calls=CallsSpec(**d["calls"]) if "calls" in d else None,
        repository=_repository(d),
        deprecations=notes,
    )


def _check_kind(task_file: Path, data: dict[str, Any], solution: dict[str, Path], kind: str) -> None:
    """A task graded by a built-in runner names the runner's command and has its table; a
    ``log`` task names its log parser."""
    if kind == TaskKind.LOG and not data["test"].get("log_parser"):
        raise TaskFormatError(str(task_file), "kind = \"log\" needs [test] log_parser", pointer="/test/log_parser",
                              hint="log_parser = \"django\", \"sympy\" or \"pytest-log\": the runner whose log it is")
    for table in (TaskKind.STDIO, TaskKind.CALLS):
        if table.value in data and kind != table:
            raise TaskFormatError(str(task_file), f"[{table.value}] is read only for kind = '{table.value}'",
                                  pointer=f"/{table.value}",
                                  hint=f"set kind = \"{table.value}\", or remove the table")
    if kind not in RUNNER_COMMANDS:
        return
    if kind not in data:
        raise TaskFormatError(str(task_file), f"kind '{kind}' needs a [{kind}] table",
                              pointer=f"/{kind}",
                              hint="see 'verify-cli schema' for its fields")
    want = RUNNER_COMMANDS[TaskKind(kind)]
    if data["test"]["command"] != want or data["test"].get("results", RUNNER_RESULTS) != RUNNER_RESULTS:
        raise TaskFormatError(str(task_file), f"a '{kind}' task is graded by the built-in runner",
                              pointer="/test/command",
                              hint=f"set command = '{want}' and results = '{RUNNER_RESULTS}' in [test]")
    spec = data[kind]
    if kind == TaskKind.STDIO and spec.get("compare") == "checker" and not spec.get("checker"):
        raise TaskFormatError(str(task_file), "compare = 'checker' needs a checker command",
                              pointer="/stdio/checker",
                              hint="e.g. checker = 'python tests/checker.py' (run with input, expected "
                                   "and actual output paths)")
    if kind == TaskKind.CALLS and spec["module"] not in solution:
        raise TaskFormatError(str(task_file), f"calls.module {spec['module']!r} is not a file of solution/",
                              pointer="/calls/module",
                              hint=f"solution/ has: {', '.join(sorted(solution)[:8])}")


def load_task(folder: Path) -> Task:
    """Load one task folder, or raise TaskFormatError saying what is wrong and where."""
    folder = Path(folder)
    task_file = folder / TASK_FILE
    if not folder.is_dir():
        raise TaskFormatError(str(folder), "not a folder", hint="give the path of a task folder")
    if is_terminal_bench_folder(folder):
        return load_terminal_bench_task(folder)
    if not task_file.is_file():
        raise TaskFormatError(str(task_file), "missing task.toml",
                              hint="run 'verify-cli new-task NAME' to scaffold a valid task")
    if is_harbor_folder(folder):
        return load_harbor_task(folder)
    data = _read_toml(task_file)
    validate_document(task_file, data)

    for link, target in escaping_symlinks(folder):
        raise TaskFormatError(str(link), f"symlink points outside the task folder (to {target!r})",
                              hint="copy the file into the task folder instead of linking to it")
    for i, pattern in enumerate(data["editable"]):
        why = unsafe_relative_path(pattern)
        if why:
            raise TaskFormatError(str(task_file), f"editable glob {pattern!r} {why}",
                                  pointer=f"/editable/{i}")
    why = unsafe_relative_path(data["test"].get("results", "*.xml"))
    if why:
        raise TaskFormatError(str(task_file), f"results glob {why}", pointer="/test/results")
    if data["scoring"]["policy"] == "weighted" and not data["scoring"].get("weights"):
        raise TaskFormatError(str(task_file), "policy 'weighted' needs a [scoring.weights] table",
                              pointer="/scoring/weights",
                              hint="map test ids or patterns to weights, e.g. \"hidden_tests.*\" = 2")

    kind, notes = resolve_kind(task_file, data)
    if kind == HARBOR_KIND:  # given by a Harbor folder's layout, never by a verify-cli task.toml
        raise TaskFormatError(str(task_file), "kind 'harbor' is what a Harbor task folder is read as",
                              pointer="/kind", hint="lay the task out as Harbor does (instruction.md, tests/test.sh, "
                              "solution/solve.sh, no id), or convert it: verify-cli import --preset harbor")
    _check_repository(task_file, data, kind)
    _check_environment(folder, task_file, data)
    has_patch = (folder / SOLUTION_PATCH).is_file()
    if has_patch and (folder / SOLUTION_DIR).is_dir():
        raise TaskFormatError(str(folder / SOLUTION_PATCH), "a task has solution/ or solution.patch, not both",
                              hint="keep one reference: the edited files or the unified diff")
    if not has_patch and not (folder / SOLUTION_DIR).is_dir():
        raise TaskFormatError(str(folder / SOLUTION_DIR), "missing folder solution/ (the reference solution)",
                              hint="every task needs a reference solution that passes its tests "
                                   "(solution/, or solution.patch: a unified diff against the starter)")
    in_project = (data.get("repository", {}).get("test_layout") == "repository"
                  and bool(data["test"].get("fail_to_pass")))  # a project's own tests, in its starter
    if not (folder / TESTS_DIR).is_dir() and not (folder / HIDDEN_TESTS_DIR).is_dir() and not in_project:
        raise TaskFormatError(str(folder / TESTS_DIR), "missing folder tests/ (and no hidden_tests/)",
                              hint="put the tests the grader runs in tests/ or hidden_tests/ (a repository "
                                   "task laid out as its project, test_layout = \"repository\", may keep them "
                                   "in its starter)")
    repository = _repository(data)
    if repository is not None and repository.packed:
        unpacked_starter(folder, repository)  # once per bundle or archive: a bad one fails here
    # With a patch, applying it to the starter (cached) gives the files; TaskFormatError names
    # a hunk that does not apply.
    solution = _build(folder, data, kind, notes).solution_files() if has_patch else list_files(folder / SOLUTION_DIR)
    # The files a gold patch deletes or renames away are the reference's too: editable, as a
    # candidate must be able to remove them the same way.
    removed = solution_patch_removals(folder) if has_patch else ()
    if not solution and not removed:
        raise TaskFormatError(str(folder / SOLUTION_DIR), "the reference solution folder is empty")
    outside_removed = [rel for rel in removed if not matches_any(data["editable"], rel)]
    if outside_removed:
        raise TaskFormatError(str(folder / SOLUTION_PATCH), f"the gold patch removes {outside_removed[0]!r}, which "
                              "no editable glob covers, so no candidate could do the same",
                              hint="add a glob for it to 'editable' in task.toml")
    for i, pattern in enumerate(data["editable"]):
        if not any(matches_any([pattern], rel) for rel in (*solution, *removed)):
            raise TaskFormatError(str(task_file), f"editable glob {pattern!r} matches no file in solution/",
                                  pointer=f"/editable/{i}",
                                  hint=f"solution/ has: {', '.join(sorted(solution)[:8])}")
    outside = [rel for rel in solution if not matches_any(data["editable"], rel)]
    if outside:
        raise TaskFormatError(str(folder / SOLUTION_DIR / outside[0]),
                              "solution file is not covered by any editable glob, so grading would ignore it",
                              hint="add a glob for it to 'editable' in task.toml, or move it to starter/")
    _check_kind(task_file, data, solution, kind)
    return _build(folder, data, kind, notes)


@dataclass(frozen=True)
class TaskLoadFailure:
    """A task folder that could not be loaded, kept so a set's report can show it."""

    root: Path
    error: TaskFormatError

    @property
    def id(self) -> str:
        return self.root.name


def deprecation_notes(items: Iterable[Task | TaskLoadFailure]) -> list[str]:
    """What a task set's loaded tasks still write in an old form: one line per kind of note
    (how many tasks, and the first one's file), for the CLI to show once per set."""
    by_form: dict[str, list[str]] = {}
    for item in items:
        if isinstance(item, Task):
            for note in item.deprecations:
                where, _, what = note.partition(": ")
                by_form.setdefault(what, []).append(where)
    out: list[str] = []
    for what, files in by_form.items():
        more = f" (and {len(files) - 1} more task(s))" if len(files) > 1 else ""
        out.append(f"{files[0]}{more}: {what}")
    return out


def discover_task_dirs(path: Path) -> list[Path]:
    """Task folders (those holding task.toml) at or under ``path``, sorted."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder", hint="give a task folder or a folder of task folders")
    if path.is_file():
        if path.name == TASK_FILE or (path.name == TB1_SPEC and is_terminal_bench_folder(path.parent)):
            return [path.parent]
        raise UsageError(f"{path}: not a task folder", hint="give a folder holding task.toml, or a folder of them")
    if (path / TASK_FILE).is_file() or is_terminal_bench_folder(path):
        return [path]
    found = sorted({p.parent for p in path.rglob(TASK_FILE)
                    if not any(part.startswith(".") for part in p.relative_to(path).parts)}
                   | {p.parent for p in path.rglob(TB1_SPEC)  # Terminal-Bench 1 folders, read as they are
                      if is_terminal_bench_folder(p.parent)
                      and not any(part.startswith(".") for part in p.relative_to(path).parts)})
    # A task folder's own sub-folders (starter/, tests/ ...) never hold tasks of their own.
    roots: list[Path] = []
    for d in found:
        if not any(r in d.parents for r in roots):
            roots.append(d)
    return roots


def load_task_set(path: Path) -> Iterator[Task | TaskLoadFailure]:
    """Every task under ``path``: loaded Tasks, and failures for folders that did not load.

    Raises UsageError when ``path`` holds no task at all.
    """
    dirs = discover_task_dirs(path)
    if not dirs:
        raise UsageError(f"{path}: no task.toml found under this folder",
                         hint="run 'verify-cli new-task NAME' to scaffold a task")
    seen: dict[str, Path] = {}
    for d in dirs:
        try:
            task = load_task(d)
        except TaskFormatError as e:
            yield TaskLoadFailure(d, e)
            continue
        if task.id in seen:
            yield TaskLoadFailure(d, TaskFormatError(
                str(task.task_file), f"id {task.id!r} is already used by {seen[task.id] / TASK_FILE}",
                pointer="/id", hint="give every task in a set its own id"))
            continue
        seen[task.id] = d
        yield task
