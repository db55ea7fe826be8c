#!/usr/bin/env python3
"""Who signals the Docker daemon during a test run: a kernel trace (ftrace) of its own.

Twice a CI run saw dockerd and its containerd die of SIGKILL at the same moment, late in the
run, with no OOM kill and nothing in the daemon's log; local runs never did. This records, in
an ftrace instance of its own (no other tracer is disturbed), every SIGKILL, SIGTERM and SIGINT
sent to a process named dockerd or containerd, with the sender, every fork and exec (the
sender's lineage) and the test each pytest worker had started (tests/conftest.py writes each
test's id to the instance's ``trace_marker``, named in ``$VERIFY_TESTS_TRACE_MARKER``).

    scripts/daemon_trace.py start    # prints the marker path; silent no-op without tracefs/root
    scripts/daemon_trace.py report   # what signalled the daemon (nothing: prints nothing); ends it

Used by scripts/test.sh; standard library only.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")
INSTANCE = TRACEFS / "instances" / "verify-cli-tests"
DAEMONS = ("dockerd", "containerd")
LINE = re.compile(r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<ts>\d+\.\d+): (?P<event>\w+): (?P<rest>.*)$")


def _write(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def start() -> int:
    if not (TRACEFS / "instances").is_dir():
        with contextlib.suppress(OSError):
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True, check=False)
    try:
        INSTANCE.mkdir(exist_ok=True)
        _write(INSTANCE / "buffer_size_kb", "16384")
        events = INSTANCE / "events"
        names = " || ".join(f'comm == "{d}"' for d in DAEMONS)
        _write(events / "signal" / "signal_generate" / "filter", f"(sig == 9 || sig == 15 || sig == 2) && ({names})")
        for event in ("signal/signal_generate", "sched/sched_process_fork", "sched/sched_process_exec"):
            _write(events / event / "enable", "1")
        _write(INSTANCE / "tracing_on", "1")
    except OSError:
        return 0  # no tracefs or not root: the run goes on untraced
    print(INSTANCE / "trace_marker")
    return 0


def report() -> int:
    if not INSTANCE.is_dir():
        return 0
    try:
        _write(INSTANCE / "tracing_on", "0")
        text = (INSTANCE / "trace").read_text(errors="replace")
    except OSError:
        return 0
    finally:
        with contextlib.suppress(OSError):
            INSTANCE.rmdir()
    signals, parent, exe, tests = [], {}, {}, []
    for raw in text.splitlines():
        m = LINE.match(raw)
        if m is None:
            continue
        event, rest, pid, ts = m["event"], m["rest"], int(m["pid"]), float(m["ts"])
        if event == "signal_generate":
            signals.append((ts, pid, m["task"], rest))
        elif event == "sched_process_fork" and (c := re.search(r"child_comm=(.*) child_pid=(\d+)", rest)):
            parent[int(c.group(2))] = pid
            exe[int(c.group(2))] = c.group(1)
        elif event == "sched_process_exec" and (f := re.search(r"filename=(\S+)", rest)):
            exe[pid] = f.group(1)
        elif event == "tracing_mark_write" and "TEST START" in rest:
            tests.append((ts, rest.split("TEST START", 1)[1].strip()))
    if not signals:
        return 0
    print("== the Docker daemon was signalled during the run (kernel trace):", file=sys.stderr)
    for ts, pid, task, rest in signals:
        chain: list[str] = []
        p = pid
        while p in parent and len(chain) < 12:
            chain.append(f"{p}({exe.get(p, '?')})")
            p = parent[p]
        print(f"  t={ts:.3f} from {task}-{pid}: {rest}", file=sys.stderr)
        print(f"    sender's lineage: {' <- '.join(chain) or '(started before the trace)'}", file=sys.stderr)
        running: dict[str, str] = {}
        for t, what in tests:
            if t <= ts:
                worker, _, nodeid = what.partition(" ")
                running[worker] = nodeid
        for worker, nodeid in running.items():
            print(f"    last test started by {worker}: {nodeid}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    commands = {"start": start, "report": report}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        print(f"usage: {sys.argv[0]} start|report", file=sys.stderr)
        sys.exit(2)
    sys.exit(commands[sys.argv[1]]())
