"""``sandbox doctor``: which backends run here and what each was *proven* to contain.

Fails closed: a backend is reported safe only when every hostile program of the conformance
suite ran against it here and was contained. A backend that is unavailable, whose check could
not run, or that has documented limitations is not safe.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify_cli.sandbox.base import Limits, RunSpec, Sandbox, Verdict
from verify_cli.sandbox.kit.conformance import ConformanceResult, run_conformance
from verify_cli.sandbox.registry import create_sandbox, sandbox_class, sandbox_names, sandbox_spec

DOCTOR_IMAGE = "verify-cli/python:3.11"


@dataclass
class BackendDiagnosis:
    backend: str
    available: bool
    isolation: str
    reason: str = ""
    install_hint: str = ""
    results: list[ConformanceResult] = field(default_factory=list)
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    error: str = ""

    @property
    def proven_safe(self) -> bool:
        return (self.available and not self.error and bool(self.results)
                and all(r.contained and r.conforms for r in self.results))

    @property
    def limitations(self) -> list[str]:
        return [r.case for r in self.results if not r.contained]

    def to_dict(self) -> dict[str, object]:
        return {
            "backend": self.backend, "available": self.available, "isolation": self.isolation,
            "reason": self.reason, "install_hint": self.install_hint, "proven_safe": self.proven_safe,
            "error": self.error, "latency_p50_s": self.latency_p50_s, "latency_p95_s": self.latency_p95_s,
            "cases": [{"case": r.case, "contained": r.contained, "expected_contained": r.expected_contained,
                       "conforms": r.conforms, "verdict": r.verdict.value if r.verdict else None,
                       "findings": list(r.findings), "error": r.error, "limitation": r.limitation,
                       "seconds": round(r.elapsed_seconds, 3)} for r in self.results],
        }


def _latency(box: Sandbox, image: str | None, runs: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="verify-doctor-") as work:
        spec = RunSpec(command=["python3", "-c", "pass"], workdir=Path(work), image=image, runtime="python",
                       limits=Limits(wall_seconds=30))
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            res = box.run(spec)
            times.append(time.perf_counter() - t)
            if res.verdict is not Verdict.OK:
                raise RuntimeError(f"a trivial run ended with {res.verdict.value}: {res.message}")
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]


def diagnose(backends: list[str] | None = None, *, fast: bool = True, latency_runs: int = 10,
             progress: Callable[[str], None] | None = None,
             options: Mapping[str, Mapping[str, Any]] | None = None) -> list[BackendDiagnosis]:
    """Check each backend (default: all registered) here and now, each configured with its
    ``options`` (by backend name; checked first, so a bad option is a UsageError before anything
    runs). A backend that runs in an image is checked in :data:`DOCTOR_IMAGE`."""
    say = progress or (lambda _m: None)
    out: list[BackendDiagnosis] = []
    names = backends or sandbox_names()
    specs = {name: sandbox_spec(name, (options or {}).get(name)) for name in names}
    for name in names:
        cls = sandbox_class(name)
        avail = cls.availability()
        diag = BackendDiagnosis(name, avail.available, cls.isolation, avail.reason, avail.install_hint)
        out.append(diag)
        if not avail.available:
            continue
        image = DOCTOR_IMAGE if cls.runs_in_image else None
        try:
            with create_sandbox(specs[name]) as box:
                diag.isolation = box.isolation
                say(f"{name}: timing a trivial run")
                diag.latency_p50_s, diag.latency_p95_s = _latency(box, image, latency_runs)
                def report(r: ConformanceResult, n: str = name) -> None:
                    say(f"{n}: {r.case} {'contained' if r.contained else 'NOT contained'}")

                diag.results = run_conformance(box, fast=fast, image=image, progress=report)
        except Exception as e:  # fail closed: whatever went wrong, nothing is proven
            diag.error = f"{type(e).__name__}: {e}"
    return out
