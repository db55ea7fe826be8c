"""The audit JSON names its mutation times for what they are: wall time, and run time summed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from verify_cli.cli.app import main


def test_mutation_times_are_named(make_task: Any, tmp_path: Path) -> None:
    root = make_task("t", fast=True)
    report = tmp_path / "audit.json"
    main(["audit", str(root), "--sandbox", "process", "--no-flaky", "--no-probes", "--no-labelled",
          "--max-mutants", "4", "--json", str(report)])
    (task,) = json.loads(report.read_text())["tasks"]
    mutation = task["mutation"]
    assert "seconds" not in mutation
    assert mutation["total"] > 0
    assert mutation["wall_seconds"] > 0 and mutation["run_seconds_summed"] > 0
