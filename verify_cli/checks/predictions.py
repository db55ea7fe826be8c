"""Grade a file of predictions (SWE-bench's shape: ``instance_id``, ``model_name_or_path``,
``model_patch``) against repository tasks, one ``report.json`` per instance in SWE-bench's shape.

A prediction's diff is applied as SWE-bench applies one (strict ``git apply``, then the
permissive fallbacks: :func:`verify_cli.grading.apply_candidate_patch`) and the files it leaves
are graded as a candidate, in a sandbox, by the trusted grader. A diff's sections that edit the
task's test files are dropped first, as SWE-bench's harness checks test files out again before it
applies the test patch (the rest is graded; ``dropped_tests`` names them). A diff that does not
apply, or edits a file outside the task's editable globs, is reported as not applied
(``patch_successfully_applied: false``) and counted as an error, as SWE-bench counts one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify_cli.errors import TaskFormatError
from verify_cli.grading.candidate_patch import CandidatePatchError, apply_candidate_patch, drop_test_file_sections
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.report.swebench import instance_id, instance_report
from verify_cli.tasks.model import Task


@dataclass(frozen=True)
class Prediction:
    instance_id: str
    model: str
    #: The diff, or None where the prediction has none (``model_patch: null``).
    patch: str | None


@dataclass(frozen=True)
class EvaluatedPrediction:
    prediction: Prediction
    #: SWE-bench's report for the instance (``{instance_id: {...}}``); None where no task has
    #: the prediction's instance id.
    report: dict[str, Any] | None
    #: Why the instance is an error (no task, a diff that does not apply, the sandbox failed).
    error: str = ""
    result: GradeResult | None = None
    #: Test files the diff edited, whose sections were dropped before it was applied (as
    #: SWE-bench's harness checks test files out again): the rest was graded.
    dropped_tests: tuple[str, ...] = ()


def read_predictions(path: Path) -> list[Prediction]:
    """The predictions in ``path``: JSONL, a JSON list, or a JSON object keyed by instance id
    (the three forms SWE-bench's harness reads). A malformed one is a TaskFormatError naming
    the line or key."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise TaskFormatError(str(path), f"cannot read the predictions: {e.strerror or e}") from None
    stripped = text.lstrip()
    rows: list[tuple[str, Any]]
    if stripped.startswith(("[", "{")) and not _is_jsonl(stripped):
        try:
            document = json.loads(text)
        except ValueError as e:
            raise TaskFormatError(str(path), f"not JSON: {e}") from None
        if isinstance(document, list):
            rows = [(f"/{i}", r) for i, r in enumerate(document)]
        elif isinstance(document, dict) and "instance_id" in document:  # one prediction (one-line JSONL)
            rows = [("line 1", document)]
        elif isinstance(document, dict):
            rows = [(f"/{k}", {"instance_id": k, **v} if isinstance(v, dict) else v) for k, v in document.items()]
        else:
            raise TaskFormatError(str(path), "the predictions are neither JSONL, a JSON list nor a JSON object")
    else:
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append((f"line {number}", json.loads(line)))
                except ValueError as e:
                    raise TaskFormatError(str(path), f"line {number} is not JSON: {e}") from None
    out: list[Prediction] = []
    for where, row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("instance_id"), str) or not row["instance_id"]:
            raise TaskFormatError(str(path), f"{where}: a prediction needs an instance_id (text)",
                                  hint="each prediction: {\"instance_id\", \"model_name_or_path\", \"model_patch\"}")
        patch = row.get("model_patch")
        if patch is not None and not isinstance(patch, str):
            raise TaskFormatError(str(path), f"{where}: model_patch is {type(patch).__name__}, not text")
        out.append(Prediction(row["instance_id"], str(row.get("model_name_or_path") or "model"), patch))
    return out


def _is_jsonl(text: str) -> bool:
    first = text.split("\n", 1)[0].strip()
    try:
        json.loads(first)
    except ValueError:
        return False
    return first.startswith("{") and "\n" in text.strip()


def task_for(tasks: Sequence[Task]) -> Callable[[str], Task | None]:
    """Finds the task of an instance id: its source's original id, its task id, or its task id's
    last part (``swebench/acme__calc-1`` for ``acme__calc-1``)."""
    index: dict[str, Task] = {}
    for task in tasks:
        for key in (task.id, task.id.rsplit("/", 1)[-1], instance_id(task)):
            index.setdefault(key, task)
            index.setdefault(key.lower(), task)
    return lambda iid: index.get(iid) or index.get(iid.lower())


def evaluate_predictions(tasks: Sequence[Task], predictions: Iterable[Prediction], grader: Any, *,
                         jobs: int = 2,
                         on_result: Callable[[EvaluatedPrediction], None] | None = None) -> list[EvaluatedPrediction]:
    """Each prediction graded against its task (``grader``: a Grader or an executor), in the
    order given; see the module's docstring."""
    find = task_for(tasks)
    done: dict[int, EvaluatedPrediction] = {}
    requests: list[GradeRequest] = []
    pending: dict[str, tuple[int, Prediction, Task, tuple[str, ...]]] = {}

    def finish(i: int, item: EvaluatedPrediction) -> None:
        done[i] = item
        if on_result is not None:
            on_result(item)

    preds = list(predictions)
    for i, pred in enumerate(preds):
        task = find(pred.instance_id)
        if task is None:
            finish(i, EvaluatedPrediction(pred, None, f"no task has instance id {pred.instance_id!r}"))
            continue
        if not (pred.patch and pred.patch.strip()):
            finish(i, EvaluatedPrediction(pred, instance_report(task, None, patch=pred.patch, applied=False)))
            continue
        diff, dropped = drop_test_file_sections(task, pred.patch)
        try:
            files = apply_candidate_patch(task, diff)[0] if diff.strip() else {}
        except CandidatePatchError as e:
            finish(i, EvaluatedPrediction(pred, instance_report(task, None, patch=pred.patch, applied=False),
                                          f"the patch does not apply: {e.message}", dropped_tests=dropped))
            continue
        label = f"prediction {i}"
        pending[label] = (i, pred, task, dropped)
        requests.append(GradeRequest(task, Phase.CANDIDATE, candidate=files, label=label))
    for result in grader.grade_many(requests, jobs=jobs):
        i, pred, task, dropped = pending[result.label]
        if result.status is GradeStatus.INFRA_ERROR:
            finish(i, EvaluatedPrediction(pred, instance_report(task, None, patch=pred.patch, applied=True),
                                          "; ".join(result.problems) or "the sandbox failed", result, dropped))
        else:
            finish(i, EvaluatedPrediction(pred, instance_report(task, result.tests, patch=pred.patch, applied=True),
                                          "", result, dropped))
    return [done[i] for i in range(len(preds))]
