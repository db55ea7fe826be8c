"""Grading: a phase of a task, run in a sandbox, judged into per-test outcomes and a score."""

from verify_cli.grading.candidate_patch import CandidatePatchError, apply_candidate_patch, candidate_from_patch
from verify_cli.grading.grader import (
    Grader,
    GradeRequest,
    GradeResult,
    GradeStatus,
    judge,
    run_environment,
    task_limits,
)
from verify_cli.grading.junit import Outcome, TestOutcome, junit_id_of_node_id, parse_junit
from verify_cli.grading.warm import WarmRunner
from verify_cli.grading.workspace import Phase, lay_out, solution_as_candidate
from verify_cli.kinds.pytest_command import parse_pytest_command
from verify_cli.tasks.file_states import REMOVED_FILE, ModedFile, is_removed

__all__ = ["REMOVED_FILE", "CandidatePatchError", "GradeRequest", "GradeResult", "GradeStatus", "Grader", "ModedFile",
           "Outcome", "Phase", "TestOutcome", "WarmRunner", "apply_candidate_patch", "candidate_from_patch",
           "is_removed", "judge", "junit_id_of_node_id", "lay_out", "parse_junit", "parse_pytest_command",
           "run_environment", "solution_as_candidate", "task_limits"]
