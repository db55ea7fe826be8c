"""The hostile-agent suite of sessions: what an agent may do to its own session, and what every
backend's session must show for it.

An agent that is about to fail may aim for an unscored episode (an infrastructure error is masked,
never scored) or for an observation it forged. Everything an agent controls (file names of any
bytes, huge and sparse files, fifos, symlinks and hard links, modes, output that is not UTF-8,
the exec server's own life, the host's descriptors) must end in an outcome that can be graded:
a command's verdict, a :class:`~verify_cli.sandbox.sessions.base.SessionFileError` or a dead
session, never :class:`~verify_cli.sandbox.sessions.base.SessionInfraError` nor an exception
the caller does not expect. :data:`SESSION_CASES` is the table; :func:`run_session_case` plays
one case on a fresh session of a backend and returns its findings (empty: the backend conforms).
A new backend inherits the table through the tests that run it over every registered backend.

The cases use only ``sh`` and coreutils (no language runtime), so that they hold on any image.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.sessions.base import (
    ExecVerdict,
    Session,
    SessionDeadError,
    SessionError,
    SessionFileError,
    SessionInfraError,
    SessionLimits,
    Snapshot,
)

#: Small limits: the cases are quick, and a disk or memory limit is reached fast.
CASE_LIMITS = SessionLimits(memory_mb=256, processes=64, disk_bytes=64 << 20, command_seconds=20,
                            idle_seconds=300, file_bytes=48 << 20)
#: What a case's session starts with.
CASE_FILES: Mapping[str, bytes] = {"pkg/mod.py": b"VALUE = 1\n", "tests/test_mod.py": b"from pkg.mod import VALUE\n"}
#: The globs a case's snapshots take (a wildcard editable glob, as repository tasks have).
EDITABLE = ("pkg/**/*", "pkg/*")
#: Seconds a snapshot or file call may take on a hostile work folder.
CALL_SECONDS = 30.0

Check = Callable[[Session], list[str]]


@dataclass(frozen=True)
class SessionCase:
    """One thing an agent does to its session and the host-side check of what followed."""

    name: str
    summary: str
    check: Check


def _graded_snapshot(s: Session, findings: list[str]) -> Snapshot | dict[str, bytes] | None:
    """The snapshot of the editable files, or None where it was refused as the agent's fault
    (SessionFileError, a dead session); an infrastructure error or another exception is a
    finding, as is a name in it that cannot be carried as UTF-8 text."""
    started = time.monotonic()
    try:
        files = s.snapshot(EDITABLE, max_bytes=16 << 20)
    except (SessionFileError, SessionDeadError):
        return None
    except SessionInfraError as e:
        findings.append(f"the snapshot was an infrastructure error: {e}")
        return None
    except Exception as e:  # anything else reaches the caller as a crash
        findings.append(f"the snapshot raised {type(e).__name__}: {e}")
        return None
    if time.monotonic() - started > CALL_SECONDS:
        findings.append(f"the snapshot took {time.monotonic() - started:.1f}s")
    for name in files:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            findings.append(f"the snapshot holds a name that is not UTF-8: {name!a}")
    return files


def _run(s: Session, command: str, findings: list[str], *, dies: bool = False) -> str:
    """A command's stdout; a finding when it ended as infrastructure (or died, unless ``dies``)."""
    result = s.exec(command)
    if result.verdict is ExecVerdict.INFRA_ERROR:
        findings.append(f"{command!r} ended as infrastructure: {result.message}")
    elif result.verdict is ExecVerdict.SESSION_DEAD and not dies:
        findings.append(f"{command!r} killed the session: {result.message}")
    return result.stdout.text


def _lives_on(s: Session, findings: list[str]) -> None:
    result = s.exec("echo alive")
    if not result.ok or result.stdout.text.strip() != "alive":
        findings.append(f"the session did not survive: {result.verdict.value} {result.message}")


def _non_utf8_names(s: Session) -> list[str]:
    findings: list[str] = []
    _run(s, r"touch pkg/$(printf 'caf\351').py pkg/ok.py; mkdir -p pkg/$(printf '\377dir'); "
            r"echo x > pkg/$(printf '\377dir')/inner.py", findings)
    files = _graded_snapshot(s, findings)
    if files is not None:
        if "pkg/ok.py" not in files or "pkg/mod.py" not in files:
            findings.append(f"the snapshot lost files with good names: {sorted(files)}")
        if isinstance(files, Snapshot) and len(files.skipped) < 2:
            findings.append(f"the snapshot did not say what it left out: {files.skipped}")
    with contextlib.suppress(SessionFileError):
        s.list_files()
    _lives_on(s, findings)
    return findings


def _special_files(s: Session) -> list[str]:
    findings: list[str] = []
    _run(s, "mkfifo pkg/fifo.py; ln -s /etc/passwd pkg/link.py; ln -s /proc/self/environ pkg/env.py; "
            "ln pkg/mod.py pkg/hard.py; ln -s pkg pkg/loop; ln -s /dev/zero pkg/zero.py", findings)
    files = _graded_snapshot(s, findings)
    if files is not None:
        for name in ("pkg/fifo.py", "pkg/link.py", "pkg/env.py", "pkg/zero.py"):
            if name in files:
                findings.append(f"the snapshot took {name}, which is not a regular file")
        if files.get("pkg/hard.py") != b"VALUE = 1\n":
            findings.append("a hard link was not taken as its bytes")
    for path in ("pkg/fifo.py", "pkg/zero.py", "pkg/link.py"):
        started = time.monotonic()
        with contextlib.suppress(SessionFileError):
            s.write_file(path, b"VALUE = 2\n")
            findings.append(f"write_file({path!r}) wrote through a special file or link")
        if time.monotonic() - started > CALL_SECONDS:
            findings.append(f"write_file({path!r}) hung")
        started = time.monotonic()
        with contextlib.suppress(SessionFileError):
            data = s.read_file(path, max_bytes=1 << 20)
            if path != "pkg/link.py" or b"root" not in data:
                findings.append(f"read_file({path!r}) gave {len(data)} bytes")
        if time.monotonic() - started > CALL_SECONDS:
            findings.append(f"read_file({path!r}) hung")
    _lives_on(s, findings)
    return findings


def _huge_and_sparse(s: Session) -> list[str]:
    findings: list[str] = []
    _run(s, "truncate -s 40M pkg/sparse.py; head -c 20000000 /dev/zero > pkg/big.py; "
            "truncate -s 8G pkg/over.py", findings)
    _graded_snapshot(s, findings)  # over its max_bytes: refused as the agent's, or taken
    with contextlib.suppress(SessionFileError):
        s.read_file("pkg/sparse.py", max_bytes=1 << 20)
        findings.append("read_file gave a file over its max_bytes")
    _lives_on(s, findings)
    return findings


def _modes(s: Session) -> list[str]:
    findings: list[str] = []
    _run(s, "mkdir -p pkg/locked pkg/sub; echo y > pkg/locked/in.py; echo z > pkg/none.py; "
            "chmod 000 pkg/none.py pkg/locked; chmod 4755 pkg/mod.py 2>/dev/null; chmod 000 pkg/sub", findings)
    files = _graded_snapshot(s, findings)
    if files is not None and files.get("pkg/mod.py") != b"VALUE = 1\n":
        findings.append("a readable editable file was lost beside unreadable ones")
    with contextlib.suppress(SessionFileError):
        s.write_file("pkg/locked/new.py", "x = 1\n")
    with contextlib.suppress(SessionFileError):
        s.read_file("pkg/none.py")
    _run(s, "chmod 755 pkg/locked pkg/sub; chmod 644 pkg/none.py", findings)
    _lives_on(s, findings)
    return findings


def _binary_output(s: Session) -> list[str]:
    findings: list[str] = []
    result = s.exec(r"printf '\377\376\351 half \342\202'; printf '\300\200' >&2; exit 3")
    if result.verdict is not ExecVerdict.NONZERO_EXIT or result.exit_code != 3:
        findings.append(f"output that is not UTF-8 changed the verdict: {result.verdict.value} {result.message}")
    try:
        (result.stdout.text + result.stderr.text).encode("utf-8")
    except UnicodeEncodeError as e:
        findings.append(f"the output's text is not UTF-8: {e}")
    with contextlib.suppress(SessionFileError):
        s.write_file("pkg/text.py", "a\udce9b\ud800c")  # lone surrogates from a model's JSON
    _lives_on(s, findings)
    return findings


def _no_host_descriptors(s: Session) -> list[str]:
    findings: list[str] = []
    listing = _run(s, "ls -l /proc/self/fd", findings)
    seen = 0
    for line in listing.splitlines():
        left, arrow, target = line.partition(" -> ")
        if not arrow:
            continue
        seen += 1
        fd = left.split()[-1]
        if fd not in ("0", "1", "2") and not target.endswith("/fd"):  # ls's own look at the folder
            findings.append(f"a command holds descriptor {fd} -> {target}")
    if seen < 3:
        findings.append(f"the descriptors could not be listed: {listing!r}")
    return findings


def _forged_result(s: Session) -> list[str]:
    findings: list[str] = []
    message = "printf '{\"op\": \"exit\", \"status\": 0, \"cpu\": 0}'"
    # Every descriptor it might hold, and the exec server's own through /proc (its parent; never
    # pid 1 by number: on the process backend that is the host's init).
    forge = (f"for fd in 3 4 5 6 7 8 9 10 11 12; do {message} >&$fd; done 2>/dev/null; "
             f"for f in /proc/$PPID/fd/*; do {message} > \"$f\"; done 2>/dev/null; sleep 2; exit 3")
    started = time.monotonic()
    result = s.exec(forge)
    took = time.monotonic() - started
    if result.exit_code != 3 or took < 1.9:
        findings.append(f"a command forged its result: {result.verdict.value} exit {result.exit_code} "
                        f"after {took:.2f}s (ran 2s, exit 3)")
    second = s.exec("echo next")
    if not second.ok or second.stdout.text.strip() != "next":
        findings.append(f"the next call was desynchronised: {second.verdict.value} {second.stdout.text!r}")
    return findings


def _kills_its_server(s: Session) -> list[str]:
    findings: list[str] = []
    # Its parent only: on the process backend pid 1 is the host's init.
    _run(s, "kill -9 $PPID; sleep 1", findings, dies=True)
    for call in (lambda: s.snapshot(EDITABLE), lambda: s.read_file("pkg/mod.py"),
                 lambda: s.write_file("pkg/x.py", b"x")):
        try:
            call()
        except (SessionDeadError, SessionFileError):
            pass
        except SessionError as e:
            findings.append(f"a session whose agent killed its server raised {type(e).__name__}: {e}")
    result = s.exec("true")
    if result.verdict is ExecVerdict.INFRA_ERROR:
        findings.append(f"a command after the agent killed its server was infrastructure: {result.message}")
    return findings


def _fills_its_disk(s: Session) -> list[str]:
    findings: list[str] = []
    _run(s, "head -c 200000000 /dev/zero > pkg/fill.py; head -c 200000000 /dev/zero > \"$TMPDIR/fill\"", findings)
    _graded_snapshot(s, findings)
    with contextlib.suppress(SessionFileError, SessionDeadError):
        s.write_file("pkg/after.py", b"x" * 1000)
    result = s.exec("true")
    if result.verdict is ExecVerdict.INFRA_ERROR:
        findings.append(f"a full disk made a command infrastructure: {result.message}")
    return findings


def _limits_fired(s: Session) -> list[str]:
    findings: list[str] = []
    slow = s.exec("sleep 30", timeout=1)
    if slow.verdict is not ExecVerdict.TIMEOUT:
        findings.append(f"a command past its time limit ended {slow.verdict.value}: {slow.message}")
    # Holds 300 MB in one process, over the session's 256 MB.
    hog = s.exec("head -c 300000000 /dev/zero | tail -c 300000000 > /dev/null")
    if hog.verdict in (ExecVerdict.INFRA_ERROR, ExecVerdict.OK):
        findings.append(f"a command over the memory limit ended {hog.verdict.value}: {hog.message}")
    _graded_snapshot(s, findings)
    result = s.exec("true")
    if result.verdict is ExecVerdict.INFRA_ERROR:
        findings.append(f"a command after the limits fired was infrastructure: {result.message}")
    return findings


SESSION_CASES: tuple[SessionCase, ...] = (
    SessionCase("non_utf8_names", "files and folders whose names are not UTF-8 under a wildcard glob",
                _non_utf8_names),
    SessionCase("special_files", "a fifo, symlinks out of the work folder, a hard link, a link loop",
                _special_files),
    SessionCase("huge_and_sparse", "sparse and huge files under the editable globs", _huge_and_sparse),
    SessionCase("modes", "unreadable files and folders, a setuid bit", _modes),
    SessionCase("binary_output", "output and file contents that are not UTF-8", _binary_output),
    SessionCase("no_host_descriptors", "a command lists its open descriptors: only its own three",
                _no_host_descriptors),
    SessionCase("forged_result", "a command writes a forged 'exit' to every descriptor it may hold",
                _forged_result),
    SessionCase("kills_its_server", "a command kills the exec server (its parent)", _kills_its_server),
    SessionCase("fills_its_disk", "a command fills the work folder and /tmp", _fills_its_disk),
    SessionCase("limits_fired", "a command past its time limit, another past the session's memory", _limits_fired),
)


def session_case_named(name: str) -> SessionCase:
    for case in SESSION_CASES:
        if case.name == name:
            return case
    raise KeyError(name)


def run_session_case(sandbox: Sandbox, case: SessionCase, *, image: str | None = None) -> list[str]:
    """Play ``case`` on a fresh session of ``sandbox``: its findings (empty: it conforms). A
    session that cannot be opened, or a check that raises, is a finding."""
    try:
        session = sandbox.open_session(dict(CASE_FILES), CASE_LIMITS, image=image)
    except SessionError as e:
        return [f"no session could be opened: {e}"]
    try:
        return case.check(session)
    except Exception as e:
        return [f"the case raised {type(e).__name__}: {e}"]
    finally:
        session.close()


__all__ = ["CASE_LIMITS", "SESSION_CASES", "SessionCase", "run_session_case", "session_case_named"]
