"""Two-process grading: which runs get it, and what each side of such a run is given.

The tests run in the trusted process (the task's own test command plus a stand-in plugin of
its kind); the candidate runs in a sandbox of its own, started by the backend from the
RunSpec's :class:`~verify_cli.sandbox.base.CandidateProcess` (docs/wire-protocol.md). What is
kind-specific (the candidate server's command, the trusted side's plugin) is the task kind's
:class:`~verify_cli.kinds.base.TwoProcessRuntime` (:meth:`Kind.two_process_runtime
<verify_cli.kinds.base.Kind.two_process_runtime>`), so a kind plugs in without touching the
grader or the backends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from verify_cli.kinds.base import TwoProcessRuntime
from verify_cli.kinds.registry import kind_of
from verify_cli.sandbox.base import CandidateProcess, Sandbox
from verify_cli.tasks.model import HIDDEN_TESTS_DIR, TESTS_DIR, Isolation, Task
from verify_cli.tasks.paths import matches_any

IN_PROCESS = "in-process"
TWO_PROCESS = "two-process"
#: The trusted side's note that the candidate server never came up (an infrastructure fault);
#: the same name as verify_standin_trace.NO_CANDIDATE_FILE.
NO_CANDIDATE_FILE = "verify-no-candidate-process.txt"


@dataclass(frozen=True)
class IsolationPlan:
    """How one run is isolated: the mode, and what does not hold (or why it fell back)."""

    mode: str
    notes: tuple[str, ...] = ()
    runtime: TwoProcessRuntime | None = field(default=None, compare=False)

    @property
    def two_process(self) -> bool:
        return self.mode == TWO_PROCESS


def plan_isolation(task: Task, sandbox: Sandbox, *, coverage: bool = False) -> IsolationPlan:
    """Two-process where the task, its kind and the backend allow it; in-process with the
    reason otherwise. ``coverage`` (per-test line coverage of the candidate's files, traced in
    the test process) needs in-process."""
    if coverage:
        return IsolationPlan(IN_PROCESS, ("line coverage is traced in the test process: in-process",))
    if task.isolation is Isolation.IN_PROCESS:
        return IsolationPlan(IN_PROCESS, ("the task declares isolation = \"in-process\": its tests "
                                          "share a process with the candidate's code (trusts it)",))
    runtime = kind_of(task).two_process_runtime(task)
    if runtime is None:
        return IsolationPlan(IN_PROCESS, (f"task kind {str(task.kind)!r} has no two-process "
                                          "runtime: the candidate's code runs in the test process",))
    if not sandbox.two_process:
        why = sandbox.two_process_missing or f"the {sandbox.name} backend does not run two-process yet"
        return IsolationPlan(IN_PROCESS, (f"{why}: the candidate's code runs in the test process",))
    return IsolationPlan(TWO_PROCESS, tuple(sandbox.two_process_gaps), runtime)


def candidate_process(task: Task, plan: IsolationPlan, env: dict[str, str], root: Path) -> CandidateProcess:
    """The candidate side of a two-process run laid out in ``root``; ``env`` is the run's (only
    the hash seed is passed on, never a secret)."""
    assert plan.runtime is not None
    passed = {k: v for k, v in env.items() if k in ("PYTHONHASHSEED",)}
    # The trusted side's configuration (Kind.trusted_files): read-only to the candidate.
    trusted = [rel for rel in kind_of(task).trusted_files(task) if (root / rel).is_file()]
    private = tuple(rel for rel in _editable_files(task, root)
                    if rel.endswith(plan.runtime.code_suffixes)) if plan.runtime.code_suffixes else ()
    return CandidateProcess(command=plan.runtime.server_command,
                            hidden=(TESTS_DIR, HIDDEN_TESTS_DIR), env=passed, private=private,
                            protected=tuple(sorted({*_shipped_files(task, root), *trusted})))


def _shipped_files(task: Task, root: Path) -> list[str]:
    """Regular files of the laid-out work folder outside the test folders and the editable globs
    (what the task ships: the candidate may read them, never change them)."""
    out: list[str] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not path.is_symlink() and rel.split("/", 1)[0] not in (
                TESTS_DIR, HIDDEN_TESTS_DIR) and not matches_any(task.editable, rel) and "__pycache__" not in rel:
            out.append(rel)
    return out


def _editable_files(task: Task, root: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not path.is_symlink() and rel.split("/", 1)[0] not in (
                TESTS_DIR, HIDDEN_TESTS_DIR) and matches_any(task.editable, rel):
            out.append(rel)
    return out


def python_candidate_modules(task: Task, root: Path) -> list[str]:
    """Dotted names of the editable Python modules laid out in ``root`` (packages included)."""
    names: set[str] = set()
    for rel in _editable_files(task, root):
        if not rel.endswith(".py"):
            continue
        parts = rel[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts):
            names.add(".".join(parts))
    return sorted(names)


__all__ = ["IN_PROCESS", "NO_CANDIDATE_FILE", "TWO_PROCESS", "IsolationPlan", "TwoProcessRuntime",
           "candidate_process", "plan_isolation", "python_candidate_modules"]
