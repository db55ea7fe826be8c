"""Summaries of a training run folder: reward curve, statuses, throughput, shard integrity."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from verify_cli.rollout.shards import read_manifest, read_run, read_run_config, verify_run
from verify_cli.sampling.infra import infra_report
from verify_cli.sampling.status import SampleStatus

OK = SampleStatus.PASSED.trajectory_label


def _never_scored(task_ids: list[str], masked: list[bool]) -> list[str]:
    """Tasks every trajectory of which was masked (infra_error): they could not be run here."""
    seen: dict[str, bool] = {}
    for task_id, m in zip(task_ids, masked, strict=True):
        seen[task_id] = seen.get(task_id, True) and bool(m)
    return sorted(t for t, all_masked in seen.items() if all_masked)


def summarize_run(run_dir: Path) -> dict[str, Any]:
    """What ``verify-cli trajectories inspect`` shows, as plain data (also its --json)."""
    table = read_run(run_dir, columns=["step", "reward", "status", "masked", "advantage", "group_id",
                                       "num_turns", "response_mask", "generation_seconds", "grading_seconds",
                                       "problems", "task_id"])
    cols = table.to_pydict()
    steps = sorted(set(cols["step"]))
    curve = []
    for s in steps:
        idx = [i for i, v in enumerate(cols["step"]) if v == s]
        rewards = [cols["reward"][i] for i in idx if cols["reward"][i] is not None]
        curve.append({"step": s, "rows": len(idx),
                      "reward_mean": sum(rewards) / len(rewards) if rewards else None,
                      "ok_rate": sum(cols["status"][i] == OK for i in idx) / len(idx) if idx else 0.0,
                      "masked": sum(bool(cols["masked"][i]) for i in idx)})
    stats = [e.stats for e in read_manifest(run_dir) if e.stats]
    seconds: dict[str, float] = {}
    for st in stats:
        for k, v in (st.get("seconds") or {}).items():
            seconds[k] = seconds.get(k, 0.0) + float(v)
    step_time = seconds.get("step", 0.0)
    model_tokens = sum(sum(m) for m in cols["response_mask"])
    groups: dict[str, list[float]] = {}
    for gid, r in zip(cols["group_id"], cols["reward"], strict=True):
        if r is not None:
            groups.setdefault(gid, []).append(r)
    all_equal = sum(1 for rs in groups.values() if len(rs) < 2 or max(rs) == min(rs))
    return {
        "run_dir": str(run_dir), "config": read_run_config(run_dir), "steps": len(steps),
        "rows": table.num_rows, "status_counts": dict(Counter(cols["status"])),
        "masked": sum(bool(m) for m in cols["masked"]), "groups": len(groups), "all_equal_groups": all_equal,
        "infra": {**infra_report((bool(m), p or ())
                                 for m, p in zip(cols["masked"], cols["problems"], strict=True)).to_dict(),
                  "tasks_never_scored": _never_scored(cols["task_id"], cols["masked"])},
        "replaced_groups": sum(int(st.get("replaced_groups", 0)) for st in stats),
        "reward_curve": curve,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "throughput": {
            "trajectories_per_s": table.num_rows / step_time if step_time else None,
            "model_tokens_per_s": model_tokens / step_time if step_time else None,
        },
        "integrity_problems": verify_run(run_dir),
    }
