"""Terminal-Bench 1 task folders read as they are: ``task.yaml`` (the instruction, timeouts,
metadata), a top-level ``Dockerfile`` (its folder the build context), ``run-tests.sh`` (the
verifier: its exit status is the reward), ``solution.sh`` (the oracle) and ``tests/``. They are
graded as Harbor tasks (:mod:`~verify_cli.formats.harbor.verifier`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verify_cli.errors import TaskFormatError
from verify_cli.formats.harbor.config import DEFAULT_IMAGE, HARBOR_KIND, RESULTS_FILE, task_id_of
from verify_cli.formats.harbor.dockerfile import dockerfile_workdir
from verify_cli.formats.harbor.spec import (
    AGENT_SCRIPT,
    DEFAULT_WORKDIR,
    TB1_SOLUTION,
    TB1_SPEC,
    TB1_TESTS,
    TERMINAL_BENCH,
    HarborSpec,
)
from verify_cli.tasks.model import TASK_FILE, Environment, Scoring, ScoringPolicy, Task, TaskLimits, TestSpec

#: task.yaml keys Harbor has no field for (reported as not honoured).
_RUN_OPTIONS = ("parser_name", "run_tests_in_same_shell", "disable_asciinema", "expert_time_estimate_min",
                "junior_time_estimate_min")


def is_terminal_bench_folder(folder: Path) -> bool:
    """A Terminal-Bench 1 task: task.yaml, run-tests.sh and a Dockerfile, and no task.toml."""
    folder = Path(folder)
    return ((folder / TB1_SPEC).is_file() and (folder / TB1_TESTS).is_file() and (folder / "Dockerfile").is_file()
            and not (folder / TASK_FILE).is_file())


def _float(spec: dict[str, Any], key: str, default: float, spec_file: Path) -> float:
    value = spec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise TaskFormatError(str(spec_file), f"{key} must be a positive number, not {value!r}", pointer=f"/{key}")
    return float(value)


def instruction_of(spec: dict[str, Any]) -> str:
    """The instruction of a task.yaml (``instruction``, or the first of ``descriptions``)."""
    text = spec.get("instruction")
    if not text and isinstance(spec.get("descriptions"), list) and spec["descriptions"]:
        first = spec["descriptions"][0]
        text = first.get("description") if isinstance(first, dict) else None
    return str(text or "")


def load_terminal_bench_task(folder: Path) -> Task:
    """Load the Terminal-Bench 1 folder ``folder``, or raise TaskFormatError saying what and where."""
    import yaml

    folder = Path(folder)
    spec_file = folder / TB1_SPEC
    try:
        data = yaml.safe_load(spec_file.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise TaskFormatError(str(spec_file), f"not a Terminal-Bench task.yaml: {e}") from None
    if not isinstance(data, dict):
        raise TaskFormatError(str(spec_file), "task.yaml is not a mapping")
    instruction = instruction_of(data)
    if not instruction:
        raise TaskFormatError(str(spec_file), "no instruction", pointer="/instruction")
    if not (folder / TB1_SOLUTION).is_file():
        raise TaskFormatError(str(folder / TB1_SOLUTION), "missing solution.sh (the oracle)",
                              hint="solution.yaml command lists are not read: write them as solution.sh")
    workdir = dockerfile_workdir((folder / "Dockerfile").read_text(encoding="utf-8", errors="replace"),
                                 DEFAULT_WORKDIR)
    meta = {k: data[k] for k in ("author_name", "author_email", "difficulty", "category", "tags") if k in data}
    harbor = HarborSpec(
        schema_version="terminal-bench-1", metadata=meta,
        agent_timeout_sec=_float(data, "max_agent_timeout_sec", 360.0, spec_file),
        verifier_timeout_sec=_float(data, "max_test_timeout_sec", 180.0, spec_file),
        workdir=workdir if workdir not in ("/", "") else DEFAULT_WORKDIR,
        unsupported={k: "a Terminal-Bench 1 run option, not honoured" for k in _RUN_OPTIONS if k in data},
        dockerfile="Dockerfile", layout=TERMINAL_BENCH, instruction=instruction.rstrip() + "\n")
    tags = data.get("tags") or []
    return Task(
        root=folder, schema_version=1, id=task_id_of(folder, harbor), domain=str(data.get("category") or "terminal"),
        language="shell", tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        environment=Environment(image=DEFAULT_IMAGE, runtime="shell", dockerfile="Dockerfile"),
        test=TestSpec(command=f"bash {TB1_TESTS}", results=RESULTS_FILE), scoring=Scoring(ScoringPolicy.FRACTION),
        limits=TaskLimits(wall_seconds=harbor.verifier_timeout_sec + (harbor.agent_timeout_sec or 0.0),
                          memory_mb=harbor.memory_mb, processes=1024),
        editable=(AGENT_SCRIPT, "**"), kind=HARBOR_KIND, harbor=harbor)


__all__ = ["instruction_of", "is_terminal_bench_folder", "load_terminal_bench_task"]
