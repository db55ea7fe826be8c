"""The public API: every name a library user may import is in ``verify_cli.__all__`` or a public
package's ``__all__``, and imports; the names are pinned here, so that adding or dropping one is
a decision someone makes (edit ``PINNED``), never a side effect."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

import pytest

import verify_cli
from verify_cli._exports import INTERNAL_PACKAGES, PUBLIC_PACKAGES
from verify_cli.sandbox import Sandbox, registry

REQUIRED = {
    "Grader", "GradeRequest", "GradeResult", "load_task", "load_task_set", "Task", "create_sandbox",
    "register_sandbox", "Sandbox", "RunSpec", "RunResult", "Verdict", "VerifyError",
    "create_model_backend", "create_executor", "check_tasks", "audit_tasks", "__version__",
}


#: every public name, by the package it is imported from (see verify_cli/_exports.py for the rule)
PINNED: dict[str, set[str]] = {
    "verify_cli": {
        "AuditOptions", "Availability", "CheckOptions", "Completion", "Executor", "ExitCode",
        "GradeRequest", "GradeResult", "GradeStatus", "Grader", "Limits", "ModelBackend", "Outcome",
        "Phase", "RunResult", "RunSpec", "SamplingParams", "Sandbox", "SandboxUnavailableError",
        "Task", "TaskFormatError", "TaskLoadFailure", "TestOutcome", "UsageError", "Verdict",
        "VerifyError", "__version__", "audit_tasks", "check_tasks", "create_executor",
        "create_model_backend", "create_sandbox", "discover_task_dirs", "load_task", "load_task_set",
        "model_backend_names", "register_sandbox", "sandbox_names",
    },
    "verify_cli.tasks": {
        "Environment", "Isolation", "RepositorySpec", "Scoring", "ScoringPolicy", "Task", "TaskLimits",
        "TaskLoadFailure", "TestSpec", "discover_task_dirs", "load_task", "load_task_set",
    },
    "verify_cli.sandbox": {
        "Availability", "CapturedOutput", "ENTRY_POINT_GROUP", "HARNESS_DIR", "LEVERS", "LEVERS_OFF_ENV", "Limits",
        "RunResult",
        "RunSpec", "Sandbox", "SandboxSpec", "Verdict", "WARM_CANDIDATE_ENV", "create_sandbox", "pinned_environment",
        "register_sandbox", "resolve_backend_name", "runtime_path", "sandbox_class", "sandbox_names", "sandbox_spec",
        "ExecResult", "ExecVerdict", "Session", "SessionDeadError", "SessionInfraError", "SessionLimits",
        "SessionState",
    },
    "verify_cli.environments": {
        "IMAGE", "PREFIX", "ROOTFS", "EnvironmentSpec", "EnvironmentStore", "Environments", "Realised",
        "StoredEnvironment", "default_store_dir", "form_for", "spec_of",
    },
    "verify_cli.kinds": {
        "BUILTIN_KINDS", "KINDS", "Kind", "TwoProcessRuntime", "kind_names", "kind_of", "register_kind",
    },
    "verify_cli.grading": {
        "CandidatePatchError", "GradeRequest", "GradeResult", "GradeStatus", "Grader", "Outcome", "Phase",
        "REMOVED_FILE", "ModedFile", "is_removed",
        "TestOutcome", "WarmRunner", "apply_candidate_patch", "candidate_from_patch", "judge", "junit_id_of_node_id",
        "lay_out",
        "parse_junit", "parse_pytest_command", "run_environment",
        "solution_as_candidate", "task_limits",
    },
    "verify_cli.checks": {
        "AuditOptions", "CheckOptions", "DEFAULT_REPEATS", "MutationReport", "TaskVerdict",
        "audit_tasks", "check_tasks", "default_cache_dir", "detection_power",
    },
    "verify_cli.models": {
        "Completion", "ModelBackend", "Prompt", "SamplingParams", "build_prompt", "build_tiny_model",
        "create_model_backend", "extract_for_task", "files_to_candidate", "model_backend_class",
        "model_backend_config", "model_backend_names", "register_model_backend",
    },
    "verify_cli.executors": {
        "ClusterError", "EXECUTOR_NAMES", "Executor", "ExecutorStats", "ExecutorUnavailableError", "LocalExecutor",
        "RayExecutor", "ResultCallback", "create_executor", "import_ray",
    },
    "verify_cli.agents": {
        "AgentEpisode", "AgentModel", "AgentTurn", "EpisodeJob", "EpisodeLimits", "EpisodeOutcome", "ModelTurn",
        "TOOLS", "TaskEnvironment", "ToolCall", "ToolSpec", "agent_model", "run_episode", "run_episodes",
    },
    "verify_cli.rollout": {
        "GRPOConfig", "PolicyUpdater", "SamplingOptions", "StepReport", "TrainConfig", "Trainer",
        "derive_seed",
    },
    "verify_cli.sampling": {
        "AnswerStep", "GradedSample", "RetryPolicy", "SampleStatus", "SampleStep", "StreamTiming",
        "TRAJECTORY_LABELS", "check_supply", "derive_seed", "generate_and_grade", "grade_files",
        "grade_with_retries", "sample_seed", "status_of",
    },
    "verify_cli.difficulty": {
        # derive_seed (task hash, first sample) is gone: the one derivation is verify_cli.sampling's
        "DifficultyOptions", "SampleCache", "SampleRecord", "grade_sample", "run_difficulty", "sample_seed",
    },
    "verify_cli.importers": {
        "ImportReport", "ImportStopped", "PRESETS", "Preset", "RowError", "RowFailure", "TaskDraft",
        "humaneval_data_file", "import_rows", "parse_mapping", "read_rows",
    },
    "verify_cli.exporters": {
        "ExportFormat", "ExportReport", "export_tasks",
    },
    "verify_cli.service": {
        "GradingService", "ServiceConfig", "ServiceError", "create_app",
    },
    "verify_cli.client": {
        "AsyncVerifyClient", "ServiceRequestError", "ServiceUnavailableError", "VerifyClient", "candidate",
    },
    "verify_cli.adapters": {
        "CompletionGrader", "RewardInfraError", "TaskAction", "TaskObservation", "VerifyCliEnvClient",
        "VerifyCliEnvironment", "VerifyCliReward", "VerifyCliTaskEnvironment", "VerifyCliTool",
        "compute_score", "compute_score_batch", "create_openenv_app", "tool_config", "tools_kwargs",
    },
}


@pytest.mark.parametrize("package", PINNED)
def test_the_public_names_are_the_pinned_ones(package: str) -> None:
    names = set(importlib.import_module(package).__all__)
    assert names - PINNED[package] == set(), "a new public name: add it to PINNED (it is API now)"
    assert PINNED[package] - names == set(), "a public name is gone: callers break; drop it from PINNED"


def test_every_subpackage_is_public_or_internal() -> None:
    subpackages = {f"verify_cli.{m.name}" for m in pkgutil.iter_modules(verify_cli.__path__)
                   if m.ispkg and not m.name.startswith("_")}
    assert subpackages == set(PUBLIC_PACKAGES) | set(INTERNAL_PACKAGES), (
        "name a new subpackage in verify_cli/_exports.py: PUBLIC_PACKAGES or INTERNAL_PACKAGES")
    assert set(PUBLIC_PACKAGES) & set(INTERNAL_PACKAGES) == set()
    assert set(PINNED) == {"verify_cli", *PUBLIC_PACKAGES}


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_a_public_package_exports_no_private_name_and_each_imports(package: str) -> None:
    module = importlib.import_module(package)
    assert [n for n in module.__all__ if n.startswith("_")] == []
    assert [n for n in module.__all__ if not hasattr(module, n)] == []


def test_the_rule_is_stated_where_a_user_reads_it() -> None:
    doc = verify_cli.__doc__ or ""
    for package in (*PUBLIC_PACKAGES, *INTERNAL_PACKAGES):
        assert package.removeprefix("verify_cli") in doc, package


def test_required_public_names_are_in_all() -> None:
    assert set(verify_cli.__all__) >= REQUIRED, REQUIRED - set(verify_cli.__all__)


@pytest.mark.parametrize("name", verify_cli.__all__)
def test_every_public_name_imports(name: str) -> None:
    assert getattr(verify_cli, name) is not None


def test_unknown_names_are_attribute_errors() -> None:
    with pytest.raises(AttributeError):
        _ = verify_cli.not_a_public_name  # type: ignore[attr-defined]


PLUGIN = '''
from verify_cli import RunResult, RunSpec, Sandbox


class PluggedSandbox(Sandbox):
    """A third-party backend found through the entry-point group."""

    def run(self, spec: RunSpec) -> RunResult:
        raise NotImplementedError
'''


def test_third_party_backends_plug_in_through_entry_points(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plugged_backend.py").write_text(PLUGIN)
    dist = tmp_path / "plugged_backend-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugged-backend\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[verify_cli.sandboxes]\nplugged = plugged_backend:PluggedSandbox\n"
        "broken = plugged_backend:DoesNotExist\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fresh = registry.new_registry()  # the built-ins, and plugins looked up again
    for name, cls in registry.SANDBOXES.items():
        fresh.add(name, cls)
    monkeypatch.setattr(registry, "SANDBOXES", fresh)
    try:
        cls = registry.sandbox_class("plugged")
        assert issubclass(cls, Sandbox) and cls.name == "plugged"
        assert "plugged" in registry.sandbox_names()
        from verify_cli.errors import SandboxUnavailableError

        with pytest.raises(SandboxUnavailableError, match="could not be loaded"):
            registry.sandbox_class("broken")
    finally:
        sys.modules.pop("plugged_backend", None)
