"""Call-based rows of APPS/TACO-style sets: ``input_output`` names a function (``fn_name``).

``{"fn_name": "solve", "inputs": [[1, 2]], "outputs": [3]}``: each input is the list of
arguments of one call, each output what it returns. The row becomes a function-call task
graded from a table (``hidden_tests/table.json``), by value, in the trusted runner.

- The reference (the row's first solution) defines ``fn_name`` at top level, or as a method of
  a class (APPS' LeetCode problems: ``class Solution`` with the method): the entry point is then
  ``Solution.fn_name``, which the runner calls on a new ``Solution()`` for each row.
- APPS wraps most expected values in a one-element list and some not; its own grader accepts
  the value or its first element. A wrapped row says so (``expected_any``): either passes.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from verify_cli.importers.model import RowError, TaskDraft
from verify_cli.importers.python_source import parse, signature_stub
from verify_cli.tasks.model import TaskKind

SOLUTION_FILE = "solution.py"
TABLE_FILE = "hidden_tests/table.json"
CALL_SECONDS = 5.0


def io_mapping(value: Any) -> Mapping[str, Any]:
    """An ``input_output`` value (JSON text or a mapping) as a mapping."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise RowError("input_output is not valid JSON") from None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(t, Mapping) and "input" in t and "output" in t for t in value):
        # DeepCoder's layout: a list of {"input", "output"[, "testtype"]} cases.
        if any(str(t.get("testtype") or "stdin") != "stdin" for t in value):
            raise RowError("the tests are not all stdin/stdout cases (testtype 'functional'); "
                           "only stdin cases of this layout import")
        return {"inputs": [t["input"] for t in value], "outputs": [t["output"] for t in value]}
    if not isinstance(value, Mapping):
        raise RowError(f"input_output is {type(value).__name__}, not an object with inputs and outputs "
                       "(or a list of input/output cases)")
    return value


def is_call_based(value: Any) -> bool:
    """Whether an ``input_output`` value names a function (else it holds stdin/stdout pairs)."""
    try:
        return bool(io_mapping(value).get("fn_name"))
    except RowError:
        return False


def io_cases(io: Mapping[str, Any], *, allow_empty: bool = False) -> tuple[list[Any], list[Any]]:
    """The ``inputs`` and ``outputs`` lists of an ``input_output`` mapping, checked to pair up
    (and to hold a case, unless ``allow_empty``)."""
    # CodeContests names them 'input' / 'output'; Parquet readers may give numpy arrays.
    inputs = io.get("inputs", io.get("input"))
    outputs = io.get("outputs", io.get("output"))
    inputs, outputs = (v.tolist() if hasattr(v, "tolist") else v for v in (inputs, outputs))
    for name, value in (("inputs", inputs), ("outputs", outputs)):
        if value is None:
            keys = ", ".join(repr(str(k)) for k in list(io)[:8]) or "none"
            raise RowError(f"input_output has no {name!r} list (its keys: {keys})")
        if not isinstance(value, (list, tuple)):
            raise RowError(f"input_output's {name!r} is {type(value).__name__}, not a list")
    if len(inputs) != len(outputs):
        raise RowError(f"input_output has {len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs and not allow_empty:
        raise RowError("input_output holds no cases")
    return list(inputs), list(outputs)


def table_rows(io: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The runner's table rows: arguments, expected value and, for a wrapped one, either."""
    inputs, outputs = io_cases(io)
    rows: list[dict[str, Any]] = []
    for i, (args, expected) in enumerate(zip(inputs, outputs, strict=True), start=1):
        if not isinstance(args, (list, tuple)):
            raise RowError(f"input {i} is {type(args).__name__}, not the list of a call's arguments")
        row: dict[str, Any] = {"args": list(args), "expected": expected}
        if isinstance(expected, list) and len(expected) == 1:
            row["expected_any"] = [expected, expected[0]]
        rows.append(row)
    return rows


def entry_point(tree: ast.Module, fn_name: str) -> tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """``fn_name`` when the solution defines it at top level, ``Class.fn_name`` when a class
    does; with the definition."""
    methods: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn_name:
            return fn_name, node
        if isinstance(node, ast.ClassDef):
            methods.extend((f"{node.name}.{fn_name}", n) for n in node.body
                           if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn_name)
    if not methods:
        raise RowError(f"the reference solution defines no function or method {fn_name!r}")
    return next((m for m in methods if m[0].startswith("Solution.")), methods[0])


def _starter(tree: ast.Module, entry: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    owner, _, method = entry.rpartition(".")
    if not owner:
        return signature_stub(tree, entry)
    return (f"class {owner}:\n    def {method}({ast.unparse(node.args)}):\n"
            f"        raise NotImplementedError(\"write {method}\")\n")


def call_based_draft(*, task_id: str, question: str, solution: str, io_value: Any,
                     source: dict[str, Any]) -> TaskDraft:
    """A 'calls' task (table style) from a call-based row."""
    io = io_mapping(io_value)
    fn_name = str(io.get("fn_name") or "").strip()
    if not fn_name.isidentifier():
        raise RowError(f"fn_name {fn_name!r} is not a Python name")
    rows = table_rows(io)
    solution = solution.replace("\r\n", "\n")
    tree = parse(solution, "the reference solution")
    entry, node = entry_point(tree, fn_name)
    owner = entry.rpartition(".")[0]
    how = (f"the method `{fn_name}` of a class `{owner}` (each test calls it on a new `{owner}()`)"
           if owner else f"the function `{fn_name}`")
    prompt = (f"{question.strip()}\n\nWrite it in Python as {how} in {SOLUTION_FILE}. "
              f"It is called with the arguments of each test and must return the answer.\n")
    return TaskDraft(
        id=task_id, prompt=prompt, kind=TaskKind.CALLS,
        files={f"starter/{SOLUTION_FILE}": _starter(tree, entry, node),
               f"solution/{SOLUTION_FILE}": solution.rstrip("\n") + "\n",
               TABLE_FILE: json.dumps(rows, indent=1) + "\n"},
        editable=[SOLUTION_FILE],
        table={"entry_point": entry, "module": SOLUTION_FILE, "style": "table",
               "call_seconds": CALL_SECONDS},
        wall_seconds=float(min(600, max(30, 2 * len(rows)))),
        title=f"Write {fn_name}()", tags=["call-based"], source=source,
    )
