"""Run verl's own SandboxFusion reward (``verl.utils.reward_score.sandbox_fusion``) against a
service: ``python verl_sandbox_fusion_child.py REQUEST.json OUT.json`` with verl on the path.

REQUEST: {"url": ".../run_code", "cases": N, "parallel": K, "rounds": R}. Each round runs K
``compute_score`` calls at once (verl's reward loop calls it in a thread per completion), each
over N cases of a correct program, so K * min(N, 32) requests are in flight at once. OUT: the
scores and every case's status."""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from verl.utils.reward_score.sandbox_fusion import compute_score

PROGRAM = "```python\nn = int(input())\nprint(n * 2)\n```"


MIXED = """
import sys, time
data = sys.stdin.read()
if data.startswith('slow_'):
    time.sleep(60)
print(f"out_{data.split('_')[-1]}")
"""


def mixed(request: dict) -> dict:
    """verl's check_correctness over N cases at once: right answers, wrong expectations and
    cases that run past the time limit, each with its expected verdict."""
    from verl.utils.reward_score.sandbox_fusion.utils import check_correctness

    inputs, outputs, expected = [], [], []
    for i in range(request["cases"]):
        if i in request["slow"]:
            inputs.append(f"slow_{i}"), outputs.append(f"out_{i}"), expected.append(-3)
        elif i in request["wrong"]:
            inputs.append(f"in_{i}"), outputs.append(f"other_{i}"), expected.append(False)
        else:
            inputs.append(f"in_{i}"), outputs.append(f"out_{i}"), expected.append(True)
    started = time.monotonic()
    results, metadata = check_correctness(request["url"], {"inputs": inputs, "outputs": outputs}, MIXED,
                                          timeout=request["timeout"])
    return {"seconds": time.monotonic() - started, "results": results, "expected": expected,
            "statuses": [m.get("status") for m in metadata]}


def compiled(request: dict) -> dict:
    """verl's check_correctness in a compiled ``language``: each program of ``programs`` over
    the same cases (its results: True/False per case, -4 for a compile error)."""
    from verl.utils.reward_score.sandbox_fusion.utils import check_correctness

    out = []
    for program in request["programs"]:
        results, metadata = check_correctness(request["url"], request["in_outs"], program, timeout=10,
                                              language=request["language"])
        out.append({"results": results, "statuses": [m.get("status") for m in metadata]})
    return {"programs": out}


def main() -> None:
    request = json.loads(Path(sys.argv[1]).read_text())
    if request.get("mode") == "mixed":
        Path(sys.argv[2]).write_text(json.dumps(mixed(request)))
        return
    if request.get("mode") == "compiled":
        Path(sys.argv[2]).write_text(json.dumps(compiled(request)))
        return
    cases = {"inputs": [f"{i}\n" for i in range(request["cases"])],
             "outputs": [f"{2 * i}\n" for i in range(request["cases"])]}
    rounds = []
    for _ in range(request["rounds"]):
        started = time.monotonic()
        with ThreadPoolExecutor(request["parallel"]) as pool:
            got = list(pool.map(lambda _: compute_score(request["url"], None, 1024, PROGRAM, json.dumps(cases)),
                                range(request["parallel"])))
        rounds.append({"seconds": time.monotonic() - started,
                       "scores": [score for score, _ in got],
                       "statuses": sorted({m.get("status") for _, meta in got for m in meta})})
    with open(sys.argv[2], "w") as fh:
        json.dump({"rounds": rounds}, fh)


if __name__ == "__main__":
    main()
