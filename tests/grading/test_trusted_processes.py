"""Every trusted process of a run under one rule (DESIGN.md, "Trust"; verify_cli/sandbox/plumbing/trusted_launch.py).

Three parts:

- **the contract**: for every task kind, on bwrap cold and warm (and the process backend, whose
  runs share the host with the candidate, for the interpreter flags only), a run is graded while
  this test lists its processes from the host side (``/proc``, every descendant of this
  process), and each trusted process (everything not in the candidate's sandbox) is held against
  :func:`violations`: a harness interpreter started without ``-I``/``-s`` (a runner as
  ``python -m verify_*``: the work folder first on its ``sys.path``), any Python with the user
  site on, ``HOME`` in a folder the candidate can write, the seal key in any process's
  environment (it reaches its reader by a descriptor only), ``NODE_OPTIONS`` from outside the
  harness. A new runner or backend
  that starts a trusted process another way fails here;
- **the hacks** of tests/fixtures/trusted/hacks (each scored full marks before the launcher) earn
  nothing on bwrap, cold and warm, and the references still pass;
- **nothing the candidate starts outlives what started it**: a background process one stdio case
  leaves is gone before the next case runs.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from verify_cli.grading.grader import LINK_NOTE, Grader, GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Sandbox, Verdict
from verify_cli.sandbox.environment import HARNESS_DIR, SANDBOX_HARNESS, SANDBOX_TMP, SANDBOX_WORKDIR
from verify_cli.sandbox.plumbing.trusted_launch import LAUNCH_SCRIPT, TRUSTED_HOME
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Isolation, Task

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
TRUSTED = FIXTURES / "trusted"
HACKS = TRUSTED / "hacks" / "stdio"

#: Folders a candidate process can write (in the sandbox's view, and the host's scratch).
CANDIDATE_WRITABLE = (SANDBOX_WORKDIR, SANDBOX_TMP, "/dev/shm")
#: Processes of the launch chain that carry the run's variables (the seal key among them) and
#: are not in the candidate's reach on bwrap (its sandbox has no /proc): the backend's bwrap,
#: the run's wrapper shell and the shell of the task's command. Not interpreters: none of them
#: imports or runs anything the candidate wrote.
LAUNCH_CHAIN = ("bwrap", "sh", "dash", "bash", "tar", "cp", "sleep", "cat")


@dataclass
class Proc:
    """What the host sees of one process (``/proc/PID``)."""

    pid: int
    ppid: int
    argv: list[str]
    env: dict[str, str] | None  # None: unreadable
    cwd: str
    exe: str
    seen: int = 1
    candidate: bool = False
    #: Only a link in the parent chain: a process of the listing that was gone (or a zombie)
    #: when its own files were read; never reported itself.
    link_only: bool = False

    @property
    def name(self) -> str:
        return os.path.basename(self.exe or (self.argv[0] if self.argv else ""))


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _stat_ppid(stat: bytes) -> int:
    """The parent pid in a ``/proc/PID/stat`` line (after the command name, which may hold ')')."""
    return int(stat.rsplit(b")", 1)[1].split()[1])


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def read_proc(pid: int) -> Proc | None:
    """What the host's ``/proc/PID`` shows of one process (None: gone, a kernel thread, or in
    the middle of an exec). Its files are read one by one: a process that execs between them
    (a run's ``sh -c 'python ...'``) would pair the shell's argv with Python's ``exe`` (a
    'python -c' that never ran), so the reading is taken again until ``exe`` is the same before
    and after it."""
    for _ in range(5):
        before = _exe(pid)
        proc = _read_proc_once(pid)
        if proc is None or proc.exe == before:
            return proc
    return None


def _read_proc_once(pid: int) -> Proc | None:
    stat = _read(f"/proc/{pid}/stat")
    cmd = _read(f"/proc/{pid}/cmdline")
    if not stat or not cmd:
        return None
    ppid = _stat_ppid(stat)
    raw = _read(f"/proc/{pid}/environ")
    env = None if raw is None else dict(
        item.split("=", 1) for item in raw.decode("utf-8", "replace").split("\0") if "=" in item)
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = ""
    exe = _exe(pid)
    return Proc(pid, ppid, [a.decode("utf-8", "replace") for a in cmd.split(b"\0")[:-1]], env, cwd, exe)


#: One docker client for every snapshot of the module (a new one asks the engine its version).
_DOCKER: list[Any] = []


def container_snapshot() -> dict[int, Proc]:
    """Every process of the docker containers this process made, now: the host's processes
    whose cgroup names one of them (what ``docker top`` lists, without its ``ps`` per container
    per snapshot), read from the host's ``/proc``."""
    import docker
    from verify_cli.sandbox.docker.containers import OWNER_LABEL, owner

    if not _DOCKER:
        _DOCKER.append(docker.from_env())
    ids = [c.id.encode() for c in _DOCKER[0].containers.list(
        sparse=True, filters={"label": f"{OWNER_LABEL}={owner()}"})]
    procs: dict[int, Proc] = {}
    if not ids:
        return procs
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (cgroup := _read(f"/proc/{entry}/cgroup")) \
                and any(i in cgroup for i in ids) and (p := read_proc(int(entry))) is not None:
            procs[p.pid] = p
    return procs


def _ppid(pid: str) -> int | None:
    stat = _read(f"/proc/{pid}/stat")
    return _stat_ppid(stat) if stat else None


def snapshot() -> dict[int, Proc]:
    """Every descendant of this process, now (the whole of ``/proc/PID`` read for those only:
    the parent links of every process first)."""
    parents = {int(e): ppid for e in os.listdir("/proc") if e.isdigit() and (ppid := _ppid(e)) is not None}
    me, mine = os.getpid(), {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                changed = True
    procs = {pid: p for pid in mine if (p := read_proc(pid)) is not None}
    # A child between fork and exec still shows this process's argv: it is not yet a run's process.
    own = procs[me].argv if me in procs else None
    out = {pid: p for pid, p in procs.items() if pid != me and p.argv != own}
    # A process that ended (or became a zombie) between the listing and the reading of its files
    # is kept as a link only, so that its children still reach their ancestors: without it, a
    # candidate's last process seen while the run's server and init are ending (a loaded machine)
    # would have no candidate root above it, and be taken for a trusted one.
    for pid in mine - out.keys() - {me}:
        out[pid] = Proc(pid, parents[pid], [], None, "", "", link_only=True)
    return out


def _is_candidate_root(p: Proc) -> bool:
    joined = "\0".join(p.argv)
    return ("--hostname\0candidate" in joined or any(a.endswith("verify_candidate_server.py") for a in p.argv)
            or (p.env is not None and "VERIFY_CANDIDATE_HARNESS" in p.env and "VERIFY_RESULTS_DIR" not in p.env))


def classify(procs: dict[int, Proc]) -> None:
    """Mark the candidate's processes (its sandbox's bwrap and everything under it)."""
    for p in procs.values():
        q: Proc | None = p
        while q is not None:
            if _is_candidate_root(q):
                p.candidate = True
                break
            q = procs.get(q.ppid)


@dataclass
class Sampler:
    """Snapshots of a run's processes every few milliseconds, merged by (pid, argv)."""

    seen: dict[tuple[int, tuple[str, ...]], Proc] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    source: Callable[[], dict[int, Proc]] = snapshot

    def run(self) -> None:
        while not self.stop.is_set():
            now = self.source()
            classify(now)
            for p in now.values():
                if p.link_only:
                    continue
                key = (p.pid, tuple(p.argv))
                if key in self.seen:
                    old = self.seen[key]
                    old.seen += 1
                    old.env, old.cwd, old.candidate = p.env, p.cwd, old.candidate or p.candidate
                else:
                    self.seen[key] = p
            time.sleep(0.01)


PY = re.compile(r"python(3(\.\d+)?)?$")


def python_flags(argv: list[str]) -> tuple[list[str], str]:
    """(the interpreter's own options, what it runs: '-m MODULE', '-c', a script path, or '')."""
    flags: list[str] = []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return flags, f"-m {argv[i + 1] if i + 1 < len(argv) else ''}"
        if a == "-c":
            return flags, "-c"
        if a in ("-X", "-W"):
            flags += argv[i:i + 2]
            i += 2
            continue
        if a.startswith("-"):
            flags.append(a)
            i += 1
            continue
        return flags, a
    return flags, ""


def _under(path: str, folders: tuple[str, ...]) -> bool:
    return any(path == f or path.startswith(f + "/") for f in folders)


def violations(p: Proc, *, isolating: bool, two_process: bool) -> list[str]:
    """How trusted process ``p`` breaks the rule ([] when it keeps it). ``isolating``: the
    backend has a sandbox (bwrap), so folder rules apply; ``two_process``: the run was."""
    out: list[str] = []
    env = p.env or {}
    if p.name.startswith("python") or PY.search(p.name):
        flags, runs = python_flags(p.argv)
        isolated = any(f == "-I" or (f.startswith("-") and not f.startswith("--") and "I" in f) for f in flags)
        no_user_site = isolated or "-s" in flags or env.get("PYTHONNOUSERSITE") == "1" or p.env is None
        harness = runs.startswith("-m verify_") or SANDBOX_HARNESS in runs or LAUNCH_SCRIPT in runs
        if runs.startswith("-m verify_") and not isolated:
            out.append(f"harness module started as 'python {runs}' without -I: the working folder "
                       f"({p.cwd}) comes first on its sys.path")
        if harness and not (isolated or "-s" in flags):
            out.append(f"harness interpreter {runs!r} started without -I or -s")
        if not no_user_site:
            out.append("a Python with the user site enabled (no -I, -s or PYTHONNOUSERSITE=1)")
        safe_path = isolated or "-P" in flags or env.get("PYTHONSAFEPATH") == "1" or p.env is None
        if (isolating and two_process and (runs.startswith("-m ") or runs == "-c") and not safe_path
                and _under(p.cwd, CANDIDATE_WRITABLE)):
            out.append(f"'python {runs}' in {p.cwd} without -I, -P or PYTHONSAFEPATH=1: the working "
                       "folder, which the candidate can write, comes first on its sys.path")
    if "VERIFY_SEAL_KEY" in env:  # any process: the key reaches its reader by a descriptor only
        out.append("the seal key is in its environment (/proc/PID/environ)")
    if p.name == "node":
        opts = env.get("NODE_OPTIONS", "")
        for m in re.finditer(r"--(?:require|import|loader|experimental-loader)[= ](\S+)", opts):
            if not m.group(1).startswith((SANDBOX_HARNESS + "/", f"{HARNESS_DIR}/")):
                out.append(f"NODE_OPTIONS loads {m.group(1)} (not the harness's)")
    if isolating and two_process and p.env is not None and p.name not in ("bwrap",):
        home = env.get("HOME", "")
        if home and _under(home, CANDIDATE_WRITABLE):
            out.append(f"HOME={home}: a folder the candidate can write")
    return out


# -- the runs -----------------------------------------------------------------------------------


def _sleepy(task: Task) -> dict[str, bytes]:
    """A candidate of ``task`` that does the work slowly (so its trusted processes can be seen)."""
    kind = str(task.kind)
    if kind == "node":
        src = (FIXTURES / "kinds" / "node" / "task" / "solution" / "wrap.js").read_text()
        return {"wrap.js": ("Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 700);\n" + src).encode()}
    if kind == "stdio":
        return {"main.py": b"import time\ntime.sleep(0.3)\nprint(2 * int(input()))\n"}
    if task.id == "interface-spec/kv-cli":
        target = "kv.py"
        src = (task.root / "solution" / target).read_bytes()
        return {target: b"import time\ntime.sleep(0.25)\n" + src}
    return {"solution.py": b"import time\n\ndef double(x):\n    time.sleep(0.3)\n    return 2 * x\n"}


def probe_tasks() -> list[Task]:
    tasks = [load_task(FIXTURES / "kinds" / k / "task") for k in ("pytest", "calls", "stdio", "command", "node")]
    tasks.append(load_task(TRUSTED / "stdio-checker"))
    tasks.append(load_task(ROOT / "sample_tasks" / "interface-spec-kv-cli"))
    return tasks


@dataclass(frozen=True)
class Observed:
    result: GradeResult
    procs: list[Proc]


def observe(grader: Grader, task: Task, source: Callable[[], dict[int, Proc]] = snapshot) -> Observed:
    sampler = Sampler(source=source)
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    try:
        result = grader.grade(GradeRequest(task, Phase.PROBE, candidate=_sleepy(task), label=task.id))
    finally:
        sampler.stop.set()
        thread.join()
    return Observed(result, list(sampler.seen.values()))


@pytest.fixture(scope="module")
def bwrap() -> Iterator[Sandbox]:
    with create_sandbox("bwrap") as box:
        yield box


_OBSERVED: dict[tuple[str, str], dict[str, Observed]] = {}


def observed(box: Sandbox, backend: str, mode: str) -> dict[str, Observed]:
    key = (backend, mode)
    if key not in _OBSERVED:
        source = container_snapshot if backend == "docker" else snapshot
        tasks = probe_tasks() if backend != "docker" else docker_probe_tasks()
        with Grader(box, warm=mode == "warm") as grader:
            if mode == "warm":  # the first run of each task starts its worker: observe the second
                for task in tasks:
                    grader.grade(GradeRequest(task, Phase.REFERENCE))
            _OBSERVED[key] = {t.id: observe(grader, t, source) for t in tasks}
    return _OBSERVED[key]


def docker_probe_tasks() -> list[Task]:
    """The probe tasks whose image the docker backend has (python and node)."""
    return [t for t in probe_tasks() if str(t.kind) in ("pytest", "calls", "stdio", "command", "node")
            and t.environment.image]


def _report(obs: Observed, *, isolating: bool) -> list[str]:
    two = obs.result.isolation == "two-process"
    out = []
    for p in obs.procs:
        if p.candidate:
            continue
        for v in violations(p, isolating=isolating, two_process=two):
            out.append(f"{' '.join(p.argv)[:160]} (cwd {p.cwd}): {v}")
    return out


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_every_trusted_process_keeps_the_rule_on_bwrap(bwrap: Sandbox, mode: str) -> None:
    runs = observed(bwrap, "bwrap", mode)
    broken: dict[str, list[str]] = {}
    for task_id, obs in runs.items():
        assert obs.result.status is GradeStatus.GRADED and obs.result.passed, (task_id, obs.result.problems)
        assert any(not p.candidate for p in obs.procs), f"{task_id}: the probe saw no trusted process"
        if obs.result.isolation == "two-process":
            assert any(p.candidate for p in obs.procs), f"{task_id}: the probe saw no candidate process"
        if (bad := _report(obs, isolating=True)):
            broken[task_id] = bad
    assert broken == {}


def _docker_missing() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.close()
    except Exception as e:  # no SDK, no daemon
        return f"docker is not usable here ({type(e).__name__}: {e})"
    return None


@pytest.fixture(scope="module")
def docker_node() -> Iterator[Sandbox]:
    if (why := _docker_missing()) is not None:
        pytest.skip(why)
    with create_sandbox("docker", mode="node") as box:
        yield box


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_every_trusted_process_keeps_the_rule_on_docker_nodes(docker_node: Sandbox, mode: str) -> None:
    """The same contract on docker's node mode, the processes listed from the host (``docker
    top`` of this process's containers, each read from the host's ``/proc``)."""
    runs = observed(docker_node, "docker", mode)
    assert runs, "no probe task has a docker image"
    broken: dict[str, list[str]] = {}
    for task_id, obs in runs.items():
        assert obs.result.status is GradeStatus.GRADED and obs.result.passed, (task_id, obs.result.problems)
        trusted = [p for p in obs.procs if not p.candidate]
        assert any(PY.search(p.name) or p.name == "node" for p in trusted), f"{task_id}: no trusted interpreter seen"
        if obs.result.isolation == "two-process":
            assert any(p.candidate for p in obs.procs), f"{task_id}: the probe saw no candidate process"
        if (bad := _report(obs, isolating=True)):
            broken[task_id] = bad
    assert broken == {}


@pytest.mark.bwrap
@pytest.mark.slow
def test_the_probe_sees_the_runners_and_the_checker(bwrap: Sandbox) -> None:
    """The contract is only as good as what it lists: the stdio checker task's cold run shows the
    runner (through the launcher), the checker and the exec client of the CLI task."""
    runs = observed(bwrap, "bwrap", "cold")
    argvs = [" ".join(p.argv) for p in runs["trusted/stdio-checker"].procs if not p.candidate]
    assert any(f"{LAUNCH_SCRIPT} verify_stdio" in a and " -s " in a for a in argvs), argvs
    pytest_env = [p.env for p in runs["kinds/pytest"].procs
                  if not p.candidate and p.env is not None and "-m pytest" in " ".join(p.argv)]
    assert pytest_env and all(e.get("PYTHONSAFEPATH") == "1" for e in pytest_env), pytest_env
    assert any("hidden_tests/check.py" in a for a in argvs), argvs
    homes = {(p.env or {}).get("HOME") for p in runs["trusted/stdio-checker"].procs
             if not p.candidate and p.env is not None and p.name != "bwrap"}
    assert homes <= {TRUSTED_HOME}, homes
    cli = [" ".join(p.argv) for p in runs["interface-spec/kv-cli"].procs if not p.candidate]
    assert any("verify_candidate_exec.py" in a and " -I " in a for a in cli), cli


@pytest.mark.slow
def test_process_backend_interpreters_are_isolated() -> None:
    """The process backend has no sandbox (its candidate can write anywhere this user can), so only
    the launch rules are held there: every harness interpreter starts isolated."""
    with create_sandbox("process") as box:
        runs = observed(box, "process", "cold")
    broken = {tid: bad for tid, obs in runs.items() if (bad := _report(obs, isolating=False))}
    assert broken == {}


def test_a_runner_started_the_old_way_breaks_the_rule() -> None:
    """The rule catches what the launcher replaced: ``python -m verify_stdio`` in the work folder,
    a checker with the user site on and HOME in the work folder, a key left in an environment."""
    old = Proc(1, 0, ["/usr/bin/python3", "-m", "verify_stdio"], {"HOME": "/workspace"}, "/workspace",
               "/usr/bin/python3.11", seen=5)
    said = violations(old, isolating=True, two_process=True)
    assert any("without -I" in v for v in said) and any("HOME=/workspace" in v for v in said)
    assert any("user site" in v for v in said)
    keyed = Proc(2, 0, ["python", "-I", f"{SANDBOX_HARNESS}/{LAUNCH_SCRIPT}", "verify_calls"],
                 {"HOME": TRUSTED_HOME, "VERIFY_SEAL_KEY": "ab" * 16}, "/workspace", "/usr/bin/python3", seen=5)
    assert violations(keyed, isolating=True, two_process=True) == [
        "the seal key is in its environment (/proc/PID/environ)"]
    shell = Proc(3, 0, ["/bin/sh", "-c", "pytest"], {"VERIFY_SEAL_KEY": "x" * 32}, "/workspace", "/bin/dash")
    assert violations(shell, isolating=True, two_process=True) == [
        "the seal key is in its environment (/proc/PID/environ)"]
    by_fd = Proc(5, 0, keyed.argv, {"HOME": TRUSTED_HOME, "VERIFY_SEAL_FD": "9"}, "/workspace", "/usr/bin/python3")
    assert violations(by_fd, isolating=True, two_process=True) == []
    tests = Proc(6, 0, ["python", "-m", "pytest", "tests"], {"HOME": TRUSTED_HOME, "PYTHONNOUSERSITE": "1"},
                 "/workspace", "/usr/bin/python3")
    assert violations(tests, isolating=True, two_process=True) == [
        "'python -m pytest' in /workspace without -I, -P or PYTHONSAFEPATH=1: the working folder, "
        "which the candidate can write, comes first on its sys.path"]
    tests.env = {**(tests.env or {}), "PYTHONSAFEPATH": "1"}
    assert violations(tests, isolating=True, two_process=True) == []
    node = Proc(4, 0, ["node", "--test"], {"HOME": TRUSTED_HOME, "NODE_OPTIONS": "--require /workspace/x.js"},
                "/workspace", "/usr/bin/node", seen=5)
    assert violations(node, isolating=True, two_process=True) == [
        "NODE_OPTIONS loads /workspace/x.js (not the harness's)"]


# -- the hacks ----------------------------------------------------------------------------------


def _system_checker_task(tmp: Path) -> Task:
    """The checker fixture with its checker under the system Python (user site on, as the docker
    image's Python is)."""
    root = tmp / "stdio-checker-system"
    shutil.copytree(TRUSTED / "stdio-checker", root)
    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace('checker = "python hidden_tests/check.py"',
                                             f'checker = "{SYSTEM_PYTHON} hidden_tests/check.py"')
                    .replace('id = "trusted/stdio-checker"', 'id = "trusted/stdio-checker-system"'))
    return load_task(root)


SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or ""


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_the_trusted_process_hacks_earn_nothing(bwrap: Sandbox, mode: str, tmp_path: Path) -> None:
    tasks = [load_task(TRUSTED / "stdio-checker")]
    if SYSTEM_PYTHON:
        tasks.append(_system_checker_task(tmp_path))
    hacks = sorted(HACKS.glob("*.py"))
    requests = []
    for task in tasks:
        requests.append(GradeRequest(task, Phase.REFERENCE, label=f"reference|{task.id}"))
        requests += [GradeRequest(task, Phase.PROBE, candidate={"main.py": h.read_bytes()},
                                  label=f"{h.stem}|{task.id}") for h in hacks]
    with Grader(bwrap, warm=mode == "warm") as grader:
        results = {r.label: r for r in grader.grade_many(requests, jobs=2)}
    for task in tasks:
        ref = results[f"reference|{task.id}"]
        assert ref.status is GradeStatus.GRADED and ref.passed and ref.score == 1.0, ref.problems
    won = {label: (r.status.value, r.score) for label, r in results.items()
           if not label.startswith("reference|") and (r.status is not GradeStatus.GRADED or r.score != 0.0)}
    assert won == {}


# -- surviving programs -------------------------------------------------------------------------


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
@pytest.mark.parametrize("fixture", ["stdio-daemon", "stdio-setsid-daemon", "node-cli-daemon"])
def test_a_program_a_case_started_does_not_outlive_it(bwrap: Sandbox, mode: str, fixture: str) -> None:
    """Case ``a`` leaves a background heartbeat (a plain background job, or a daemon that left
    the program's process group: setsid and a double fork); case ``b`` prints ``alive`` if it
    still beats. The reference expects ``dead``: it passes only if the exec op killed case a's
    processes, every one of them. ``node-cli-daemon`` does the same from a node test through the
    exec runner, served by the node candidate server."""
    task = load_task(TRUSTED / fixture)
    with Grader(bwrap, warm=mode == "warm") as grader:
        result = grader.grade(GradeRequest(task, Phase.REFERENCE))
    assert result.status is GradeStatus.GRADED, result.problems
    assert result.passed, [(t.id, t.message) for t in result.tests]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_program_a_case_started_does_not_outlive_it_on_docker_nodes(docker_node: Sandbox, mode: str) -> None:
    """The heartbeats, on docker's node mode: the candidate's pid namespace there is its own too."""
    tasks = [load_task(TRUSTED / f) for f in ("stdio-daemon", "stdio-setsid-daemon", "node-cli-daemon")]
    with Grader(docker_node, warm=mode == "warm") as grader:
        results = list(grader.grade_many([GradeRequest(t, Phase.REFERENCE) for t in tasks], jobs=2))
    for result in results:
        assert result.status is GradeStatus.GRADED, result.problems
        assert result.passed, (result.task_id, [(t.id, t.message) for t in result.tests])


# -- links the candidate plants in the shared folders ---------------------------------------------

LINKS = TRUSTED / "hacks" / "links"


def _link_requests() -> list[GradeRequest]:
    """The golden-file references, and each link hack on the fixture of its language: the
    candidate's "output" is a link to the tests' own golden file (see hacks/links/README.md)."""
    requests = []
    for fixture, target, suffix in (("golden-file", "tool.py", ".py"), ("node-golden-file", "tool.sh", ".sh")):
        task = load_task(TRUSTED / fixture)
        requests.append(GradeRequest(task, Phase.REFERENCE, label=f"reference|{fixture}"))
        requests += [GradeRequest(task, Phase.PROBE, candidate={target: h.read_bytes()}, label=f"{h.stem}|{fixture}")
                     for h in sorted(LINKS.glob(f"*{suffix}"))]
    return requests


def _assert_links_earn_nothing(results: dict[str, GradeResult]) -> None:
    for label, r in results.items():
        assert r.status is GradeStatus.GRADED and r.isolation == "two-process", (label, r.problems)
        if label.startswith("reference|"):
            assert r.passed and r.score == 1.0, (label, [t.message for t in r.tests])
        else:
            assert r.score == 0.0 and not r.passed, label
            assert any("symbolic links" in t.message for t in r.tests), (label, [t.message for t in r.tests])
            assert LINK_NOTE in r.isolation_notes, (label, r.isolation_notes)  # the author's hint


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_link_to_the_tests_own_file_earns_nothing(bwrap: Sandbox, mode: str) -> None:
    """Each link hack scored 1.0 before (bwrap and docker nodes, cold and warm): the tests read
    their own golden file through the candidate's link. Now the shared folders are nosymfollow in
    the tests' view: opening the link fails (ELOOP) and the references still pass."""
    with Grader(bwrap, warm=mode == "warm") as grader:
        _assert_links_earn_nothing({r.label: r for r in grader.grade_many(_link_requests(), jobs=2)})


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_link_to_the_tests_own_file_earns_nothing_on_docker_nodes(docker_node: Sandbox, mode: str) -> None:
    with Grader(docker_node, warm=mode == "warm") as grader:
        _assert_links_earn_nothing({r.label: r for r in grader.grade_many(_link_requests(), jobs=2)})


# -- a starved or killed supervisor -------------------------------------------------------------

STARVE = TRUSTED / "hacks" / "starve"


@pytest.mark.docker
@pytest.mark.slow
def test_a_candidate_that_starves_or_kills_the_supervisor_gets_a_graded_failure(docker_node: Sandbox) -> None:
    """On docker's node mode a candidate fills the process limit with daemons, presses the memory
    limit from a crowd of processes, or signals every pid it can name: each run is a graded
    failure (never ``infra_error``, which is not scored), in-process (the command kind, whose
    candidate shares the run's namespaces with the tests) and two-process (pytest); and the next
    run on the same node shape still passes."""
    tasks = [load_task(FIXTURES / "kinds" / k / "task") for k in ("command", "pytest")]
    hacks = sorted(STARVE.glob("*.py"))
    assert len(hacks) >= 3
    # Two of the hacks hold their run to its wall limit (a timeout: a graded failure): 10 s of it,
    # not the fixtures' 20 and 30 s, which only the reference runs after them need.
    short = [replace(t, limits=replace(t.limits, wall_seconds=10.0)) for t in tasks]
    requests = [GradeRequest(t, Phase.PROBE, candidate={"solution.py": h.read_bytes()}, label=f"{h.stem}|{t.id}")
                for t in short for h in hacks]
    with Grader(docker_node) as grader:
        results = {r.label: r for r in grader.grade_many(requests, jobs=2)}
        after = [grader.grade(GradeRequest(t, Phase.REFERENCE)) for t in tasks]
    not_failed = {label: (r.status.value, r.score, r.run.verdict.value, r.run.message[:200])
                  for label, r in results.items() if r.status is not GradeStatus.GRADED or r.score != 0.0}
    assert not_failed == {}
    assert all(r.status is GradeStatus.GRADED and r.passed for r in after), [r.problems for r in after]


# -- the trusted side's descriptors -------------------------------------------------------------


def _grade_inherited_fds(box: Sandbox, mode: str) -> GradeResult:
    task = load_task(TRUSTED / "inherited-fds")
    with Grader(box, warm=mode == "warm") as grader:
        if mode == "warm":  # the first run starts the workers: the second is a warm one
            grader.grade(GradeRequest(task, Phase.REFERENCE))
        return grader.grade(GradeRequest(task, Phase.REFERENCE))


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_the_candidate_holds_no_pipe_of_the_trusted_side_on_bwrap(bwrap: Sandbox, mode: str) -> None:
    """The candidate's module (in the candidate server) and a program it runs through
    ``$VERIFY_CANDIDATE_EXEC`` hold no pipe open for writing: before the fix a bwrap cold
    candidate held the results pipe's write end (fd 5 in a probe), and a hack writing its own
    archive there first (tests/fixtures/hacks/results_pipe_forgery.py) turned the run into an
    unscored ``infra_error``."""
    result = _grade_inherited_fds(bwrap, mode)
    assert result.isolation == "two-process"
    assert result.status is GradeStatus.GRADED and result.passed, [(t.id, t.message) for t in result.tests]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_the_candidate_holds_no_pipe_of_the_trusted_side_on_docker_nodes(docker_node: Sandbox, mode: str) -> None:
    result = _grade_inherited_fds(docker_node, mode)
    assert result.isolation == "two-process"
    assert result.status is GradeStatus.GRADED and result.passed, [(t.id, t.message) for t in result.tests]


@pytest.mark.bwrap
def test_a_bwrap_runs_command_holds_only_its_standard_descriptors(bwrap: Sandbox, tmp_path: Path) -> None:
    """The run's wrapper holds the results pipe as local.RESULTS_FD and keeps it from the
    command it starts; nothing else of the grader's (other runs' pipes, descriptors this process
    inherited) reaches the run at all: ``ls`` lists its stdio and its own listing descriptor."""
    from verify_cli.sandbox.base import Limits, RunSpec

    leaked = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(leaked, True)  # as a descriptor this process inherited would be
    try:
        result = bwrap.run(RunSpec(["sh", "-c", "ls /proc/self/fd"], tmp_path, limits=Limits(wall_seconds=20)))
    finally:
        os.close(leaked)
    assert result.verdict.value == "ok", result.message
    assert sorted(int(x) for x in result.stdout.text.split()) == [0, 1, 2, 3], result.stdout.text


def test_the_user_site_plant_scores_against_an_unguarded_interpreter(tmp_path: Path) -> None:
    """What tests/fixtures/hacks/user_site_in_home.py relies on, shown on the system Python
    (not a venv: its user site is on, as the docker image's is): with HOME in a folder the
    candidate wrote, the planted ``.pth`` runs at start, takes the seal key from its descriptor
    and hands the reader a fresh pipe holding it (the harness would see nothing amiss) -- the
    forgery the hack suite shows earns nothing; with ``-s`` (the launcher's flag) it never runs."""
    import subprocess

    if not SYSTEM_PYTHON:
        pytest.skip("no system python3")
    home = tmp_path / "home"
    home.mkdir()
    hack: dict[str, object] = {"__name__": "mechanism"}
    exec(compile("import os\n" + (FIXTURES / "hacks" / "user_site_in_home.py").read_text(), "hack", "exec"), hack)
    hack["_plant"]([str(home)], [])  # type: ignore[operator]
    probe = ("import os\nfd = int(os.environ['VERIFY_SEAL_FD'])\n"
             "print(os.environ.get('VERIFY_PLANTED_RAN'), os.read(fd, 256).decode().strip())\n")
    said = {}
    for label, flags in (("unguarded", []), ("launcher", ["-s"])):
        r, w = os.pipe()
        os.write(w, b"k" * 32 + b"\n")
        os.close(w)
        try:
            run = subprocess.run([SYSTEM_PYTHON, *flags, "-c", probe], capture_output=True, text=True, timeout=30,
                                 env={"HOME": str(home), "PATH": "/usr/bin:/bin", "VERIFY_SEAL_FD": str(r)},
                                 pass_fds=[r], cwd=tmp_path)
        finally:
            os.close(r)
        assert run.returncode == 0, run.stderr
        said[label] = run.stdout.split()
    assert said == {"unguarded": ["1", "k" * 32], "launcher": ["None", "k" * 32]}


# -- the round's hacks on every backend, warm and cold -------------------------------------------

#: Hacks of this round (tests/fixtures/hacks, tests/fixtures/hacks_js; each also runs in the
#: suites of test_hack_suite/test_hacks_js) graded here on a module task, a CLI task and a node
#: task, on bwrap and docker node mode, cold and warm.
ROUND_HACKS = ("results_pipe_forgery", "user_site_in_home")
ROUND_JS_HACKS = ("results_pipe_forgery",)


def _round_requests() -> list[GradeRequest]:
    from test_hack_suite import hack_source, hack_target

    py = [load_task(FIXTURES / "kinds" / "pytest" / "task"), load_task(ROOT / "sample_tasks" / "interface-spec-kv-cli")]
    node = load_task(FIXTURES / "kinds" / "node" / "task")
    requests = [GradeRequest(t, Phase.REFERENCE, label=f"reference|{t.id}") for t in (*py, node)]
    requests += [GradeRequest(t, Phase.PROBE, candidate={hack_target(t): hack_source(h)}, label=f"{h}|{t.id}")
                 for t in py for h in ROUND_HACKS]
    requests += [GradeRequest(node, Phase.PROBE, label=f"{h}.js|{node.id}",
                              candidate={"wrap.js": (FIXTURES / "hacks_js" / f"{h}.js").read_bytes()})
                 for h in ROUND_JS_HACKS]
    return requests


def _round_hacks_earn_nothing(box: Sandbox, mode: str) -> None:
    def unsound(r: GradeResult) -> bool:
        return not (r.status is GradeStatus.GRADED and r.passed)

    requests = _round_requests()
    with Grader(box, warm=mode == "warm") as grader:
        results = {r.label: r for r in grader.grade_many(requests, jobs=2)}
        # A reference that ran out of time (node starts slowly on a loaded machine; a CI run lost
        # kinds/node's so once, cold) or met an infrastructure error is graded once more; one
        # whose tests failed is not.
        again = [q for q in requests if q.label.startswith("reference|") and unsound(results[q.label])
                 and (results[q.label].status is GradeStatus.INFRA_ERROR
                      or results[q.label].run.verdict is Verdict.TIMEOUT)]
        results.update({r.label: r for r in grader.grade_many(again, jobs=2)})
    refs = {label: (r.status.value, r.run.verdict.value, r.run.message[:200], r.problems,
                    [(t.id, t.message[-300:]) for t in r.failed_tests][:3])
            for label, r in results.items() if label.startswith("reference|") and unsound(r)}
    assert refs == {}
    won = {label: (r.status.value, r.score, r.isolation, r.problems[:2]) for label, r in results.items()
           if not label.startswith("reference|")
           and (r.status is not GradeStatus.GRADED or r.score != 0.0 or r.isolation != "two-process")}
    assert won == {}


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_this_rounds_hacks_earn_nothing_on_bwrap(bwrap: Sandbox, mode: str) -> None:
    _round_hacks_earn_nothing(bwrap, mode)


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_this_rounds_hacks_earn_nothing_on_docker_nodes(docker_node: Sandbox, mode: str) -> None:
    _round_hacks_earn_nothing(docker_node, mode)


@pytest.mark.bwrap
@pytest.mark.slow
def test_a_test_that_follows_its_own_link_in_tmp_fails_two_process_and_says_why(bwrap: Sandbox,
                                                                                make_task: Callable[..., Path]) -> None:
    """The price of the rule, pinned: links on the shared folders are not followed in the tests'
    view whoever made them, so a test that makes a link in ``tmp_path`` and reads through it
    fails two-process (in-process it passes), and the result carries the hint for the author."""
    test = ("def test_reads_through_its_own_link(tmp_path):\n"
            "    (tmp_path / 'a.txt').write_text('x')\n"
            "    (tmp_path / 'l.txt').symlink_to(tmp_path / 'a.txt')\n"
            "    assert (tmp_path / 'l.txt').read_text() == 'x'\n")
    task = load_task(make_task(files={"tests/test_solution.py": test}))
    with Grader(bwrap) as grader:
        two = grader.grade(GradeRequest(task, Phase.REFERENCE))
        one = grader.grade(GradeRequest(replace(task, isolation=Isolation.IN_PROCESS), Phase.REFERENCE))
    assert one.passed and one.isolation == "in-process"
    assert two.isolation == "two-process" and not two.passed and LINK_NOTE in two.isolation_notes, two.isolation_notes


# -- files shipped outside the editable globs and the test folders -------------------------------

SHIPPED = TRUSTED / "hacks" / "shipped"


def _shipped_requests() -> list[GradeRequest]:
    task = load_task(TRUSTED / "shipped-data")
    return [GradeRequest(task, Phase.REFERENCE, label="reference"),
            GradeRequest(task, Phase.STARTER, label="starter"),
            *[GradeRequest(task, Phase.PROBE, candidate={"solution.py": h.read_bytes()}, label=h.stem)
              for h in sorted(SHIPPED.glob("*.py"))]]


def _assert_shipped_files_hold(results: dict[str, GradeResult]) -> None:
    ref = results.pop("reference")
    assert ref.passed and ref.isolation == "two-process", [t.message for t in ref.tests]  # it wrote data/out.txt
    assert not results.pop("starter").passed
    assert len(results) == 3
    for label, r in results.items():
        assert r.status is GradeStatus.GRADED and r.score == 0.0, (label, [(t.id, t.message) for t in r.tests])


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm", "warm-cold-candidate"])
def test_a_candidate_cannot_rewrite_or_swap_a_shipped_file_the_tests_read(
        bwrap: Sandbox, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``data/expected.txt`` ships beside the solution, outside the test folders. Rewriting it
    at import scored 1.0 before (bwrap and docker nodes, cold and warm); now it is read-only in
    the candidate's view and its folder a mount point there, so rewriting, unlinking and
    swapping the folder all fail, while the reference still writes ``data/out.txt`` beside it."""
    if mode == "warm-cold-candidate":
        monkeypatch.setenv("VERIFY_WARM_CANDIDATE", "0")
    with Grader(bwrap, warm=mode != "cold") as grader:
        _assert_shipped_files_hold({r.label: r for r in grader.grade_many(_shipped_requests(), jobs=2)})


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_candidate_cannot_rewrite_or_swap_a_shipped_file_on_docker_nodes(docker_node: Sandbox, mode: str) -> None:
    with Grader(docker_node, warm=mode == "warm") as grader:
        _assert_shipped_files_hold({r.label: r for r in grader.grade_many(_shipped_requests(), jobs=2)})
