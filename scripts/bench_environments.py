#!/usr/bin/env python3
"""Task environments: what a cold build costs, that shared declarations build once, and what a
run in a built environment costs against a run of the same task without one, in one run.

Writes a task set of ``--tasks`` tasks (default 100) sharing three declarations (lxml; rich
pinned; both), and the same tasks with no environment (the baseline: they import only the
standard library). Then, on ``--sandbox`` (default bwrap):

1. builds every environment the set declares into a fresh store (cold): how many builds, their
   seconds, the rest found in the store;
2. realises them again (warm store): seconds for the whole set;
3. runs ``check-tasks --repeats R`` over ``--check`` tasks (default 12) of each set, alternating
   the two (same machine load): wall seconds and the ratio with/without environment.

    python scripts/bench_environments.py [--tasks 100] [--check 12] [--sandbox bwrap]

Timings on a shared machine are noisy; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli.environments import Environments, EnvironmentStore  # noqa: E402
from verify_cli.sandbox import sandbox_class  # noqa: E402
from verify_cli.tasks import Task, load_task_set  # noqa: E402

DECLARATIONS = (["lxml>=5"], ["rich==13.7.1"], ["lxml>=5", "rich==13.7.1"])

TOML = """schema_version = 1
id = "{id}"
domain = "coding"
language = "python"
kind = "pytest"
editable = ["solution.py"]

[environment]
image = "verify-cli/python:3.11"
runtime = "python"
{requirements}
[test]
command = 'python -m pytest -q -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests'
results = "junit.xml"

[scoring]
policy = "all-or-nothing"

[limits]
wall_seconds = 60
"""
FILES = {
    "prompt.md": "Implement total(values).\n",
    "starter/solution.py": "def total(values):\n    raise NotImplementedError\n",
    "solution/solution.py": "def total(values):\n    return sum(values)\n",
    "tests/test_solution.py": ("from solution import total\n\n\n"
                               "def test_total():\n    assert total([1, {n}]) == {m}\n\n\n"
                               "def test_empty():\n    assert total([]) == 0\n"),
}


def write_set(root: Path, count: int, with_environment: bool) -> Path:
    for i in range(count):
        d = root / f"t{i:03d}"
        for rel, text in FILES.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text.format(n=i, m=i + 1))
        reqs = f"requirements = {json.dumps(DECLARATIONS[i % 3])}\n" if with_environment else ""
        (d / "task.toml").write_text(TOML.format(id=f"t{i:03d}", requirements=reqs))
    return root


def check_tasks(path: Path, sandbox: str, repeats: int, store: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "verify_cli", "check-tasks", str(path), "--sandbox", sandbox,
                           "--repeats", str(repeats), "--no-cache"], capture_output=True, text=True,
                          env={**__import__("os").environ, "VERIFY_CLI_ENV_DIR": str(store), "PYTHONPATH": str(REPO)})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"check-tasks {path} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--check", type=int, default=12, help="tasks of each set check-tasks runs")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sandbox", default="bwrap")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-env-") as tmp:
        root = Path(tmp)
        envset = write_set(root / "with", args.tasks, True)
        tasks = [t for t in load_task_set(envset) if isinstance(t, Task)]
        store = EnvironmentStore(root / "store")
        envs = Environments(sandbox_class(args.sandbox), store)
        t0 = time.perf_counter()
        realised = [envs.realise(t) for t in tasks]
        cold = time.perf_counter() - t0
        builds = [r for r in realised if r is not None and r.built]
        t0 = time.perf_counter()
        again = Environments(sandbox_class(args.sandbox), store)
        for t in tasks:
            again.realise(t)
        warm = time.perf_counter() - t0
        envs.close()
        again.close()
        print(f"environments ({args.sandbox}): {len(tasks)} tasks, {len({r.identity for r in realised if r})} "
              f"declarations: {len(builds)} builds ({', '.join(f'{b.seconds:.1f} s' for b in builds)}), "
              f"{len(tasks) - len(builds)} found in the store; cold {cold:.1f} s for the set, "
              f"warm store {warm:.2f} s ({1000 * warm / len(tasks):.1f} ms a task)")
        small_env = write_set(root / "check-with", args.check, True)
        small_plain = write_set(root / "check-without", args.check, False)
        # the environments of the small set are the big set's: already in the store
        plain_times, env_times = [], []
        for _ in range(2):
            plain_times.append(check_tasks(small_plain, args.sandbox, args.repeats, store.root))
            env_times.append(check_tasks(small_env, args.sandbox, args.repeats, store.root))
        plain, env = min(plain_times), min(env_times)
        print(f"check-tasks --repeats {args.repeats} on {args.check} tasks ({args.sandbox}, best of 2): "
              f"no environment {plain:.1f} s, in built environments {env:.1f} s: ratio {env / plain:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
