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


def main() -> None:
    request = json.loads(Path(sys.argv[1]).read_text())
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
