"""One exported row per task: the fields every format holds, and the whole task folder.

``prompt`` is the prompt verify-cli itself sends a model for the task (``difficulty``, ``train``
and the verifiers adapter build it with :func:`verify_cli.models.prompts.task_messages`: prompt.md,
the starter files, the visible tests and the answer format), ``messages`` the same as chat
messages with verify-cli's system message, ``prompt_md`` the task's prompt.md alone, and
``task_id`` the column a reward function (TRL's ``VerifyCliReward``) grades by."""

from __future__ import annotations

import base64
import json
from typing import Any

from verify_cli.models.prompts import task_messages
from verify_cli.tasks.metadata import SOURCE_FILE, difficulty_bucket, difficulty_record, task_source
from verify_cli.tasks.model import HIDDEN_TESTS_DIR, PROMPT_FILE, TASK_FILE, TESTS_DIR, Task
from verify_cli.tasks.paths import list_files

#: Field (verl: in extra_info) that carries the task folder, so an export imports back exactly.
TASK_PAYLOAD = "verify_cli_task"


def task_files(task: Task) -> tuple[dict[str, str], dict[str, str]]:
    """Every file of the task folder but task.toml, prompt.md and source.json: the UTF-8 ones
    as text, the others (binary fixtures, Latin-1 data) as base64, so they come back byte for
    byte."""
    skip = {TASK_FILE, PROMPT_FILE, SOURCE_FILE}
    text: dict[str, str] = {}
    binary: dict[str, str] = {}
    for rel, p in list_files(task.root).items():
        if rel in skip:
            continue
        data = p.read_bytes()
        try:
            text[rel] = data.decode("utf-8")
        except UnicodeDecodeError:
            binary[rel] = base64.b64encode(data).decode("ascii")
    return text, binary


def ground_truth(task: Task, files: dict[str, str]) -> dict[str, Any]:
    """What a reward function needs to judge an answer, in the shape RL data sets use:
    stdio tasks as ``{"inputs": [...], "outputs": [...]}`` (APPS/TACO), call tasks as the entry
    point and the test code, other tasks as their test files."""
    tests = {rel: text for rel, text in files.items() if rel.split("/", 1)[0] in (TESTS_DIR, HIDDEN_TESTS_DIR)}
    # The loader keeps a [stdio]/[calls] table only on a task of that kind.
    if task.stdio is not None:
        stems = sorted(rel[:-3] for rel in tests if rel.endswith(".in"))
        pairs = [(s, next((tests[s + x] for x in (".out", ".ans") if s + x in tests), None)) for s in stems]
        return {"inputs": [tests[s + ".in"] for s, out in pairs if out is not None],
                "outputs": [out for _, out in pairs if out is not None],
                "compare": task.stdio.compare, "tolerance": task.stdio.tolerance}
    if task.calls is not None:
        return {"entry_point": task.calls.entry_point, "style": task.calls.style, "tests": tests}
    return {"test_command": task.test.command, "tests": tests}


def main_solution(task: Task, files: dict[str, str]) -> str:
    """The reference solution's text (one file), or its files as JSON when there are several."""
    solution = {rel.split("/", 1)[1]: text for rel, text in files.items() if rel.startswith("solution/")}
    if len(solution) == 1:
        return next(iter(solution.values()))
    return json.dumps(solution, sort_keys=True)


def export_row(task: Task, *, split: str) -> dict[str, Any]:
    """The generic row of ``task`` (the JSONL and datasets formats write it as is)."""
    files, binary = task_files(task)
    source = task_source(task)
    record = difficulty_record(task)
    payload: dict[str, Any] = {"task_toml": task.task_file.read_text(encoding="utf-8"), "prompt": task.prompt,
                               "files": files, "source": source}
    if binary:
        payload["binary_files"] = binary
    messages = [dict(m) for m in task_messages(task)]
    return {
        "id": task.id,
        "task_id": task.id,
        "title": task.title,
        "domain": task.domain,
        "language": task.language,
        "kind": str(task.kind),
        "tags": list(task.tags),
        # what verify-cli sends a model (difficulty, train, the verifiers adapter): the task's
        # prompt.md, starter files, visible tests and answer format as one user message
        "prompt": messages[-1]["content"],
        "messages": messages,
        "prompt_md": task.prompt,
        "entry_point": task.calls.entry_point if task.calls is not None else "",
        "solution": main_solution(task, files),
        "ground_truth": json.dumps(ground_truth(task, files), sort_keys=True),
        "difficulty": json.dumps(record, sort_keys=True, default=str) if record else None,
        "difficulty_bucket": difficulty_bucket(record),
        "data_source": str(source.get("data_source") or task.id.split("/", 1)[0]),
        "split": str(source.get("split") or split),
        TASK_PAYLOAD: json.dumps(payload, sort_keys=True),
    }
