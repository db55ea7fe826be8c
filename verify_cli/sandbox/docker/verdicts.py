"""How the docker backend judges a run: its kill reason, exit status, cgroup counters, output."""

from __future__ import annotations

from verify_cli.sandbox.base import (
    CANCELLED_MESSAGE,
    CapturedOutput,
    Limits,
    Verdict,
)
from verify_cli.sandbox.docker.containers import tmpfs_mib
from verify_cli.sandbox.docker.streams import ExecOutcome
from verify_cli.sandbox.environment import (
    SANDBOX_WORKDIR,
)
from verify_cli.sandbox.plumbing.judging import out_of_memory, signal_verdict

COPY_PREFIX = "could not copy the work folder into the container: "


def copy_error(text: str, limits: Limits) -> str:
    text = text.strip()
    if "No space left" in text or "Wrote only" in text:
        room = tmpfs_mib(SANDBOX_WORKDIR, limits.memory_mb)
        return (f"{COPY_PREFIX}the work folder does not fit in /workspace ({room} MiB: a quarter "
                f"of the memory limit, since it lives in memory); raise the memory limit")
    return f"{COPY_PREFIX}tar failed: {text[-1000:]}"


def judge_run(outcome: ExecOutcome, exit_code: int | None, oom: bool, limits: Limits,
             stderr: CapturedOutput) -> tuple[Verdict, int | None, str]:
    """The verdict, the signal (Docker reports a death by signal n as status 128+n) and a note."""
    if outcome.killed == "cancelled":
        return Verdict.INFRA_ERROR, None, CANCELLED_MESSAGE
    if outcome.killed == "output":
        return (Verdict.OUTPUT_LIMIT, None,
                f"exceeded the output limit of {limits.output_bytes} bytes; the run was stopped")
    if outcome.killed is not None:  # "timeout"
        return Verdict.TIMEOUT, None, f"exceeded the wall-clock limit of {limits.wall_seconds:g} s"
    if exit_code is None:
        return Verdict.INFRA_ERROR, None, "lost track of the command's exit status"
    sig = exit_code - 128 if 128 < exit_code < 128 + 65 else None
    if exit_code != 0 and (oom or out_of_memory(stderr.head, stderr.tail)):
        return (Verdict.MEMORY_LIMIT, sig,
                f"ran out of memory under the limit of {limits.memory_mb} MiB")
    if sig is not None:
        verdict, message = signal_verdict(sig)
        return verdict, sig, message
    if exit_code != 0:
        return Verdict.NONZERO_EXIT, None, ""
    return Verdict.OK, None, ""


def parse_counters(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    for parts in lines:
        if len(parts) == 1 and parts[0].isdigit():  # cgroup v1 cpuacct.usage, nanoseconds
            out["cpu_seconds"] = int(parts[0]) / 1e9
        elif len(parts) == 2 and parts[0] == "usage_usec":  # cgroup v2 cpu.stat
            out["cpu_seconds"] = int(parts[1]) / 1e6
        elif len(parts) == 2 and parts[0] == "oom_kill":  # v1 oom_control, v2 memory.events
            out["oom_kill"] = out.get("oom_kill", 0) + int(parts[1])
    return out
