"""Repository tasks at scale: check-tasks on a 200-file project, and the per-candidate cost of
laying out its work folder.

    python scripts/bench_repo_tasks.py [--files 200] [--layouts 200] [--repeats 3] [--sandbox bwrap]
                                       [--ceiling 60]

It builds a repository task here (a package of ``--files`` modules in subpackages, a test
suite, a gold patch, FAIL_TO_PASS/PASS_TO_PASS lists; also packed as a git bundle) and prints:

- check-tasks wall time, cold (a fresh interpreter per run) and warm (``Grader(warm=True)``);
- the bundle's first unpack against a cached load;
- lay_out per candidate: ``grading.workspace.lay_out`` against the ways one could lay out the
  same files (a plain ``shutil.copyfile`` loop, the layout before this change, hard links), as
  ratios to the plain copy measured in the same run. Hard links are shown only as the floor:
  the trust rule forbids them (a candidate-writable file linked to the task's pristine file
  would let a candidate rewrite the task).

- audit's hanging probe (``sleep-past-timeout``) on the task with its wall limit raised to
  ``--ceiling`` seconds (an imported repository task has 900 s): its run under the task's ceiling
  (the baseline: how probes ran before) against its run under the limit audit now derives from
  the reference's measured time, as a ratio.

Timings on a shared machine are noisy; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from verify_cli.checks import CheckOptions, check_tasks
from verify_cli.checks.audit.mutation import derived_wall_seconds
from verify_cli.checks.audit.probing import probe_requests
from verify_cli.grading import Grader, Phase, lay_out
from verify_cli.sandbox import create_sandbox
from verify_cli.tasks import Task, load_task

TOML = '''schema_version = 1
id = "bench/repo-{files}"
domain = "coding"
language = "python"
editable = ["proj/**/*.py"]
{repository}
[environment]
image = "verify-cli/python:3.11"
runtime = "python"

[test]
command = 'python -m pytest -q -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests'
framework = "pytest"
results = "junit.xml"
fail_to_pass = ["tests/test_core.py::test_scaled"]
pass_to_pass = ["tests/test_core.py::test_plain", "tests/test_core.py::test_many"]

[scoring]
policy = "swebench"

[limits]
wall_seconds = 120
'''

TESTS = '''import importlib

from proj.pkg00 import mod00


def test_plain():
    assert mod00.value(2) == 2


def test_scaled():
    assert mod00.scaled(2) == 6


def test_many():
    for name in ("proj.pkg01.mod01", "proj.pkg02.mod02"):
        assert importlib.import_module(name).value(1) == 1
'''


def module(i: int, j: int, fixed: bool) -> str:
    factor = 3 if fixed else 2
    body = "".join(f"\n\ndef helper_{k}(x):\n    return x + {k}\n" for k in range(8))
    return f'"""Module {j} of package {i}."""\n\n\ndef value(x):\n    return x\n\n\ndef scaled(x):\n' \
           f'    return x * {factor}\n{body}'


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "HOME": str(cwd)}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def build_task(root: Path, files: int, packed: bool) -> Path:
    """A repository task of ``files`` starter files (plain starter/, or a git bundle)."""
    src = root / "src"
    packages = max(1, files // 10)
    for i in range(packages):
        pkg = src / "proj" / f"pkg{i:02d}"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        for j in range(9):
            (pkg / f"mod{j:02d}.py").write_text(module(i, j, fixed=False))
    (src / "proj" / "__init__.py").write_text("")
    git(src, "init", "-q")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "base")
    base = git(src, "rev-parse", "HEAD").strip()
    (src / "proj" / "pkg00" / "mod00.py").write_text(module(0, 0, fixed=True))
    patch = git(src, "diff")
    git(src, "checkout", "-q", "--", ".")
    task = root / ("packed" if packed else "plain")
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "test_core.py").write_text(TESTS)
    (task / "solution.patch").write_text(patch)
    (task / "prompt.md").write_text("Make scaled() triple its argument.\n")
    repository = ""
    if packed:
        git(src, "bundle", "create", "-q", str(task / "repo.bundle"), "--all")
        repository = f'\n[repository]\nbundle = "repo.bundle"\nbase_commit = "{base}"\n'
    else:
        shutil.copytree(src, task / "starter", ignore=shutil.ignore_patterns(".git"))
    (task / "task.toml").write_text(TOML.format(files=files, repository=repository))
    return task


# ---------------------------------------------------------------------------------------------
# Ways to lay out one candidate's work folder

def plain_copy(task: Task, root: Path, candidate: dict[str, bytes]) -> None:
    """The simplest correct layout: copy every file with shutil (the baseline of the ratios)."""
    for rel, src in [*task.starter_files().items()]:
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    for rel, data in candidate.items():
        (root / rel).write_bytes(data)
    for rel, src in task.test_files().items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)


def previous_lay_out(task: Task, root: Path, candidate: dict[str, bytes]) -> None:
    """lay_out before the repository work: per file, a folder check, an unlink attempt and
    shutil.copyfile (same-file and special-file checks, then sendfile)."""
    def fresh(rel: str) -> str:
        dest = os.path.join(root, rel)
        if not os.path.isdir(os.path.dirname(dest)):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest)
        return dest

    for rel, src in task.starter_files().items():
        shutil.copyfile(src, fresh(rel))
    for rel, data in candidate.items():
        with open(fresh(rel), "wb") as fh:
            fh.write(data)
    for rel, src in task.test_files().items():
        shutil.copyfile(src, fresh(rel))


def hard_links(task: Task, root: Path, candidate: dict[str, bytes]) -> None:
    """The floor, and forbidden: starter files hard-linked to the pristine task."""
    for rel, src in task.starter_files().items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.link(src, dest)
    for rel, data in candidate.items():
        (root / rel).unlink()
        (root / rel).write_bytes(data)
    for rel, src in task.test_files().items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)


def grader_lay_out(task: Task, root: Path, candidate: dict[str, bytes]) -> None:
    lay_out(task, Phase.CANDIDATE, root, candidate)


def time_layout(fn: Callable[[Task, Path, dict[str, bytes]], None], task: Task, n: int,
                scratch: Path) -> float:
    """Median seconds of one layout into a fresh folder (the folder's removal not counted)."""
    candidate = {"proj/pkg00/mod00.py": module(0, 0, fixed=True).encode()}
    times = []
    for i in range(n):
        root = scratch / f"run{i}"
        root.mkdir()
        started = time.perf_counter()
        fn(task, root, candidate)
        times.append(time.perf_counter() - started)
        shutil.rmtree(root)
    return statistics.median(times)


@contextlib.contextmanager
def timed() -> Iterator[list[float]]:
    out: list[float] = []
    started = time.perf_counter()
    yield out
    out.append(time.perf_counter() - started)


def hanging_probe(task: Task, box: object, ceiling: float) -> None:
    """audit's sleep-past-timeout probe under the task's ceiling, then under the derived limit."""
    from dataclasses import replace

    from verify_cli.grading import GradeRequest

    raised = replace(task, limits=replace(task.limits, wall_seconds=ceiling))
    with Grader(box) as grader:  # type: ignore[arg-type]
        reference = grader.grade(GradeRequest(raised, Phase.REFERENCE))
        derived = derived_wall_seconds(raised, reference.run.wall_seconds)
        print(f"\naudit's hanging probe (task ceiling {ceiling:g} s; reference {reference.run.wall_seconds:.2f} s, "
              f"derived limit {derived:.1f} s):")
        base = None
        for label, wall in (("task's ceiling (baseline)", None), ("derived limit (now)", derived)):
            ((_probe, request),) = probe_requests(raised, frozenset({"sleep-past-timeout"}), "bench", wall)
            with timed() as t:
                result = grader.grade(request)
            base = base or t[0]
            print(f"  {label:<26} {t[0]:7.2f} s  {t[0] / base:5.2f}x  score {result.score}  "
                  f"({result.run.verdict.value})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--layouts", type=int, default=200, help="Layouts timed per method.")
    parser.add_argument("--repeats", type=int, default=3, help="check-tasks reference runs.")
    parser.add_argument("--sandbox", default="bwrap")
    parser.add_argument("--ceiling", type=float, default=60.0,
                        help="The task's wall limit for the hanging-probe measure (seconds).")
    args = parser.parse_args()
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None  # where grading lays out work folders
    work = Path(tempfile.mkdtemp(prefix="verify-bench-repo-", dir=shm))
    os.environ["VERIFY_REPO_CACHE"] = str(work / "cache")
    try:
        plain = load_task(build_task(work / "a", args.files, packed=False))
        n_files = len(plain.starter_files())
        print(f"repository task: {n_files} starter files, {len(plain.test_files())} test file(s)")

        packed_root = build_task(work / "b", args.files, packed=True)
        with timed() as first:
            load_task(packed_root).starter_files()
        with timed() as again:
            load_task(packed_root).starter_files()
        print(f"git bundle starter: first unpack {first[0] * 1000:.0f} ms, cached load {again[0] * 1000:.1f} ms")

        scratch = Path(tempfile.mkdtemp(prefix="verify-bench-layout-", dir=shm))
        try:
            methods = {"shutil.copyfile loop (baseline)": plain_copy,
                       "previous lay_out": previous_lay_out, "grading lay_out (now)": grader_lay_out,
                       "hard links (forbidden; floor)": hard_links}
            base = None
            print(f"\nlay_out per candidate ({args.layouts} layouts each, median, into {scratch.parent}):")
            for name, fn in methods.items():
                seconds = time_layout(fn, plain, args.layouts, scratch)
                base = base or seconds
                print(f"  {name:<34} {seconds * 1000:8.2f} ms  {seconds / base:5.2f}x")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

        options = CheckOptions(repeats=args.repeats, jobs=1, first_wave=args.repeats)
        with create_sandbox(args.sandbox) as box:
            print(f"\ncheck-tasks ({args.repeats} reference runs + starter, jobs 1, {args.sandbox}):")
            for label, warm in (("cold", False), ("warm", True)):
                with Grader(box, warm=warm) as grader:
                    with timed() as t:
                        (report,) = check_tasks([plain], grader, options)
                    stats = grader.warm_stats
                how = f", {stats}" if stats is not None else ""
                print(f"  {label:<5} {t[0]:6.2f} s  verdict {report.verdict.value}  "
                      f"({t[0] / (args.repeats + 1) * 1000:.0f} ms a run{how})")
            hanging_probe(plain, box, args.ceiling)
    finally:
        for dirpath, _dirs, _files in os.walk(work):
            os.chmod(dirpath, 0o755)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
