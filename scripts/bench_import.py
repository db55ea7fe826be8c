"""Import throughput: synthetic rows of each layout through ``import_rows``; prints rows/s.

    python scripts/bench_import.py [--rows 10000] [--preset stdio|asserts|function|all]

The rows are made here (no network); timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from verify_cli.importers import import_rows


def stdio_row(i: int) -> dict[str, object]:
    inputs = [f"{i} {j}\n" for j in range(3)]
    return {"problem_id": i, "question": f"Print the sum of two integers (problem {i}).",
            "solutions": json.dumps(["a, b = map(int, input().split())\nprint(a + b)\n"]),
            "input_output": json.dumps({"inputs": inputs, "outputs": [f"{i + j}\n" for j in range(3)]})}


def asserts_row(i: int) -> dict[str, object]:
    return {"task_id": i, "text": f"Write a function that adds {i} to a number.",
            "code": f"def add_{i}(x):\n    return x + {i}\n",
            "test_list": [f"assert add_{i}({j}) == {i + j}" for j in range(3)], "test_setup_code": ""}


def function_row(i: int) -> dict[str, object]:
    prompt = f'def add_{i}(x: int) -> int:\n    """Return x plus {i}."""\n'
    return {"task_id": f"Synthetic/{i}", "prompt": prompt, "canonical_solution": f"    return x + {i}\n",
            "test": f"def check(candidate):\n    assert candidate(1) == {i + 1}\n", "entry_point": f"add_{i}"}


MAKERS = {"stdio": stdio_row, "asserts": asserts_row, "function": function_row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--preset", default="all", choices=[*MAKERS, "all"])
    parser.add_argument("--dir", default=None, help="Where to write (default: the system temp folder).")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="verify-bench-import-", dir=args.dir))
    try:
        print(f"{'preset':<10} {'rows':>7} {'seconds':>8} {'rows/s':>9}")
        for name in (MAKERS if args.preset == "all" else [args.preset]):
            source = work / f"{name}.jsonl"
            with source.open("w", encoding="utf-8") as fh:
                for i in range(args.rows):
                    fh.write(json.dumps(MAKERS[name](i)) + "\n")
            started = time.perf_counter()
            report = import_rows(str(source), work / f"out-{name}", preset=name)
            seconds = time.perf_counter() - started
            assert len(report.written) == args.rows, report.failures[:3]
            print(f"{name:<10} {args.rows:>7} {seconds:>8.2f} {args.rows / seconds:>9,.0f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
