#!/usr/bin/env python3
"""Peak memory of writing a difficulty run's samples.parquet, before and after row groups.

    python scripts/bench_difficulty_outputs.py [--samples 20000]

Builds a report of ``--samples`` HumanEval-sized sample records (164 tasks) in a fresh
interpreter, then writes samples.parquet either the way it was written before (every row as a
dict, one Arrow table of them all: ``sample_rows`` + ``Table.from_pylist``) or with
:func:`~verify_cli.difficulty.outputs.write_samples` (:data:`SAMPLE_ROW_GROUP` rows at a time),
and prints how far each raised the process's peak RSS (``VmHWM``) above what the report itself
holds (after a one-row file is written first, so that the Parquet writer's own code and buffers
are already counted), with the two files' rows compared. Memory, not time: the shared machine's load does not
move these figures much.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import pyarrow as pa, pyarrow.parquet as pq
from verify_cli.difficulty.outputs import sample_rows, write_samples
from verify_cli.difficulty.runner import DifficultyOptions, DifficultyReport, TaskDifficulty
from verify_cli.difficulty.samples import SampleRecord
from verify_cli.difficulty.schema import SAMPLES_SCHEMA
from verify_cli.difficulty.stats import task_stats
from verify_cli.models.base import SamplingParams

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

n, how, out = int(sys.argv[2]), sys.argv[3], sys.argv[4]
tasks = []
for t in range(164):
    records = []
    for i in range(t, n, 164):
        body = f"def f{i}(values):\n" + "    total = 0\n    for v in values:\n        total += v\n" * 12
        records.append(SampleRecord(task_id=f"humaneval/{t}", sample_index=i // 164, completion="",
                                    files={"solution.py": body}, status="failed", score=0.0, passed=False,
                                    visible_passed=None, tests=[{"id": "check", "outcome": "failed"}],
                                    problems=["exit code 1"]))
    tasks.append(TaskDifficulty(task_id=f"humaneval/{t}", path="/x", bucket="unsolved",
                                stats=task_stats((r.outcome for r in records), ks=(1,), confidence=0.95),
                                records=records))
report = DifficultyReport(tasks=tasks, model_id="replay:x", params=SamplingParams(), options=DifficultyOptions())
# A one-row file first: the Parquet writer's code and buffers are mapped in before the measure.
pq.write_table(pa.Table.from_pylist(sample_rows(DifficultyReport(tasks=[TaskDifficulty(
    task_id="w", path="/x", bucket="unsolved", stats=tasks[0].stats, records=tasks[0].records[:1])],
    model_id="w", params=SamplingParams(), options=DifficultyOptions())), schema=SAMPLES_SCHEMA), out + ".warm")
held = hwm()
if how == "before":
    pq.write_table(pa.Table.from_pylist(sample_rows(report), schema=SAMPLES_SCHEMA), out)
else:
    from pathlib import Path
    write_samples(report, Path(out))
print(json.dumps({"held_kb": held, "peak_kb": hwm()}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-difficulty-outputs-") as work:
        got = {}
        for how in ("before", "after"):
            path = Path(work) / f"{how}.parquet"
            done = subprocess.run([sys.executable, "-c", CHILD, str(REPO), str(args.samples), how, str(path)],
                                  check=True, capture_output=True, text=True)
            got[how] = json.loads(done.stdout.strip().splitlines()[-1])
        import pyarrow.parquet as pq

        same = pq.read_table(Path(work) / "before.parquet").to_pylist() == pq.read_table(
            Path(work) / "after.parquet").to_pylist()
    print(f"samples.parquet of {args.samples} samples (shared machine):")
    for how in ("before", "after"):
        g = got[how]
        print(f"  {how:6} report held {g['held_kb'] / 1024:6.1f} MiB; writing raised the peak by "
              f"{(g['peak_kb'] - g['held_kb']) / 1024:6.1f} MiB")
    print(f"  same rows in both files: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
