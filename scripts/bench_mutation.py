#!/usr/bin/env python3
"""Benchmark verify-cli's mutation check against mutmut on the same module and tests.

For each sample task (default: coding-interval-merge and coding-roman-numerals) the script
lays out a copy of the reference solution and its tests the way mutmut 3 expects
(``src/`` + ``tests/``, ``[tool.mutmut]`` in pyproject.toml), runs ``mutmut run`` from a
throwaway virtual environment (created under /tmp with ``pip install mutmut pytest`` when
missing), then runs verify-cli's mutation check on the task itself (every mutant, no sampling)
warm and cold, and prints, side by side: mutants, killed, survived, mutation score, wall time
end to end (set-up and reference runs included), mutants per second and the ratios.

    python scripts/bench_mutation.py [--jobs N] [--sandbox auto] [--task NAME ...]

Both tools run ``--jobs`` mutants at once (mutmut: ``--max-children``). verify-cli runs each
mutant in a fresh sandbox (bwrap where available) through the same grading path as a candidate;
mutmut forks an already-started pytest per mutant with no isolation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli import (  # noqa: E402
    AuditOptions,
    audit_tasks,
    create_sandbox,
)
from verify_cli.checks import MutationReport  # noqa: E402
from verify_cli.grading import Grader  # noqa: E402
from verify_cli.sandbox import resolve_backend_name  # noqa: E402
from verify_cli.tasks import load_task  # noqa: E402

VENV = Path(os.environ.get("MUTMUT_VENV", "/tmp/mutmut-venv"))
KILLED = {1, 3, 24, -24, 36, 152, 255, -9, -11}  # killed, timeouts and crashes (mutmut's stats.py)
SURVIVED = {0, 5, 33}  # survived, and "no tests" (ours: not covered, which survive too)


@dataclass
class Row:
    tool: str
    mutants: int
    killed: int
    survived: int
    seconds: float
    note: str = ""
    message_only: int = 0  # survivors that only change an exception's message

    @property
    def like_for_like(self) -> float:
        """The score without message-only mutants (verify-cli never makes those)."""
        judged = self.killed + self.survived - self.message_only
        return 100.0 * self.killed / judged if judged else float("nan")

    @property
    def score(self) -> float:
        judged = self.killed + self.survived
        return 100.0 * self.killed / judged if judged else float("nan")

    @property
    def rate(self) -> float:
        return self.mutants / self.seconds if self.seconds else float("nan")


def ensure_mutmut() -> Path:
    exe = VENV / "bin" / "mutmut"
    if not exe.exists():
        print(f"creating {VENV} with mutmut and pytest ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "mutmut", "pytest"], check=True)
    return exe


def mutmut_project(task_dir: Path, dest: Path) -> None:
    """The task's reference and tests, laid out as mutmut 3 expects."""
    task = load_task(task_dir)
    (dest / "src").mkdir(parents=True)
    for rel, path in task.solution_files().items():
        target = dest / "src" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    folders = [f for f in ("tests", "hidden_tests") if (task_dir / f).is_dir()]
    for folder in folders:
        shutil.copytree(task_dir / folder, dest / folder)
    selection = ", ".join(f'"{f}/"' for f in folders)
    (dest / "pyproject.toml").write_text(
        "[tool.mutmut]\n"
        'source_paths = ["src/"]\n'
        f"pytest_add_cli_args_test_selection = [{selection}]\n"
        f"also_copy = [{selection}]\n\n"
        "[tool.pytest.ini_options]\n"
        'pythonpath = ["src"]\n')


def run_mutmut(exe: Path, task_dir: Path, jobs: int) -> Row:
    with tempfile.TemporaryDirectory(prefix="bench-mutmut-") as tmp:
        project = Path(tmp) / "project"
        mutmut_project(task_dir, project)
        env = {**os.environ, "PATH": f"{exe.parent}:{os.environ.get('PATH', '')}"}
        env.pop("PYTHONPATH", None)
        start = time.monotonic()
        proc = subprocess.run([str(exe), "run", "--max-children", str(jobs)], cwd=project, env=env,
                              capture_output=True, text=True)
        seconds = time.monotonic() - start
        codes: list[int | None] = []
        for meta in (project / "mutants").rglob("*.meta"):
            codes.extend(json.loads(meta.read_text()).get("exit_code_by_key", {}).values())
        if proc.returncode != 0 or not codes:
            tail = (proc.stdout + proc.stderr)[-2000:]
            raise SystemExit(f"mutmut failed on {task_dir.name} (exit {proc.returncode}):\n{tail}")
        own = re.findall(r"([\d.]+) mutations/second", proc.stdout + proc.stderr)
        note = f"mutmut's own figure (test phase only): {own[-1]} mutants/s" if own else ""
        message_only = 0
        for meta in (project / "mutants").rglob("*.meta"):
            for name, code in json.loads(meta.read_text()).get("exit_code_by_key", {}).items():
                if code in SURVIVED and _message_only(exe, project, env, name):
                    message_only += 1
        return Row("mutmut", len(codes), sum(c in KILLED for c in codes),
                   sum(c in SURVIVED for c in codes), seconds, note, message_only)


def _message_only(exe: Path, project: Path, env: dict[str, str], name: str) -> bool:
    """True when mutant ``name`` only rewrites the message of a ``raise``."""
    shown = subprocess.run([str(exe), "show", name], cwd=project, env=env, capture_output=True, text=True).stdout
    changed = [line[1:].strip() for line in shown.splitlines()
               if line[:1] in "-+" and not line.startswith(("---", "+++"))]
    heads = {m.group(1) if (m := re.match(r"raise (\w+)\(", line)) else None for line in changed}
    return bool(changed) and len(heads) == 1 and None not in heads


def run_verify(task_dir: Path, backend: str, jobs: int, warm: bool) -> tuple[Row, MutationReport]:
    options = AuditOptions(flaky=False, probes=False, labelled=False, max_mutants=None, jobs=jobs)
    with create_sandbox(backend) as box, Grader(box, warm=warm) as grader:
        start = time.monotonic()
        (audit,) = audit_tasks([load_task(task_dir)], grader, options)
        seconds = time.monotonic() - start
    m = audit.mutation
    if m is None or m.score is None:
        raise SystemExit(f"verify-cli measured nothing on {task_dir.name}: {audit.problems}")
    not_run = sum(x.status.value == "not_covered" for x in m.mutants)
    label = f"verify-cli ({backend}, {'warm' if warm else 'cold'})"
    return Row(label, len(m.mutants), m.killed, len(m.survived), seconds,
               f"{m.dropped_uncompilable} uncompilable dropped, {not_run} not covered (no run)"), m


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--sandbox", default="auto")
    parser.add_argument("--task", action="append", help="sample task folder name (repeatable)")
    args = parser.parse_args()
    backend, warning = resolve_backend_name(args.sandbox)
    if warning:
        print(warning, file=sys.stderr)
    exe = ensure_mutmut()
    tasks = args.task or ["coding-interval-merge", "coding-roman-numerals"]
    print(f"mutation benchmark: {args.jobs} job(s), sandbox {backend}, {os.cpu_count()} core(s)\n")
    for name in tasks:
        task_dir = REPO / "sample_tasks" / name
        theirs = run_mutmut(exe, task_dir, args.jobs)
        warm, _ = run_verify(task_dir, backend, args.jobs, warm=True)
        cold, _ = run_verify(task_dir, backend, args.jobs, warm=False)
        print(f"== {name}")
        print(f"   {'tool':32} {'mutants':>7} {'killed':>6} {'survived':>8} {'score':>6} {'wall s':>7} "
              f"{'mutants/s':>9}")
        for row in (theirs, warm, cold):
            print(f"   {row.tool:32} {row.mutants:7d} {row.killed:6d} {row.survived:8d} {row.score:5.1f}% "
                  f"{row.seconds:7.2f} {row.rate:9.2f}   {row.note}")
        for row in (warm, cold):
            print(f"   {row.tool}: {row.rate / theirs.rate:.2f}x mutmut's mutants/s, "
                  f"score {row.score - theirs.score:+.1f} points")
        if theirs.message_only:
            print(f"   like for like: {theirs.message_only} of mutmut's survivors only change an exception "
                  f"message (verify-cli makes no such mutant); without them mutmut scores "
                  f"{theirs.like_for_like:.1f}% ({warm.score - theirs.like_for_like:+.1f} points)")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
