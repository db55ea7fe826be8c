#!/usr/bin/env python3
"""What the isolated verifier costs against Harbor's shared mode, in one run.

For each Harbor task under ``PATH`` (default: the sound fixtures, tests/fixtures/harbor/sound),
writes two copies, one declaring ``[verify_cli] verifier = "shared"``, builds the environment
once, then grades the oracle (the reference phase: solve.sh, then test.sh) ``--trials`` times in
each mode, alternating the two (same machine load), on docker. Prints the median seconds of a
trial per mode and the ratio isolated / shared (the isolated verifier starts a second container
and carries the workdir's changes into it).

    python scripts/bench_harbor_verifier.py [PATH] [--trials 5]

Timings on a shared machine are noisy; compare the ratio of one run.
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

from verify_cli.grading import Grader, GradeRequest, Phase  # noqa: E402
from verify_cli.sandbox import create_sandbox  # noqa: E402
from verify_cli.tasks import load_task  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default=str(REPO / "tests" / "fixtures" / "harbor" / "sound"))
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    source = Path(args.path)
    folders = [source] if (source / "task.toml").is_file() else sorted(p.parent for p in source.glob("*/task.toml"))
    box = create_sandbox("docker")
    box.start()
    grader = Grader(box)
    seconds: dict[str, list[float]] = {"isolated": [], "shared": []}
    with tempfile.TemporaryDirectory(prefix="bench-harbor-") as tmp:
        pairs = []
        for folder in folders:
            iso, shared = Path(tmp) / "isolated" / folder.name, Path(tmp) / "shared" / folder.name
            shutil.copytree(folder, iso)
            shutil.copytree(folder, shared)
            toml = shared / "task.toml"
            toml.write_text(toml.read_text() + '\n[verify_cli]\nverifier = "shared"\n')
            pairs.append((load_task(iso), load_task(shared)))
        for iso_task, _ in pairs:  # build each environment once, off the clock
            grader.grade(GradeRequest(iso_task, Phase.STARTER))
        for trial in range(args.trials):
            for iso_task, shared_task in pairs:
                order = [("isolated", iso_task), ("shared", shared_task)]
                if trial % 2:
                    order.reverse()
                for mode, task in order:
                    t0 = time.perf_counter()
                    result = grader.grade(GradeRequest(task, Phase.REFERENCE))
                    seconds[mode].append(time.perf_counter() - t0)
                    if result.score != 1.0:
                        print(f"{task.id} ({mode}): the oracle scored {result.score}: {result.problems}")
                        return 1
    box.close()
    iso, shared = statistics.median(seconds["isolated"]), statistics.median(seconds["shared"])
    print(f"harbor oracle trials, docker, {len(folders)} task(s) x {args.trials} trial(s) per mode")
    print(f"  shared verifier   (Harbor's: test.sh in the agent's container): median {shared:.2f}s")
    print(f"  isolated verifier (a fresh container, the workdir's changes):   median {iso:.2f}s")
    print(f"  ratio isolated / shared: {iso / shared:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
