#!/usr/bin/env python3
"""Dockerfile environments on bwrap (over the image's exported root file system) against docker
and against bwrap with no environment, in one run.

Writes ``--tasks`` tasks (default 8) sharing one Dockerfile (``FROM verify-cli/python:3.11`` plus a
tool under /opt their solutions call), and the same tasks with no environment (the baseline:
verify-cli's own interpreter on bwrap; their solutions do the tool's work in Python). Then:

1. realises the Dockerfile environment for bwrap in a fresh store (cold: the image build and the
   root's export), and again with a fresh store object (warm store);
2. runs ``check-tasks --repeats R`` over each set, alternating (same machine load): bwrap with no
   environment, bwrap over the root, docker in the image (best of 2 each); prints the ratios.

    python scripts/bench_rootfs.py [--tasks 8] [--repeats 3]

Timings on a shared machine are noisy; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli.environments import Environments, EnvironmentStore  # noqa: E402
from verify_cli.sandbox import sandbox_class  # noqa: E402
from verify_cli.tasks import Task, load_task  # noqa: E402

DOCKERFILE = ("FROM verify-cli/python:3.11\nUSER root\n"
              "RUN mkdir -p /opt/tool && printf '#!/bin/sh\\necho \"$(( $1 * 2 ))\"\\n' > /opt/tool/double "
              "&& chmod 755 /opt/tool/double\nUSER 1000:1000\n")

TOML = """schema_version = 1
id = "{id}"
domain = "coding"
language = "python"
kind = "pytest"
editable = ["solution.py"]

[environment]
image = "verify-cli/python:3.11"
runtime = "python"
{dockerfile}
[test]
command = 'python -m pytest -q -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests'
results = "junit.xml"

[scoring]
policy = "all-or-nothing"

[limits]
wall_seconds = 60
"""
WITH_TOOL = ("import subprocess\n\n\ndef double(n):\n    return int(subprocess.run(['/opt/tool/double', str(n)], "
             "capture_output=True, text=True, check=True).stdout)\n")
PLAIN = "def double(n):\n    return 2 * n\n"
TESTS = ("from solution import double\n\n\n"
         "def test_double():\n    assert double({n}) == {m}\n\n\ndef test_zero():\n    assert double(0) == 0\n")


def write_set(root: Path, count: int, with_environment: bool) -> Path:
    for i in range(count):
        d = root / f"t{i:03d}"
        files = {"prompt.md": "Implement double(n).\n",
                 "starter/solution.py": "def double(n):\n    raise NotImplementedError\n",
                 "solution/solution.py": WITH_TOOL if with_environment else PLAIN,
                 "tests/test_solution.py": TESTS.format(n=i, m=2 * i)}
        if with_environment:
            files["environment/Dockerfile"] = DOCKERFILE
        for rel, text in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_text(text)
        line = 'dockerfile = "environment/Dockerfile"\n' if with_environment else ""
        (d / "task.toml").write_text(TOML.format(id=f"t{i:03d}", dockerfile=line))
    return root


def check_tasks(path: Path, sandbox: str, repeats: int, store: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "verify_cli", "check-tasks", str(path), "--sandbox", sandbox,
                           "--repeats", str(repeats), "--no-cache"], capture_output=True, text=True,
                          env={**os.environ, "VERIFY_CLI_ENV_DIR": str(store), "PYTHONPATH": str(REPO)})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"check-tasks {path} on {sandbox} failed (exit {done.returncode}):\n{done.stdout[-2000:]}\n"
                 f"{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-rootfs-") as tmp:
        root = Path(tmp)
        envset = write_set(root / "with", args.tasks, True)
        plain = write_set(root / "without", args.tasks, False)
        store = EnvironmentStore(root / "store")
        task = load_task(envset / "t000")
        assert isinstance(task, Task)
        bwrap = sandbox_class("bwrap")
        envs = Environments(bwrap, store)
        t0 = time.perf_counter()
        realised = envs.realise(task)
        cold = time.perf_counter() - t0
        envs.close()
        t0 = time.perf_counter()
        again = Environments(bwrap, store).realise(task)
        warm = time.perf_counter() - t0
        assert realised is not None and again is not None and again.identity == realised.identity
        size = sum(f.stat().st_size for f in Path(str(realised.layer.root if realised.layer else "")).rglob("*")
                   if f.is_file() and not f.is_symlink())
        print(f"Dockerfile environment for bwrap: image build + root export {cold:.1f} s (cold store), "
              f"found again {1000 * warm:.1f} ms (warm store); root {size / 1e6:.0f} MB")
        times: dict[str, list[float]] = {"bwrap, no environment": [], "bwrap over the root": [], "docker": []}
        for _ in range(2):
            times["bwrap, no environment"].append(check_tasks(plain, "bwrap", args.repeats, store.root))
            times["bwrap over the root"].append(check_tasks(envset, "bwrap", args.repeats, store.root))
            times["docker"].append(check_tasks(envset, "docker", args.repeats, store.root))
        base = min(times["bwrap, no environment"])
        print(f"check-tasks --repeats {args.repeats} on {args.tasks} tasks (best of 2):")
        for name, seconds in times.items():
            print(f"  {name:24s} {min(seconds):6.1f} s  {min(seconds) / base:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
