"""``ServerSession.aexec``: a session command driven by the event loop itself (the service's
path for ``exec``), on the backends whose sessions run an exec server (process, bwrap, docker).

It must be the thread form's equal (the hostile-agent suite, every verdict), never block the
loop, never let two commands talk over one session, and end cleanly when its session is closed
from another thread or its caller is cancelled."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.conftest import PYTHON_IMAGE, SandboxFor
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.kit.session_cases import CASE_FILES, CASE_LIMITS, SESSION_CASES, SessionCase
from verify_cli.sandbox.sessions import ExecResult, ExecVerdict, SessionLimits, SessionState
from verify_cli.sandbox.sessions.client import ServerSession

BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param("bwrap", marks=pytest.mark.bwrap, id="bwrap"),
]
#: The hostile-agent suite is played on the two local backends; docker's exec server is the
#: same program, reached the same way, so the calls' own cases cover it.
WITH_DOCKER = [*BACKENDS, pytest.param("docker", marks=pytest.mark.docker, id="docker")]
SMALL = SessionLimits(memory_mb=256, processes=64, disk_bytes=32 << 20, command_seconds=10, idle_seconds=300,
                      max_output_bytes=1 << 20)


@pytest.fixture(params=WITH_DOCKER)
def box(request: pytest.FixtureRequest, sandbox_for: SandboxFor) -> Sandbox:
    return sandbox_for(request.param)


@pytest.fixture
def session(box: Sandbox) -> Iterator[ServerSession]:
    with box.open_session({"hello.txt": b"hi\n"}, SMALL, image=PYTHON_IMAGE) as s:
        assert isinstance(s, ServerSession)
        yield s


class _ThroughAexec:
    """A session whose ``exec`` is its ``aexec`` on an event loop; every other call as is."""

    def __init__(self, session: ServerSession) -> None:
        self._session = session

    def exec(self, command: str | Sequence[str], **options: Any) -> ExecResult:
        return asyncio.run(self._session.aexec(command, **options))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


@pytest.mark.parametrize("case", SESSION_CASES, ids=[c.name for c in SESSION_CASES])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_hostile_agent_gets_a_graded_outcome_through_aexec(backend: str, case: SessionCase,
                                                             sandbox_for: SandboxFor) -> None:
    s = sandbox_for(backend).open_session(dict(CASE_FILES), CASE_LIMITS, image=PYTHON_IMAGE)
    try:
        assert isinstance(s, ServerSession)
        findings = case.check(_ThroughAexec(s))  # type: ignore[arg-type]
    finally:
        s.close()
    assert not findings, "\n".join(findings)


def test_verdicts_output_and_leftovers_match_the_thread_form(session: ServerSession) -> None:
    async def main() -> list[ExecResult]:
        return [await session.aexec("echo out; echo err >&2; exit 3"),
                await session.aexec("sleep 30", timeout=0.5),
                await session.aexec("yes | head -c 5000000"),
                await session.aexec("(sleep 61.25 &) ; echo started"),
                await session.aexec("ps -eo args | grep -c '^sleep 61.25$' || true"),
                await session.aexec("cat", stdin=b"fed\n")]

    code, slow, flood, daemon, left, fed = asyncio.run(main())
    assert (code.verdict, code.exit_code, code.stdout.text, code.stderr.text) == (
        ExecVerdict.NONZERO_EXIT, 3, "out\n", "err\n")
    assert slow.verdict is ExecVerdict.TIMEOUT and slow.wall_seconds < 8
    assert flood.verdict is ExecVerdict.OUTPUT_LIMIT
    assert daemon.ok and left.stdout.text.strip() == "0"  # nothing a command leaves runs on
    assert fed.ok and fed.stdout.text == "fed\n"  # stdin: the thread form, same answer
    assert session.exec("cat hello.txt").stdout.text == "hi\n"


def test_the_loop_keeps_turning_while_a_command_runs(session: ServerSession) -> None:
    async def main() -> tuple[ExecResult, float, int]:
        gaps: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        tick = asyncio.ensure_future(ticker())
        # Threads started while the command runs (counted at their start: a thread of another
        # test's that ends meanwhile must not hide one, as a count of live threads would).
        started: list[threading.Thread] = []
        real_start = threading.Thread.start

        def counting_start(thread: threading.Thread) -> None:
            started.append(thread)
            real_start(thread)

        threading.Thread.start = counting_start  # type: ignore[method-assign]
        try:
            result = await session.aexec("sleep 1; echo done")
        finally:
            threading.Thread.start = real_start  # type: ignore[method-assign]
        grew = len(started)
        done.set()
        await tick
        return result, max(gaps), grew

    result, worst_gap, grew = asyncio.run(main())
    assert result.ok and result.stdout.text == "done\n"
    assert worst_gap < 0.5  # a blocking exec would hold the loop for the whole second
    assert grew == 0  # no thread was started for the command


def test_two_commands_on_one_session_never_talk_over_each_other(session: ServerSession) -> None:
    async def main() -> list[ExecResult]:
        return list(await asyncio.gather(*(session.aexec(f"sleep 0.2; echo {i}") for i in range(4))))

    results = asyncio.run(main())
    assert [r.stdout.text for r in results] == [f"{i}\n" for i in range(4)]


def test_a_sync_call_from_the_loop_thread_meanwhile_is_refused_not_mixed_in(session: ServerSession) -> None:
    async def main() -> tuple[ExecResult, BaseException | None]:
        running = asyncio.ensure_future(session.aexec("sleep 0.3; echo mine"))
        await asyncio.sleep(0.05)
        refused: BaseException | None = None
        try:
            session.read_file("hello.txt")
        except RuntimeError as e:
            refused = e
        return await running, refused

    result, refused = asyncio.run(main())
    assert result.stdout.text == "mine\n"
    assert isinstance(refused, RuntimeError) and "aexec" in str(refused)
    assert session.read_file("hello.txt") == b"hi\n"  # from its own thread, once it is over


def test_a_cancelled_caller_leaves_the_command_to_end_and_the_session_usable(session: ServerSession) -> None:
    async def main() -> ExecResult:
        first = asyncio.ensure_future(session.aexec("sleep 0.3; echo one > one.txt"))
        await asyncio.sleep(0.05)
        first.cancel()
        return await session.aexec("cat one.txt; echo two")

    after = asyncio.run(main())
    assert after.ok and after.stdout.text == "one\ntwo\n"  # its own answer, after the first ended


def test_close_from_another_thread_ends_an_aexec_in_flight(session: ServerSession) -> None:
    async def main() -> ExecResult:
        threading.Timer(0.5, session.close).start()
        return await session.aexec("sleep 30", timeout=60)

    start = time.monotonic()
    result = asyncio.run(main())
    assert result.verdict is ExecVerdict.SESSION_DEAD and time.monotonic() - start < 10
    assert session.state is SessionState.CLOSED
