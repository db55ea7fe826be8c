#!/usr/bin/env python3
"""What the isolated verifier costs against Harbor's shared mode, on docker and on bwrap, in one run.

For each Harbor task under ``PATH`` (default: the sound fixtures, tests/fixtures/harbor/sound),
writes two copies, one declaring ``[verify_cli] verifier = "shared"``, builds the environment
once per backend (an image on docker; on bwrap the same image's exported root, in a temporary
store), then grades the oracle (the reference phase: solve.sh, then test.sh) ``--trials`` times
in each mode on each backend, alternating the order (same machine load). Prints the median
seconds of a trial per backend and mode, the ratio isolated / shared on each backend (the
isolated verifier starts a second container, or mounts a second writable root, and carries the
workdir's changes into it) and the ratio bwrap / docker per mode.

    python scripts/bench_harbor_verifier.py [PATH] [--trials 5] [--backends docker,bwrap]

Timings on a shared machine are noisy; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli.environments import Environments, EnvironmentStore  # noqa: E402
from verify_cli.grading import Grader, GradeRequest, Phase  # noqa: E402
from verify_cli.sandbox import create_sandbox  # noqa: E402
from verify_cli.tasks import load_task  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=str(REPO / "tests" / "fixtures" / "harbor" / "sound"))
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--backends", default="docker,bwrap", help="comma-separated: docker, bwrap")
    args = parser.parse_args()
    source = Path(args.path)
    folders = [source] if (source / "task.toml").is_file() else sorted(p.parent for p in source.glob("*/task.toml"))
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    seconds: dict[tuple[str, str], list[float]] = {(b, m): [] for b in backends for m in ("isolated", "shared")}
    with tempfile.TemporaryDirectory(prefix="bench-harbor-") as tmp:
        graders: dict[str, Grader] = {}
        for name in backends:
            box = create_sandbox(name)
            box.start()
            graders[name] = Grader(box, environments=Environments(box, EnvironmentStore(Path(tmp) / f"store-{name}")))
        pairs = []
        for folder in folders:
            iso, shared = Path(tmp) / "isolated" / folder.name, Path(tmp) / "shared" / folder.name
            shutil.copytree(folder, iso)
            shutil.copytree(folder, shared)
            toml = shared / "task.toml"
            toml.write_text(toml.read_text() + '\n[verify_cli]\nverifier = "shared"\n')
            pairs.append((load_task(iso), load_task(shared)))
        for grader in graders.values():  # build each environment once, off the clock
            for iso_task, _ in pairs:
                grader.grade(GradeRequest(iso_task, Phase.STARTER))
        for trial in range(args.trials):
            for iso_task, shared_task in pairs:
                order = [(b, m, t) for b in backends for m, t in (("isolated", iso_task), ("shared", shared_task))]
                if trial % 2:
                    order.reverse()
                for backend, mode, task in order:
                    t0 = time.perf_counter()
                    result = graders[backend].grade(GradeRequest(task, Phase.REFERENCE))
                    seconds[(backend, mode)].append(time.perf_counter() - t0)
                    if result.score != 1.0:
                        print(f"{task.id} ({backend}, {mode}): the oracle scored {result.score}: {result.problems}")
                        return 1
        for grader in graders.values():
            grader.close()
            grader.sandbox.close()
    median = {key: statistics.median(values) for key, values in seconds.items()}
    print(f"harbor oracle trials, {len(folders)} task(s) x {args.trials} trial(s) per backend and mode")
    for backend in backends:
        iso, shared = median[(backend, "isolated")], median[(backend, "shared")]
        where = "container" if backend == "docker" else "root"
        print(f"  {backend}: shared verifier   (Harbor's: test.sh where the agent ran): median {shared:.2f}s")
        print(f"  {backend}: isolated verifier (a fresh {where}, the workdir's changes): median {iso:.2f}s")
        print(f"  {backend}: ratio isolated / shared: {iso / shared:.2f}x")
    if {"docker", "bwrap"} <= set(backends):
        for mode in ("isolated", "shared"):
            print(f"  ratio bwrap / docker, {mode}: {median[('bwrap', mode)] / median[('docker', mode)]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
