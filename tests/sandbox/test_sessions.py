"""Sessions (``Sandbox.open_session``) on every backend that has them.

State persists within a session and never crosses sessions; the hostile-program suite is
contained when its programs run as session commands; each way a command can kill its own session
gives the dead state (a graded failure), never an infrastructure error, while a failure of the
machinery under a session is one; idle sessions are reclaimed; output is cut with a marker;
calls are safe from threads and have asyncio forms.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import SandboxFor
from verify_cli.errors import UsageError
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.kit.conformance import CASES, ConformanceCase, run_case
from verify_cli.sandbox.kit.testing import FakeSandbox
from verify_cli.sandbox.sessions import (
    ExecVerdict,
    Session,
    SessionDeadError,
    SessionFileError,
    SessionInfraError,
    SessionLimits,
    SessionState,
    SessionsUnsupportedError,
)
from verify_cli.sandbox.sessions.client import ServerSession
from verify_cli.sandbox.sessions.conformance import SessionRunner

SESSION_BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param("bwrap", marks=pytest.mark.bwrap, id="bwrap"),
    pytest.param("docker", marks=pytest.mark.docker, id="docker"),
]
ISOLATING = [p for p in SESSION_BACKENDS if p.id != "process"]
SMALL = SessionLimits(memory_mb=256, processes=64, disk_bytes=32 << 20, command_seconds=10,
                      idle_seconds=300)
IMAGE = "verify-cli/python:3.11"


@pytest.fixture(params=SESSION_BACKENDS)
def box(request: pytest.FixtureRequest, sandbox_for: SandboxFor) -> Sandbox:
    return sandbox_for(request.param)


@pytest.fixture(params=ISOLATING)
def isolating_box(request: pytest.FixtureRequest, sandbox_for: SandboxFor) -> Sandbox:
    return sandbox_for(request.param)


@pytest.fixture
def session(box: Sandbox) -> Iterator[Session]:
    with box.open_session({"hello.txt": b"hi\n"}, SMALL, image=IMAGE) as s:
        yield s


def _server_pid(s: Session) -> int:
    assert isinstance(s, ServerSession)
    return s._server_pid


# --- the contract ---------------------------------------------------------------------------


def test_a_backend_without_sessions_says_so() -> None:
    with pytest.raises(SessionsUnsupportedError, match="cannot open sessions"):
        FakeSandbox().open_session()


@pytest.mark.parametrize(("field", "value"), [("memory_mb", 0), ("idle_seconds", 0.0),
                                              ("command_seconds", -1.0), ("disk_bytes", 10)])
def test_bad_limits_say_which(field: str, value: float) -> None:
    with pytest.raises(UsageError, match=f"session limit {field}"):
        SessionLimits(**{field: value})  # type: ignore[arg-type]


def test_state_persists_between_calls(session: Session) -> None:
    assert session.read_file("hello.txt") == b"hi\n"
    r = session.exec("echo more >> hello.txt && mkdir -p build && "
                     "printf 'int main(){return 7;}' > build/prog.c && cat hello.txt")
    assert r.verdict is ExecVerdict.OK, r
    assert r.stdout.text == "hi\nmore\n"
    # An installed package: a virtual environment made by one call, a package put in its
    # site-packages by another, imported by a third.
    assert session.exec("python -m venv --without-pip env").ok
    site = session.exec("env/bin/python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))'")
    session.write_file(f"{site.stdout.text.strip()}/installed_pkg/__init__.py", "VALUE = 41 + 1\n")
    r = session.exec("env/bin/python -c 'import installed_pkg; print(installed_pkg.VALUE)'")
    assert r.stdout.text == "42\n", r
    assert session.read_file("hello.txt") == b"hi\nmore\n"
    names = {e.path: e.kind for e in session.list_files()}
    assert names["build"] == "dir" and names["build/prog.c"] == "file"
    assert session.snapshot(["**/*.c"]) == {"build/prog.c": b"int main(){return 7;}"}


def test_a_host_folder_is_copied_in_and_never_written_back(box: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "mod.py").write_text("X = 1\n")
    with box.open_session(tmp_path, SMALL, image=IMAGE) as s:
        r = s.exec("cat src/mod.py && echo 'X = 2' > src/mod.py")
        assert r.stdout.text == "X = 1\n"
        assert s.read_file("src/mod.py") == b"X = 2\n"
    assert (tmp_path / "src" / "mod.py").read_text() == "X = 1\n"


def test_a_session_handed_out_ready_is_fresh(box: Sandbox) -> None:
    """Sessions kept ready (spares) are new ones: nothing of an earlier session, the caller's
    environment, their clocks started at the hand-over."""
    limits = SessionLimits(memory_mb=200, command_seconds=10, wall_seconds=30)
    with box.open_session({"mine": b"1"}, limits, env={"WHO": "first"}, image=IMAGE) as first:
        assert first.exec("echo state > left.txt").ok
    time.sleep(2.0)  # spares of these limits are started in the background
    handed = time.monotonic()
    with box.open_session(None, limits, env={"WHO": "second"}, image=IMAGE) as second:
        assert isinstance(second, ServerSession)
        assert second.opened_at >= handed
        r = second.exec("ls; echo $WHO")
        assert r.stdout.text == "second\n", r.stdout.text
    hosts = box.__dict__.get("_sessions")
    if box.name != "process":
        assert hosts is not None and hosts.spares.hits >= 1


def test_state_never_crosses_sessions(box: Sandbox) -> None:
    with box.open_session(None, SMALL, image=IMAGE) as a, \
            box.open_session(None, SMALL, image=IMAGE) as b:
        a.write_file("secret.txt", "from a")
        assert a.exec("echo a > tmp_marker").ok
        r = b.exec("ls; cat secret.txt")
        assert r.verdict is ExecVerdict.NONZERO_EXIT
        assert "secret" not in r.stdout.text
        with pytest.raises(SessionFileError):
            b.read_file("secret.txt")
        assert b.snapshot() == {}


def test_isolated_sessions_share_no_tmp_processes_or_loopback(isolating_box: Sandbox) -> None:
    with isolating_box.open_session(None, SMALL, image=IMAGE) as a, \
            isolating_box.open_session(None, SMALL, image=IMAGE) as b:
        assert a.exec("echo x > /tmp/a-tmp && echo y > /dev/shm/a-shm").ok
        r = b.exec("cat /tmp/a-tmp /dev/shm/a-shm")
        assert r.verdict is ExecVerdict.NONZERO_EXIT and "x" not in r.stdout.text
        # A listener in a's loopback (during a's command) is not b's loopback.
        listen = ("import socket,time,sys;s=socket.socket();s.bind(('127.0.0.1',47123));"
                  "s.listen();print('up',flush=True);time.sleep(3)")
        result: dict[str, object] = {}
        t = threading.Thread(target=lambda: result.update(r=a.exec(["python", "-c", listen])))
        t.start()
        time.sleep(1.0)
        probe = b.exec(["python", "-c", "import socket;socket.create_connection(('127.0.0.1',47123),1)"])
        t.join()
        assert probe.verdict is ExecVerdict.NONZERO_EXIT, probe
        assert "ConnectionRefused" in probe.stderr.text, probe.stderr.text
        ps = b.exec("ps -eo pid,args")
        assert "47123" not in ps.stdout.text


def test_commands_see_no_host_and_no_network(isolating_box: Sandbox) -> None:
    with isolating_box.open_session(None, SMALL, image=IMAGE) as s:
        r = s.exec("id -u; cat /proc/1/cmdline | tr '\\0' ' '; ls /")
        assert r.ok, r
        assert r.stdout.text.splitlines()[0] == "1000"
        assert "hidden_tests" not in r.stdout.text
        r = s.exec(["python", "-c", "import socket;socket.create_connection(('192.0.2.1',80),2)"])
        assert r.verdict is ExecVerdict.NONZERO_EXIT
        assert s.exec("touch /usr/x").verdict is ExecVerdict.NONZERO_EXIT
        checkout = Path(__file__).resolve().parents[2]  # its tasks, hidden tests, the harness
        for path in (checkout / "README.md", checkout / "sample_tasks"):
            r = s.exec(f"ls {path}")
            assert r.verdict is ExecVerdict.NONZERO_EXIT and "No such file" in r.stderr.text, r


def test_verdicts_stdin_env_and_exit_codes(session: Session) -> None:
    r = session.exec("cat; echo \"$EXTRA\"; exit 3", stdin=b"piped\n", env={"EXTRA": "set"})
    assert (r.verdict, r.exit_code, r.stdout.text) == (ExecVerdict.NONZERO_EXIT, 3, "piped\nset\n")
    r = session.exec("sleep 30", timeout=0.5)
    assert r.verdict is ExecVerdict.TIMEOUT and r.wall_seconds < 6
    r = session.exec(["python", "-c", "b = bytearray(600 * 2**20); print(len(b))"])
    assert r.verdict is ExecVerdict.MEMORY_LIMIT, r
    r = session.exec("kill -SEGV $$")
    assert r.verdict is ExecVerdict.SIGNAL and r.signal == signal.SIGSEGV
    assert session.exec("true").ok  # the session survived all of it


def test_per_command_limits_hold(box: Sandbox) -> None:
    # A wall limit far above the CPU limit: on a loaded machine CPU time comes slowly.
    limits = SessionLimits(cpu_seconds=1, command_seconds=300, file_bytes=1 << 20)
    with box.open_session(None, limits, image=IMAGE) as s:
        r = s.exec(["python", "-c", "while True: pass"])
        assert r.verdict is ExecVerdict.TIMEOUT and "CPU" in r.message, r
        r = s.exec("ulimit -H -f; ulimit -f; ulimit -c")
        assert r.stdout.text.split() == ["1024", "1024", "0"], r.stdout.text  # 1 MiB in KiB blocks
        r = s.exec(["dd", "if=/dev/zero", "of=f", "bs=1M", "count=2"])
        assert r.verdict is ExecVerdict.OUTPUT_LIMIT and "file-size" in r.message, r
        r = s.exec(["python", "-c", "open('f', 'wb').write(b'x' * (2 << 20))"])  # ignores SIGXFSZ
        assert r.verdict is ExecVerdict.NONZERO_EXIT and "File too large" in r.stderr.text, r
        r = s.exec(["no-such-program"])
        assert r.exit_code == 127 and "no-such-program" in r.stderr.text, r


def test_nothing_a_command_leaves_runs_on(session: Session) -> None:
    # Odd durations, as markers: the process backend's `ps` lists the whole host.
    assert session.exec("(setsid sleep 3013.7 &) ; nohup sleep 3014.9 >/dev/null 2>&1 &").ok
    r = session.exec("ps -eo args")
    assert "sleep 3013.7" not in r.stdout.text and "sleep 3014.9" not in r.stdout.text


def test_output_is_cut_head_and_tail_with_a_marker(box: Sandbox) -> None:
    limits = SessionLimits(output_bytes=1000, max_output_bytes=1 << 20, command_seconds=10)
    with box.open_session(None, limits, image=IMAGE) as s:
        r = s.exec(["python", "-c", "print('H' * 500 + 'm' * 99000 + 'T' * 499)"])
        assert r.verdict is ExecVerdict.OK
        assert r.stdout.truncated and r.stdout.total_bytes == 100000
        assert r.stdout.text == "H" * 500 + "\n[... 99000 bytes omitted ...]\n" + "T" * 499 + "\n"
        r = s.exec("yes")  # past max_output_bytes: stopped
        assert r.verdict is ExecVerdict.OUTPUT_LIMIT and r.stdout.total_bytes > 1 << 20
        assert s.exec("echo fine").stdout.text == "fine\n"


def test_file_calls_refuse_what_they_must(session: Session) -> None:
    session.exec("ln -s /etc/passwd link.txt; mkdir d; head -c 5000 /dev/zero > big.bin")
    assert "link.txt" not in session.snapshot(["**"])
    with pytest.raises(SessionFileError):
        session.read_file("missing.txt")
    with pytest.raises(SessionFileError):
        session.read_file("d")
    with pytest.raises(SessionFileError, match=r"over the 100-byte limit|more than 100 bytes"):
        session.read_file("big.bin", max_bytes=100)
    with pytest.raises(SessionFileError, match="more than"):
        session.snapshot(["**"], max_bytes=10)
    assert set(session.snapshot(["*.bin", "hello.txt"])) == {"big.bin", "hello.txt"}


# --- the hostile suite, as session commands -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_programs_are_contained_in_sessions(box: Sandbox, case: ConformanceCase) -> None:
    runner = SessionRunner(box)
    try:
        result = run_case(runner, case, image=IMAGE)
    finally:
        runner.close()
    assert result.conforms, result.describe()
    if not result.expected_contained:
        assert result.findings, result.describe()
    if box.name != "process":  # there, a disk fill is charged to the session's memory: it may die
        assert runner.opened == 1, "the session died: the suite's next run needed a new one"


# --- death: the command's fault, never infrastructure --------------------------------------


def _assert_dead(s: Session) -> None:
    r = s.exec("true")
    assert r.verdict is ExecVerdict.SESSION_DEAD, r
    assert not r.verdict.is_infrastructure
    assert s.state is SessionState.DEAD
    with pytest.raises(SessionDeadError):
        s.read_file("hello.txt")
    with pytest.raises(SessionDeadError):
        s.snapshot()


def _dies_or_survives(s: Session, command: str) -> None:
    """A command that attacks its own session: the session dies (graded) or survives; never
    an infrastructure verdict, never a hang."""
    r = s.exec(command, timeout=5)
    assert not r.verdict.is_infrastructure, r
    if s.state is SessionState.OPEN:
        assert s.exec("echo alive").stdout.text == "alive\n"
    else:
        assert s.state is SessionState.DEAD
        _assert_dead(s)


def test_the_exec_server_killed_from_inside_is_a_dead_session(session: Session) -> None:
    # bwrap, docker: the server is the session's init, immune to its own namespace's signals.
    command = f"kill -9 {_server_pid(session)}" if session.backend == "process" else "kill -9 1; kill -9 -1"
    r = session.exec(command)
    assert not r.verdict.is_infrastructure
    if session.backend == "process":
        assert r.verdict is ExecVerdict.SESSION_DEAD, r
        _assert_dead(session)
    else:
        assert session.exec("echo alive").stdout.text == "alive\n"


def test_the_exec_server_killed_from_outside_is_a_dead_session(session: Session) -> None:
    os.kill(_server_pid(session), signal.SIGKILL)
    _assert_dead(session)


def test_a_docker_session_sweeps_only_its_own_container(session: Session) -> None:
    """Closing a docker session kills every process of the cgroup it was given: that cgroup is
    the container's, and a pid whose cgroup does not name the container (this process's: the
    host's own cgroup, which holds the daemon) is never taken for one."""
    if session.backend != "docker":
        pytest.skip("a docker session's cgroup")
    from verify_cli.sandbox.sessions.docker import container_cgroup

    container_id = session.container_id  # type: ignore[attr-defined]
    cgroup = session._cgroup  # type: ignore[attr-defined]
    assert cgroup is not None and all(container_id in str(d) for d in cgroup.dirs), cgroup
    assert container_cgroup(_server_pid(session), container_id) is not None
    assert container_cgroup(os.getpid(), container_id) is None
    assert container_cgroup(_server_pid(session), "0" * 64) is None


def test_a_fork_bomb_a_filled_disk_and_a_memory_hog_end_no_session_as_infrastructure(
        box: Sandbox) -> None:
    limits = SessionLimits(memory_mb=128, processes=32, disk_bytes=96 << 20, command_seconds=5)
    with box.open_session({"hello.txt": b"x"}, limits, image=IMAGE) as s:
        _dies_or_survives(s, "bomb() { bomb | bomb & }; bomb; sleep 2")
        if box.name != "process":  # a disk fill on the process backend fills the host's disk
            _dies_or_survives(s, "head -c 200M /dev/zero > fill.bin; head -c 200M /dev/zero > /tmp/f;"
                                 "head -c 200M /dev/zero > /dev/shm/f; sleep 0.2")
            _dies_or_survives(s, "python -c 'b = bytearray(20 * 2**20)'")


def test_a_failure_of_the_machinery_is_infrastructure(isolating_box: Sandbox) -> None:
    if isolating_box.name != "bwrap":
        pytest.skip("the session parent is bwrap's machinery")
    from verify_cli.sandbox.registry import create_sandbox
    from verify_cli.sandbox.sessions.bwrap import BwrapSessions, wait_gone

    # A sandbox of its own: one session parent, so the one killed is the one serving ``s`` (the
    # module's sandbox may hold spares forked by an earlier parent).
    with create_sandbox("bwrap") as box:
        s = box.open_session({"hello.txt": b"x"}, SMALL)
        try:
            hosts = box.__dict__["_sessions"]
            assert isinstance(hosts, BwrapSessions)
            parent = hosts.parent(False)
            assert parent.proc is not None
            os.killpg(parent.proc.pid, signal.SIGKILL)
            parent.proc.wait()
            # The kernel ends the parent's pid namespace (the session's server with it) after the
            # outer bwrap is reaped: the call comes once the machinery is wholly gone.
            wait_gone(s._server_pid)  # type: ignore[attr-defined]
            r = s.exec("true")
            assert r.verdict is ExecVerdict.INFRA_ERROR, r
            assert s.state is SessionState.BROKEN
            with pytest.raises(SessionInfraError):
                s.read_file("hello.txt")
        finally:
            s.close()
        with box.open_session(None, SMALL) as fresh:  # a new parent serves the next one
            assert fresh.exec("true").ok


# --- lifetime ------------------------------------------------------------------------------


def _gone(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return text.rpartition(")")[2].split()[:1] in (["Z"], ["X"])


def test_an_idle_session_is_reclaimed(box: Sandbox) -> None:
    limits = SessionLimits(idle_seconds=0.5, command_seconds=5)
    s = box.open_session({"a": b"1"}, limits, image=IMAGE)
    try:
        assert s.exec("sleep 1").ok  # a call in progress is not idle
        assert s.state is SessionState.OPEN
        pid = _server_pid(s)
        deadline = time.monotonic() + 10
        while s.state is SessionState.OPEN and time.monotonic() < deadline:
            time.sleep(0.1)
        assert s.state is SessionState.RECLAIMED
        r = s.exec("true")
        assert r.verdict is ExecVerdict.SESSION_DEAD and "idle" in r.message
        deadline = time.monotonic() + 5
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(pid)
    finally:
        s.close()


def test_a_session_past_its_wall_limit_ends(box: Sandbox) -> None:
    with box.open_session(None, SessionLimits(wall_seconds=1.5, command_seconds=30),
                          image=IMAGE) as s:
        r = s.exec("sleep 10")
        assert r.verdict is ExecVerdict.TIMEOUT and r.wall_seconds < 5
        assert s.state is SessionState.RECLAIMED
        assert s.exec("true").verdict is ExecVerdict.SESSION_DEAD


@pytest.mark.bwrap
def test_closing_the_sandbox_closes_its_sessions() -> None:
    from verify_cli.sandbox.registry import create_sandbox

    own = create_sandbox("bwrap")
    s = own.open_session(None, SMALL)
    pid = _server_pid(s)
    own.close()
    assert s.state is SessionState.CLOSED
    assert s.exec("true").verdict is ExecVerdict.SESSION_DEAD
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def test_close_is_idempotent_and_ends_everything(box: Sandbox) -> None:
    s = box.open_session(None, SMALL, image=IMAGE)
    pid = _server_pid(s)
    s.close()
    s.close()
    assert s.state is SessionState.CLOSED
    assert s.exec("true").verdict is ExecVerdict.SESSION_DEAD
    deadline = time.monotonic() + 5
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


# --- concurrency ---------------------------------------------------------------------------


def test_concurrent_calls_from_threads(box: Sandbox) -> None:
    with box.open_session(None, SMALL, image=IMAGE) as shared:
        results: dict[int, str] = {}
        errors: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for k in range(4):
                    r = shared.exec(f"echo {i}-{k} | tee -a log.txt")
                    assert r.ok, r
                    results[i * 10 + k] = r.stdout.text
                    shared.write_file(f"t{i}.txt", str(i))
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert results == {i * 10 + k: f"{i}-{k}\n" for i in range(6) for k in range(4)}
        assert len(shared.read_file("log.txt").splitlines()) == 24
        assert shared.snapshot(["t*.txt"]) == {f"t{i}.txt": str(i).encode() for i in range(6)}


def test_close_from_another_thread_ends_a_command_in_flight(box: Sandbox) -> None:
    s = box.open_session(None, SMALL, image=IMAGE)
    out: dict[str, object] = {}
    t = threading.Thread(target=lambda: out.update(r=s.exec("sleep 30", timeout=60)))
    t.start()
    time.sleep(1.0)
    start = time.monotonic()
    s.close()
    t.join(timeout=15)
    assert not t.is_alive() and time.monotonic() - start < 10
    r = out["r"]
    assert getattr(r, "verdict", None) is ExecVerdict.SESSION_DEAD, r
    assert s.state is SessionState.CLOSED


def test_asyncio_forms(box: Sandbox) -> None:
    async def episode(i: int) -> str:
        async with box.open_session({"n": str(i).encode()}, SMALL, image=IMAGE) as s:
            await s.awrite_file("m", b"+1")
            r = await s.aexec("sleep 0.3; cat n m")
            files = await s.asnapshot(["*"])
            assert set(files) == {"n", "m"}
            assert [e.path for e in await s.alist_files()] == ["m", "n"]
            assert await s.aread_file("m") == b"+1"
            return r.stdout.text

    async def main() -> tuple[list[str], float]:
        start = time.monotonic()
        out = await asyncio.gather(*(episode(i) for i in range(4)))
        return list(out), time.monotonic() - start

    out, elapsed = asyncio.run(main())
    assert out == [f"{i}+1" for i in range(4)]
    assert elapsed < 4 * 0.3 + 5  # they ran at once, not one after another


def test_many_asyncio_commands_wait_at_once(box: Sandbox) -> None:
    """More commands in flight than asyncio's default executor has threads (cores + 4)."""
    count = 24
    sessions = [box.open_session(None, SMALL, image=IMAGE) for _ in range(count)]
    try:
        async def main() -> float:
            start = time.monotonic()
            results = await asyncio.gather(*(s.aexec("sleep 2") for s in sessions))
            assert all(r.ok for r in results), results
            return time.monotonic() - start

        elapsed = asyncio.run(main())
    finally:
        for s in sessions:
            s.close()
    assert elapsed < count * 2 / ((os.cpu_count() or 1) + 4), elapsed


def test_sessions_of_one_sandbox_from_many_threads(box: Sandbox) -> None:
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with box.open_session({"i": str(i).encode()}, SMALL, image=IMAGE) as s:
                assert s.exec("cat i").stdout.text == str(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_network_is_off_unless_asked(isolating_box: Sandbox) -> None:
    interfaces = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
    with isolating_box.open_session(None, SMALL, image=IMAGE) as off:
        r = off.exec(interfaces)
        assert r.ok and r.stdout.text.split() == ["lo"], r.stdout.text
    with isolating_box.open_session(None, SessionLimits(network=True), image=IMAGE) as on:
        r = on.exec(interfaces)
        assert r.ok and set(r.stdout.text.split()) - {"lo"}, r.stdout.text
        if isolating_box.name == "bwrap":  # the host's network itself: reach a listener on it
            with socket.socket() as srv:
                srv.bind(("0.0.0.0", 0))
                srv.listen()
                port = srv.getsockname()[1]
                host = socket.gethostbyname(socket.gethostname())
                r = on.exec(["python", "-c",
                             f"import socket;socket.create_connection(('{host}',{port}),3)"])
                assert r.ok, r


@pytest.mark.bwrap
def test_spares_are_kept_for_a_bounded_number_of_limits() -> None:
    from verify_cli.sandbox.registry import create_sandbox

    own = create_sandbox("bwrap")
    try:
        for memory in range(100, 112):
            own.open_session(None, SessionLimits(memory_mb=memory)).close()
        pool = own.__dict__["_sessions"].spares
        deadline = time.monotonic() + 20
        while pool.ready() < 16 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(pool._ready) == pool.max_keys == 8
        assert pool.ready() == 16
        assert SessionLimits(memory_mb=100) not in pool._ready  # the oldest keys lost theirs
    finally:
        own.close()
