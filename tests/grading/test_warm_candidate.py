"""The warm candidate side of two-process grading (bwrap): a candidate parent forks per run.

Warm two-process runs, whose candidate a warm candidate parent forks, give the verdicts of cold
two-process runs; the forked candidate sees what a cold one sees; nothing one run's candidate
leaves (a daemon, files, environment, module state) reaches the next run's in the same parent;
and a candidate parent killed between or during runs never yields a score of its own making (the
run is re-run cold). Every test checks the pool's counters, so that none passes vacuously.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from verify_cli.grading import Grader, GradeRequest, GradeResult, Phase
from verify_cli.sandbox.base import Sandbox, WarmStats
from verify_cli.sandbox.bwrap.candidate import CandidateParent
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks import load_task

pytestmark = pytest.mark.bwrap


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with create_sandbox("bwrap") as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def cold(box: Sandbox) -> Grader:
    return Grader(box)


@pytest.fixture
def warm(box: Sandbox) -> Iterator[Grader]:
    with Grader(box, warm=True) as grader:
        yield grader


def _stats(grader: Grader) -> WarmStats:
    stats = grader.warm_stats
    return WarmStats(**vars(stats)) if stats is not None else WarmStats()


def _parents(grader: Grader) -> list[CandidateParent]:
    """The candidate parents of the grader's warm pool (test-only look inside)."""
    runner = grader._warm
    host = getattr(runner, "host", None)
    keys = getattr(host, "_keys", {})
    return [w.candidates.parent for state in keys.values() for w in state.idle
            if w.candidates.parent is not None]


def _parent_python(parent: CandidateParent) -> int:
    for pid in parent.pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"bwrap" not in argv[0] and any(a.endswith(b"verify_candidate_parent.py") for a in argv):
            return pid
    raise AssertionError(f"no candidate parent interpreter among {parent.pids}")


def _evidence(r: GradeResult) -> tuple[Any, ...]:
    return (r.status, r.score, r.passed, r.run.verdict, r.isolation,
            sorted((t.id, t.outcome.value) for t in r.tests))


def _probe_task(make_task: Callable[..., Path], tests: str, name: str = "probe") -> Path:
    def mutate(doc: dict[str, Any]) -> None:
        doc["editable"] = ["probe.py"]
        doc["test"]["command"] = ('python -m pytest -q -s -p no:cacheprovider '
                                  '--junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests')

    return make_task(name, mutate=mutate, files={
        "starter/solution.py": None, "solution/solution.py": None, "tests/test_solution.py": None,
        "starter/probe.py": "", "solution/probe.py": "", "tests/test_probe.py": tests})


def _candidate(root: Path, code: str) -> GradeRequest:
    return GradeRequest(load_task(root), Phase.CANDIDATE, candidate={"probe.py": code.encode()})


# --- what the forked candidate sees ---------------------------------------------------------

OBSERVER = '''
import os
import resource
import socket
import sys


def observe():
    seen = {
        "cwd": os.getcwd(), "ids": [os.getuid(), os.getgid(), os.geteuid(), os.getegid()],
        "pid": os.getpid(), "ppid": os.getppid(), "session_leader": os.getsid(0) == os.getpid(),
        "hostname": socket.gethostname(), "env": dict(os.environ),
        # /proc: a cold candidate has none, a warm one an empty read-only folder
        "root": sorted(n for n in os.listdir("/") if n != "proc"),
        "proc": os.listdir("/proc") if os.path.isdir("/proc") else [],
        "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")),
        "workspace": sorted(os.listdir(".")),
        "tests": os.listdir("tests") if os.path.isdir("tests") else [], "path": sys.path, "argv": sys.argv,
        "main": getattr(sys.modules["__main__"], "__file__", None),
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "limits": [resource.getrlimit(r) for r in (resource.RLIMIT_CPU, resource.RLIMIT_FSIZE,
                                                   resource.RLIMIT_CORE, resource.RLIMIT_NOFILE)],
        "umask": os.umask(0o022),
    }
    import ctypes
    seen["new_user_namespace"] = ctypes.CDLL(None).unshare(0x10000000) == 0  # CLONE_NEWUSER
    return seen
'''

OBSERVER_TESTS = '''
import json
from probe import observe


def test_observe():
    print("OBSERVED=" + json.dumps(observe(), sort_keys=True))
'''


def _observed(r: GradeResult) -> dict[str, Any]:
    for line in r.run.stdout.text.splitlines():
        if line.startswith("OBSERVED="):
            return dict(json.loads(line[len("OBSERVED="):]))
    raise AssertionError(r.run.stdout.text[-3000:])


def test_the_warm_candidate_sees_what_a_cold_one_sees(cold: Grader, warm: Grader,
                                                        make_task: Callable[..., Path]) -> None:
    root = _probe_task(make_task, OBSERVER_TESTS)
    req = _candidate(root, OBSERVER)
    cold_seen = _observed(cold.grade(req))
    warm_seen = [_observed(warm.grade(req)) for _ in range(2)]
    # (+1: the grader's one reference run that collects the task's declared tests)
    assert _stats(warm).warm_candidates == 2 + 1 and _stats(warm).cold_candidates == 0, _stats(warm)
    for seen in warm_seen:
        for key in cold_seen:
            assert seen[key] == cold_seen[key], key
    assert warm_seen[0].keys() == cold_seen.keys()
    assert cold_seen["proc"] == [] and cold_seen["new_user_namespace"] is False
    # (the test folder is an empty mount point of the trusted side's view)
    assert "VERIFY_SEAL_KEY" not in cold_seen["env"] and cold_seen["tests"] == []


SPARE_OBSERVER = OBSERVER + '''

def privileges():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    bounding = [cap for cap in range(64) if libc.prctl(23, cap, 0, 0, 0) == 1]  # PR_CAPBSET_READ
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    libc.capget(header, data)
    fds = []
    for fd in range(3, 1024):
        try:
            os.fstat(fd)
        except OSError:
            continue
        fds.append(fd)
    return {"bounding": bounding, "caps": list(data), "no_new_privs": libc.prctl(39, 0, 0, 0, 0),
            "dumpable": libc.prctl(3, 0, 0, 0, 0), "fds": len(fds)}
'''

SPARE_TESTS = '''
import json
from probe import observe, privileges


def test_observe():
    seen = observe()
    seen.update(privileges())
    print("OBSERVED=" + json.dumps(seen, sort_keys=True))
'''


def test_a_spare_candidate_sees_what_one_forked_for_its_run_sees(
        warm: Grader, make_task: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs after the first are served by the candidate parent's spare (forked once the run
    before was over); what its candidate sees (ids, namespaces, limits, capabilities, no new
    privileges, open descriptors, environment) is what a child forked for the run sees."""
    root = _probe_task(make_task, SPARE_TESTS, name="spare-probe")
    req = _candidate(root, SPARE_OBSERVER)
    spared = [_observed(warm.grade(req)) for _ in range(3)]
    stats = _stats(warm)
    # (+1: the grader's reference run, whose candidate had no spare: the parent started with it)
    assert stats.warm_candidates == 3 + 1 and stats.spare_candidates == 3, stats
    monkeypatch.setenv("VERIFY_LEVERS_OFF", "candidate-spare")
    warm.grade(req)  # the last spare asked for (before the switch) serves this one
    forked = _observed(warm.grade(req))
    assert _stats(warm).spare_candidates == 4 and _stats(warm).warm_candidates == 5 + 1, _stats(warm)
    for seen in spared:
        assert seen.keys() == forked.keys()
        for key in forked:
            assert seen[key] == forked[key], key
    assert forked["bounding"] == [] and forked["caps"] == [0] * 6 and forked["no_new_privs"] == 1
    assert forked["pid"] == 2 and forked["session_leader"] is False


# --- nothing of one run reaches the next -------------------------------------------------------

#: Candidate code (shared with test_warm.py): what a run can leave in a network or IPC namespace
#: that outlives its processes unless the namespace is the run's own or dies with the run.
LEAKS = '''
import ctypes as _ctypes
import socket as _socket
import time as _time

LEAK_ADDRESSES = ((_socket.AF_UNIX, "\\0verify-leak"), (_socket.AF_INET, ("127.0.0.1", 47321)))
LEAK_SHM_KEY = 0x7E51F1ED


def leave_ipc_object():
    _ctypes.CDLL(None).shmget(LEAK_SHM_KEY, 4096, 0o1666)  # IPC_CREAT | 0666: outlives its creator


def listen_on_leak_addresses():
    held = []
    for family, address in LEAK_ADDRESSES:
        s = _socket.socket(family, _socket.SOCK_STREAM)
        s.bind(address)
        s.listen(8)
        held.append(s)
    return held


def leaks_found(tries=1):
    found = []
    for family, address in LEAK_ADDRESSES:
        for _ in range(tries):
            with _socket.socket(family, _socket.SOCK_STREAM) as s:
                s.settimeout(2)
                try:
                    s.connect(address)
                except OSError:
                    _time.sleep(0.01)
                    continue
                found.append(f"a listener on {address!r}")
                break
    if _ctypes.CDLL(None).shmget(LEAK_SHM_KEY, 0, 0) != -1:
        found.append("a System V shared memory segment")
    return found
'''

POLLUTE = LEAKS + '''
import json
import os
import subprocess
import time

PATHS = ("/tmp/leak", "/dev/shm/leak", "/workspace/leak", "/leak", "/dev/leak", "/var/leak",
         "/opt/verify-candidate/leak", os.path.expanduser("~/leak"), "/tmp/daemon")
os.environ["LEAKED"] = "1"
json.LEAKED = 1
for path in PATHS:
    try:
        with open(path, "w") as fh:
            fh.write("from an earlier run")
    except OSError:
        pass
subprocess.Popen(["sleep", "987654"], start_new_session=True)
leave_ipc_object()
if os.fork() == 0:  # a daemon that keeps writing wherever it can, and listens
    os.setsid()
    if os.fork() == 0:
        held = listen_on_leak_addresses()
        while True:
            for path in ("/tmp/daemon", "/workspace/daemon", "/dev/shm/daemon"):
                try:
                    with open(path, "w") as fh:
                        fh.write("a daemon of an earlier run")
                except OSError:
                    pass
            time.sleep(0.05)
    os._exit(0)
'''

LEFTOVERS = LEAKS + '''
import json
import os


def leftovers():
    found = [p for p in ("/tmp/leak", "/dev/shm/leak", "/workspace/leak", "/leak", "/dev/leak",
                         "/var/leak", "/opt/verify-candidate/leak", os.path.expanduser("~/leak"),
                         "/tmp/daemon", "/workspace/daemon", "/dev/shm/daemon") if os.path.exists(p)]
    found += leaks_found(tries=20)  # the polluting run's daemon may still be starting to listen
    if "LEAKED" in os.environ:
        found.append("environment")
    if hasattr(json, "LEAKED"):
        found.append("module state")
    return found
'''

LEFTOVER_TESTS = '''
from probe import leftovers


def test_nothing_is_left_over():
    assert leftovers() == []
'''


def _sleepers() -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\0987654\0":
                out.append(int(pid))
        except OSError:
            pass
    return out


def test_nothing_one_run_leaves_reaches_the_next(warm: Grader, make_task: Callable[..., Path]) -> None:
    root = _probe_task(make_task, LEFTOVER_TESTS)
    # Polluting, then looking in the same run: the look does see what was left...
    dirty = warm.grade(_candidate(root, POLLUTE + LEFTOVERS))
    assert dirty.score == 0.0, dirty.run.stdout.text[-2000:]
    for leftover in ("verify-leak'", "a listener on ('127.0.0.1', 47321)",  # (repr in the output)
                     "a System V shared memory segment"):
        assert leftover in dirty.run.stdout.text, dirty.run.stdout.text[-3000:]
    parents = _parents(warm)
    assert len(parents) == 1
    pid = _parent_python(parents[0])
    assert _sleepers() == []  # ...the run's processes died with it...
    clean = warm.grade(_candidate(root, LEFTOVERS))
    # ...and the next run, forked by the same parent, finds nothing.
    assert clean.passed, (clean.failed_tests, clean.run.stdout.text[-2000:])
    assert [_parent_python(p) for p in _parents(warm)] == [pid]
    stats = _stats(warm)
    # (+1: the grader's one reference run that collects the task's declared tests)
    assert stats.warm_candidates == 2 + 1 and stats.fallbacks == 0 and stats.workers_started == 1, stats


# --- a killed candidate parent -----------------------------------------------------------------

ECHO = "def echo(x):\n    return x\n"
SLOW_TESTS = '''
import time
from probe import echo


def test_echo_twice():
    assert echo(1) == 1
    time.sleep(float(__import__("os").environ.get("PAUSE", "2")))
    assert echo(2) == 2
'''


def test_a_candidate_parent_killed_between_runs_is_replaced(cold: Grader, warm: Grader,
                                                            make_task: Callable[..., Path]) -> None:
    root = _probe_task(make_task, SLOW_TESTS.replace('"2"', '"0"'))
    first = warm.grade(_candidate(root, ECHO))
    assert first.passed
    (parent,) = _parents(warm)
    os.kill(_parent_python(parent), signal.SIGKILL)
    # The parent's sandbox ends a moment after its Python (a run that starts in between finds a
    # parent that is going and re-runs cold: the mid-run test below); wait for it to be gone.
    deadline = time.monotonic() + 30
    while parent.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    second = warm.grade(_candidate(root, ECHO))
    assert _evidence(second) == _evidence(cold.grade(_candidate(root, ECHO)))
    assert second.passed
    stats = _stats(warm)
    # A new parent served it (+1: the grader's one reference run collecting the declared tests).
    assert stats.warm_candidates == 2 + 1 and stats.fallbacks == 0, stats


def test_a_candidate_parent_killed_mid_run_falls_back_never_scores(
        cold: Grader, warm: Grader, make_task: Callable[..., Path]) -> None:
    root = _probe_task(make_task, SLOW_TESTS)
    assert warm.grade(_candidate(root, ECHO)).passed  # starts the parent
    (parent,) = _parents(warm)
    python = _parent_python(parent)
    killed = threading.Event()

    def kill_once_a_run_is_forked() -> None:
        children = Path(f"/proc/{python}/task/{python}/children")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if children.read_text().split():
                    time.sleep(0.3)  # the first call has crossed; the second has not
                    os.kill(python, signal.SIGKILL)
                    killed.set()
                    return
            except OSError:
                return
            time.sleep(0.01)

    before = _stats(warm)
    killer = threading.Thread(target=kill_once_a_run_is_forked)
    killer.start()
    result = warm.grade(_candidate(root, ECHO))
    killer.join()
    assert killed.is_set()
    after = _stats(warm)
    # Without the fallback the second call would fail on a closed channel (score 0).
    assert after.fallbacks == before.fallbacks + 1, after
    assert "candidate" in after.last_error, after.last_error
    assert _evidence(result) == _evidence(cold.grade(_candidate(root, ECHO)))
    assert result.passed


# --- the same verdicts as cold: test_two_process_parity.py (it shares the cold grading there) ---
