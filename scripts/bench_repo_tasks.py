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

With ``--real-repo PATH`` (a real project's git repository, e.g. a clone of more-itertools) it
instead mines ``--tasks`` SWE-bench rows from the project's recent fix commits (a commit that
changes the package and its tests: the gold patch and the test patch, FAIL_TO_PASS and
PASS_TO_PASS measured by running the touched test files before and after), imports them with
``--preset swebench``, and times check-tasks and audit on them, cold, in minutes.

Timings on a shared machine are noisy; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from verify_cli.checks import CheckOptions, check_tasks
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
    """A candidate that sleeps past its limit under the task's ceiling (what audit's
    sleep-past-timeout probe cost before), then audit's own probe under its derived limit."""
    from dataclasses import replace

    from verify_cli import AuditOptions, audit_tasks
    from verify_cli.grading import GradeRequest

    raised = replace(task, limits=replace(task.limits, wall_seconds=ceiling))
    sleeper = {name: b"import time\ntime.sleep(10 ** 6)\n" for name in sorted(task.solution_files())[:1]}
    print(f"\naudit's hanging probe (task ceiling {ceiling:g} s):")
    with Grader(box) as grader:  # type: ignore[arg-type]
        with timed() as t:
            result = grader.grade(GradeRequest(raised, Phase.PROBE, candidate=sleeper))
        base = t[0]
        print(f"  {'task ceiling (baseline)':<26} {base:7.2f} s  1.00x  score {result.score}  "
              f"({result.run.verdict.value})")
        options = AuditOptions(mutants=False, flaky=False, labelled=False,
                               probe_names=frozenset({"sleep-past-timeout"}))
        with timed() as t:
            (audit,) = audit_tasks([raised], grader, options)
        (probe,) = audit.probes or []
        print(f"  {'audit, derived limit (now)':<26} {t[0]:7.2f} s  {t[0] / base:5.2f}x  score {probe.score}  "
              f"(includes the reference's timing run)")


# ---------------------------------------------------------------------------------------------
# A real project's fix commits as SWE-bench rows (--real-repo): check-tasks and audit, cold

_SUMMARY_LINE = ("PASSED", "FAILED", "ERROR", "XFAIL", "SKIPPED")


def say(text: str) -> None:
    print(text, flush=True)  # a long run shows each phase as it ends


def _statuses(tree: Path, test_files: list[str]) -> dict[str, str]:
    """Node id -> status of ``pytest -rA`` over ``test_files`` in ``tree`` (SWE-bench's parser)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-q", *test_files],
                          cwd=tree, capture_output=True, text=True, timeout=600, check=False)
    out: dict[str, str] = {}
    for line in done.stdout.splitlines():
        if line.startswith(_SUMMARY_LINE):
            parts = line.replace(" - ", " ").split()
            if len(parts) > 1 and "::" in parts[1]:
                out[parts[1]] = parts[0]
    return out


def _tree_at(repo: Path, commit: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(repo), "archive", commit], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)


def _apply(tree: Path, patch: str) -> bool:
    return subprocess.run(["git", "apply", "-"], cwd=tree, input=patch.encode(), capture_output=True,
                          check=False).returncode == 0


def mine_rows(repo: Path, package: str, tests_dir: str, want: int, scan: int, scratch: Path) -> list[dict[str, object]]:
    """Up to ``want`` SWE-bench rows from ``repo``'s recent fix commits (of the last ``scan``): a
    commit that changes ``package``'s modules and ``tests_dir``'s tests, split into the gold patch
    and the test patch; FAIL_TO_PASS / PASS_TO_PASS measured by running the touched test files
    at the parent with the test patch, then with both."""
    def git_out(*args: str) -> str:
        return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True, text=True,
                              check=True).stdout

    rows: list[dict[str, object]] = []
    for n, commit in enumerate(git_out("log", "--no-merges", "--format=%H", f"-n{scan}", "HEAD").split()):
        if len(rows) >= want:
            break
        parents = git_out("rev-list", "--parents", "-n1", commit).split()[1:]
        if len(parents) != 1:
            continue
        changed = git_out("diff", "--name-only", parents[0], commit).split()
        source = [f for f in changed if f.startswith(f"{package}/") and f.endswith(".py")]
        tests = [f for f in changed if f.startswith(f"{tests_dir}/") and f.endswith(".py")]
        if not source or not tests or len(changed) != len(source) + len(tests):
            continue
        gold = git_out("diff", parents[0], commit, "--", *source)
        test_patch = git_out("diff", parents[0], commit, "--", *tests)
        tree = scratch / f"mine{n}"
        _tree_at(repo, parents[0], tree)
        if not _apply(tree, test_patch):
            continue
        before = _statuses(tree, tests)
        if not _apply(tree, gold):
            continue
        after = _statuses(tree, tests)
        shutil.rmtree(tree, ignore_errors=True)
        f2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED")
        p2p = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
        if f2p and all(" " not in t for t in f2p + p2p):
            rows.append({"instance_id": f"{repo.parent.name.split('+')[-1]}-{commit[:10]}",
                         "repo": f"bench/{package}", "base_commit": parents[0], "patch": gold,
                         "test_patch": test_patch, "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p,
                         "problem_statement": git_out("log", "-1", "--format=%B", commit)})
    return rows


def real_repo(args: argparse.Namespace, work: Path) -> None:
    """Mine ``--tasks`` rows from ``--real-repo``, import them, then check-tasks and audit cold."""
    from verify_cli import AuditOptions, audit_tasks
    from verify_cli.importers import import_rows
    from verify_cli.tasks import load_task_set

    repo = Path(args.real_repo).resolve()
    if subprocess.run(["git", "--git-dir", str(repo), "rev-parse"], capture_output=True).returncode != 0:
        repo = repo / ".git"
    saved = Path(args.rows) if args.rows else None
    if saved is not None and saved.is_file():
        rows = [json.loads(line) for line in saved.read_text().splitlines() if line.strip()][:args.tasks]
        say(f"{len(rows)} row(s) read from {saved} (mined before)")
    else:
        with timed() as mining:
            rows = mine_rows(repo, args.package, args.tests_dir, args.tasks, args.scan, work)
        say(f"{len(rows)} row(s) mined from {len(rows) and args.scan} recent commits of {args.real_repo} "
              f"in {mining[0]:.0f} s")
        if saved is not None:
            saved.write_text("".join(json.dumps(r) + "\n" for r in rows))
    clones = work / "repos"
    clones.mkdir()
    (clones / args.package).symlink_to(repo)  # a bare repository is a clone to the importer
    data = work / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = import_rows(str(data), work / "tasks", preset="swebench", repos=clones)
    for failure in report.failures:
        say(f"  row {failure.id}: {failure.reason}")
    tasks = [t for t in load_task_set(work / "tasks") if isinstance(t, Task)]
    with create_sandbox(args.sandbox) as box, Grader(box, warm=False) as grader:
        with timed() as checking:
            reports = check_tasks(tasks, grader, CheckOptions(repeats=args.repeats, jobs=args.jobs))
        counts: dict[str, int] = {}
        for r in reports:
            counts[r.verdict.value] = counts.get(r.verdict.value, 0) + 1
        say(f"check-tasks, cold ({len(tasks)} tasks, {args.repeats} reference runs each, jobs {args.jobs}, "
              f"{args.sandbox}): {checking[0] / 60:.1f} min; {counts}")
        for r in reports:
            if r.defects:
                say(f"  {r.task_id}: {'; '.join(f'{c.name}: {c.message}'[:160] for c in r.defects)}")
        options = AuditOptions(reruns=0, max_mutants=args.max_mutants, jobs=args.jobs, labelled=False)
        with timed() as auditing:
            audits = audit_tasks(tasks, grader, options)
        kills = [a.mutation.score for a in audits if a.mutation is not None and a.mutation.score is not None]
        say(f"audit, cold (mutants <= {args.max_mutants} of the files each gold patch touches, probes; "
              f"jobs {args.jobs}): {auditing[0] / 60:.1f} min; mutation scores "
              f"{', '.join(f'{k:.0f}%' for k in kills) or '-'}; probes scoring: "
              f"{sum(1 for a in audits for p in a.probes or [] if p.hacked)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--layouts", type=int, default=200, help="Layouts timed per method.")
    parser.add_argument("--repeats", type=int, default=3, help="check-tasks reference runs.")
    parser.add_argument("--sandbox", default="bwrap")
    parser.add_argument("--ceiling", type=float, default=60.0,
                        help="The task's wall limit for the hanging-probe measure (seconds).")
    parser.add_argument("--real-repo", help="A real project's git repository (bare or not): mine its fix commits "
                                            "into SWE-bench rows, then time check-tasks and audit on them, cold.")
    parser.add_argument("--package", default="more_itertools", help="--real-repo: the package folder.")
    parser.add_argument("--tests-dir", default="tests", help="--real-repo: the tests folder.")
    parser.add_argument("--tasks", type=int, default=10, help="--real-repo: rows to mine.")
    parser.add_argument("--scan", type=int, default=300, help="--real-repo: recent commits to look through.")
    parser.add_argument("--max-mutants", type=int, default=50, help="--real-repo: audit's mutants per task.")
    parser.add_argument("--jobs", type=int, default=2, help="--real-repo: sandboxed runs at once.")
    parser.add_argument("--rows", help="--real-repo: a JSONL file of mined rows: read when it exists (no mining), "
                                       "else written after mining, so a second run times the same set.")
    args = parser.parse_args()
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None  # where grading lays out work folders
    work = Path(tempfile.mkdtemp(prefix="verify-bench-repo-", dir=shm))
    os.environ["VERIFY_REPO_CACHE"] = str(work / "cache")
    if args.real_repo:
        try:
            real_repo(args, work)
        finally:
            for dirpath, _dirs, _files in os.walk(work):
                os.chmod(dirpath, 0o755)
            shutil.rmtree(work, ignore_errors=True)
        return
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
