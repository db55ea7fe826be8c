"""Reports in SWE-bench's shape: the per-instance ``report.json`` its harness writes
(``swebench.harness.grading.get_eval_report``) and the run summary, for repository tasks graded here.

One instance's report::

    {"<instance_id>": {"patch_is_None": false, "patch_exists": true,
                       "patch_successfully_applied": true, "resolved": true,
                       "tests_status": {"FAIL_TO_PASS": {"success": [...], "failure": [...]},
                                        "PASS_TO_PASS": {"success": [...], "failure": [...]},
                                        "FAIL_TO_FAIL": {"success": [], "failure": []},
                                        "PASS_TO_FAIL": {"success": [], "failure": []}}}}

The test ids are the task's own (as the row listed them); a test counts as SWE-bench counts it (an
XFAIL passes; a skipped PASS_TO_PASS test does not fail; one absent from the results fails).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verify_cli.grading.junit import TestOutcome
from verify_cli.grading.scoring import TestLists
from verify_cli.tasks.model import Task

#: The file SWE-bench's harness writes per instance (``LOG_REPORT``).
REPORT_FILE = "report.json"


def instance_id(task: Task) -> str:
    """The id SWE-bench knows the task by: the row's ``instance_id`` that source.json records
    (``original_id``), else the task's own id."""
    source = task.root / "source.json"
    try:
        original = json.loads(source.read_text(encoding="utf-8")).get("original_id")
    except (OSError, ValueError, AttributeError):
        original = None
    return str(original) if original else task.id


def _status(success: Sequence[str] = (), failure: Sequence[str] = ()) -> dict[str, list[str]]:
    return {"success": list(success), "failure": list(failure)}


def tests_status(task: Task, tests: Sequence[TestOutcome] | None) -> dict[str, dict[str, list[str]]]:
    """SWE-bench's ``tests_status`` of one graded run (None: nothing ran, every list empty)."""
    lists = TestLists.of(task.test)
    if lists is None or tests is None:
        return {key: _status() for key in ("FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL", "PASS_TO_FAIL")}
    f2p, p2p = lists.outcomes(tests)
    named_f2p = list(zip(task.test.fail_to_pass, f2p, strict=True))
    named_p2p = list(zip(task.test.pass_to_pass, p2p, strict=True))
    return {
        "FAIL_TO_PASS": _status([n for n, ok in named_f2p if ok], [n for n, ok in named_f2p if not ok]),
        "PASS_TO_PASS": _status([n for n, ok in named_p2p if ok], [n for n, ok in named_p2p if not ok]),
        "FAIL_TO_FAIL": _status(), "PASS_TO_FAIL": _status(),
    }


def instance_report(task: Task, tests: Sequence[TestOutcome] | None, *, patch: str | None,
                    applied: bool) -> dict[str, Any]:
    """One instance's report, keyed by its instance id, as SWE-bench writes ``report.json``.

    ``patch`` is the candidate's diff (None: the prediction had none), ``applied`` whether it
    applied, ``tests`` the graded run's outcomes (None where nothing ran). ``resolved`` is
    SWE-bench's FULL resolution: every FAIL_TO_PASS and every PASS_TO_PASS test succeeded."""
    status = tests_status(task, tests if applied else None)
    resolved = bool(applied and tests is not None and status["FAIL_TO_PASS"]["success"]
                    and not status["FAIL_TO_PASS"]["failure"] and not status["PASS_TO_PASS"]["failure"])
    return {instance_id(task): {
        "patch_is_None": patch is None,
        "patch_exists": bool(patch and patch.strip()),
        "patch_successfully_applied": applied,
        "resolved": resolved,
        "tests_status": status,
    }}


def reference_report(task: Task, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The report SWE-bench's validation of the gold patch gives, from check-tasks' runs of the
    task (``TaskReport.runs``): its first graded reference run's outcomes, the reference as the
    patch. None for a task without FAIL_TO_PASS / PASS_TO_PASS lists or no graded reference run."""
    from verify_cli.grading.junit import Outcome

    if TestLists.of(task.test) is None:
        return None
    for run in runs:
        if run.get("phase") == "reference" and run.get("status") == "graded":
            tests = [TestOutcome(str(t["id"]), Outcome(t["outcome"])) for t in run.get("tests") or []]
            patch_file = task.root / "solution.patch"
            patch = patch_file.read_text(encoding="utf-8", errors="replace") if patch_file.is_file() else "solution/"
            return instance_report(task, tests, patch=patch, applied=True)
    return None


def write_instance_report(folder: Path, report: Mapping[str, Any]) -> Path:
    """Write ``report`` as ``folder/report.json`` (the folder made); its path."""
    from verify_cli.report.files import write_json

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / REPORT_FILE
    write_json(path, dict(report))
    return path


def run_summary(reports: Sequence[Mapping[str, Any]], *, submitted: Sequence[str], total: int,
                errors: Sequence[str] = (), missing: Sequence[str] = ()) -> dict[str, Any]:
    """The run's summary in the keys of SWE-bench's ``<model>.<run_id>.json``."""
    by_id = {iid: body for report in reports for iid, body in report.items()}
    resolved = sorted(i for i, b in by_id.items() if b["resolved"])
    empty = sorted(i for i, b in by_id.items() if not b["patch_exists"])
    completed = sorted(i for i, b in by_id.items() if b["patch_exists"] and i not in set(errors))
    return {
        "total_instances": total, "submitted_instances": len(submitted),
        "completed_instances": len(completed), "resolved_instances": len(resolved),
        "unresolved_instances": len(completed) - len(resolved), "empty_patch_instances": len(empty),
        "error_instances": len(errors), "completed_ids": completed, "incomplete_ids": sorted(missing),
        "empty_patch_ids": empty, "submitted_ids": sorted(submitted), "resolved_ids": resolved,
        "unresolved_ids": sorted(set(completed) - set(resolved)), "error_ids": sorted(errors),
        "schema_version": 2,
    }
