#!/usr/bin/env python3
"""The difficulty sample cache's cost per graded sample: batched syncs against a sync per line.

    python scripts/bench_sample_cache.py [--samples 500] [--rounds 3] [--dir ~/.cache/verify-cli]

Appends ``--samples`` HumanEval-sized records through :class:`SampleCache` (lines written as
each sample is graded, ``fsync`` at most once a second and at the end) and through the former
append, which synced every line, alternating, in a folder on the file system the cache uses by
default. Prints milliseconds per sample of each and the ratio. This runs on the thread that
hands graded samples back (the generating thread with a live model). The machine is shared and
its disk too: noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from verify_cli.checks import default_cache_dir  # noqa: E402
from verify_cli.difficulty import SampleCache, SampleRecord  # noqa: E402

BODY = "def f(values):\n" + "    total = 0\n    for v in values:\n        total += v\n" * 12 + "    return total\n"


def record(i: int) -> SampleRecord:
    return SampleRecord(task_id=f"humaneval/{i % 164}", sample_index=i // 164, completion=BODY,
                        files={"solution.py": BODY}, status="failed", score=0.0, passed=False, visible_passed=None,
                        tests=[{"id": "check", "outcome": "failed"}])


def per_line_fsync(folder: Path, key: str, rec: SampleRecord) -> None:
    """The append as it was: open, append the line, flush, fsync, close."""
    line = json.dumps(rec.to_dict(), ensure_ascii=False) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{key}.jsonl").open("a+b") as fh:
        if fh.tell() > 0:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                line = "\n" + line
        fh.write(line.encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=default_cache_dir())
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    records = [record(i) for i in range(args.samples)]
    before, after = [], []
    for r in range(args.rounds):
        for which in (("old", "new") if r % 2 == 0 else ("new", "old")):
            folder = Path(tempfile.mkdtemp(prefix="bench-sample-cache-", dir=args.dir))
            try:
                started = time.monotonic()
                if which == "old":
                    for rec in records:
                        per_line_fsync(folder, rec.task_id.replace("/", "-"), rec)
                    before.append(time.monotonic() - started)
                else:
                    cache = SampleCache(folder)
                    for rec in records:
                        cache.append(rec.task_id.replace("/", "-"), rec)
                    cache.sync()
                    after.append(time.monotonic() - started)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    old, new = statistics.median(before), statistics.median(after)
    print(f"{args.samples} samples appended to the sample cache in {args.dir}, {args.rounds} alternating rounds "
          f"(shared machine and disk, load average {os.getloadavg()[0]:.1f}: noisy)")
    print(f"  sync per line (before): {1000 * old / args.samples:.3f} ms/sample")
    print(f"  batched syncs (after):  {1000 * new / args.samples:.3f} ms/sample  ({new / old:.3f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
