"""What the built-in runners (``verify_stdio``, ``verify_calls``) share: their configuration,
the candidate's environment, running the candidate program under a time limit, and the results
they write (JUnit XML and the signed record the grader holds the JUnit file against).

Stdlib only: it runs under the task's interpreter inside the sandbox. The runner is the trusted
side of the run; the candidate only ever runs as a separate process whose environment holds
none of the runner's variables (no seal key, no results folder, no harness path).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from typing import Any

# Imports are kept to what every run needs: a run of the calls runner costs little more than an
# interpreter start, so a heavy module (dataclasses pulls in inspect) would dominate it.

CONFIG_ENV = "VERIFY_RUNNER_CONFIG"
SEAL_KEY_ENV = "VERIFY_SEAL_KEY"
#: The descriptor that holds the run's seal key (verify_cli/sandbox/plumbing/trusted_launch.py): the key
#: is never in any process's environment.
SEAL_FD_ENV = "VERIFY_SEAL_FD"
SEAL_PREFIX = "verify-seal-"
RESULTS_FILE = "junit.xml"
TEST_DIRS = ("tests", "hidden_tests")
#: Mirrored in verify_cli/sandbox/plumbing/trusted_launch.py.
TRUSTED_HOME_ENV = "VERIFY_TRUSTED_HOME"

#: Variables the candidate keeps; everything else (VERIFY_*, PYTHONPATH of the harness, the
#: seal key) stays on the runner's side.
CANDIDATE_VARIABLES = ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ", "PYTHONHASHSEED",
                       "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "NO_COLOR", "CI")

_XML_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;", "\r": "&#13;",
                "\t": "&#9;"}


def quoteattr(text: str) -> str:
    """``text`` as a double-quoted XML attribute; characters XML 1.0 cannot hold become '?'.
    (xml.sax.saxutils would do, but importing it costs more than a whole run of the calls.)"""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _XML_ESCAPES:
            out.append(_XML_ESCAPES[ch])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF or code in (0xFFFE, 0xFFFF):
            out.append("?")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_dumps = json.dumps
_hmac_new = hmac.new
_sha256 = hashlib.sha256


PR_SET_DUMPABLE = 4


def not_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): no process of the same user may read this one's memory
    (``/proc/PID/mem``, ptrace) or its ``/proc/PID/environ``: a process that held the key."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except Exception:
        pass


def scrub_environment(name: str) -> str:
    """Remove ``name`` from the environment, overwriting its bytes where libc keeps them (so
    ``/proc/self/environ`` does not show it either); returns its value. Shared with the pytest
    plugin (verify_harness), which must not make a runner import pytest."""
    value = os.environ.get(name, "")
    if not value:
        return ""
    not_dumpable()  # a process that held a secret: no other process may read its memory
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        addr = libc.getenv(name.encode())
        if addr:
            ctypes.memset(addr, ord("x"), len(value.encode()))
    except Exception:
        pass
    os.environ.pop(name, None)
    return value


def take_seal_key() -> str:
    """The grader's per-run secret, read once from the pipe ``$VERIFY_SEAL_FD`` names, which is
    then closed (and the variable dropped, so no child sees a number); this process is made not
    dumpable first. ``""`` without one (a second reader of the same run finds the pipe empty)."""
    name = os.environ.pop(SEAL_FD_ENV, "")
    if not name:
        return ""
    not_dumpable()  # a process that holds the secret: no other process may read its memory
    try:
        fd = int(name)
    except ValueError:
        return ""
    data = b""
    try:
        while len(data) < 256:
            chunk = os.read(fd, 256)
            if not chunk:
                break
            data += chunk
    except OSError:
        return ""
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return data.decode("ascii", "replace").strip()


def read_config() -> dict[str, Any]:
    raw = os.environ.pop(CONFIG_ENV, "")
    try:
        config = json.loads(raw) if raw else {}
    except ValueError:
        config = {}
    return config if isinstance(config, dict) else {}


def candidate_environment() -> dict[str, str]:
    """The candidate program's variables: the run's, its home the work folder (the runner's own
    home, where the sandbox gives it one, is the trusted side's private folder)."""
    env = {k: os.environ[k] for k in CANDIDATE_VARIABLES if k in os.environ}
    if os.environ.get(TRUSTED_HOME_ENV):
        env["HOME"] = workdir()
    return env


def trusted_environment() -> dict[str, str]:
    """The variables of a trusted program the runner starts (the task's checker): the
    candidate's, with the trusted side's home and temporary folder where the sandbox gives it
    one, and no user site (trusted_launch.py's rule)."""
    env = candidate_environment()
    home = os.environ.get(TRUSTED_HOME_ENV, "")
    if home:
        env["HOME"] = env["TMPDIR"] = home
    env["PYTHONNOUSERSITE"] = "1"
    return env


def workdir() -> str:
    return os.environ.get("VERIFY_WORKDIR") or os.getcwd()


def start_runner() -> tuple[str, dict[str, Any], str, str]:
    """What every built-in runner does first, in this order: take the seal key (before anything
    else can run), read its configuration, find the work folder and the results folder."""
    key = take_seal_key()
    config = read_config()
    root = workdir()
    return key, config, root, os.environ.get("VERIFY_RESULTS_DIR", root)


def find_files(root: str, suffix: str) -> list[tuple[str, str]]:
    """(work-folder relative path, absolute path) of files ending in ``suffix`` under the test
    folders, sorted."""
    out: list[tuple[str, str]] = []
    for folder in TEST_DIRS:
        base = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(suffix):
                    path = os.path.join(dirpath, name)
                    out.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    return out


def hash_test_files(root: str) -> dict[str, str]:
    """SHA-256 of every file under the test folders: the candidate runs in the same work folder,
    so the runner holds the folders against this snapshot before trusting a file from them."""
    out: dict[str, str] = {}
    for folder in TEST_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as fh:
                        digest = _sha256(fh.read()).hexdigest()
                except OSError:
                    digest = "unreadable"
                out[os.path.relpath(path, root)] = digest
    return out


def changed_test_files(root: str, before: dict[str, str]) -> list[str]:
    now = hash_test_files(root)
    return [f"test file {rel} {'added' if rel not in before else 'deleted' if rel not in now else 'changed'}"
            for rel in sorted(set(now) | set(before)) if now.get(rel) != before.get(rel)]


def case_classname(rel: str) -> str:
    """JUnit classname of a case file: its folder, dotted (``hidden_tests/cases`` ->
    ``hidden_tests.cases``), so weight patterns like ``hidden_tests.*`` apply."""
    folder = rel.rsplit("/", 1)[0] if "/" in rel else ""
    return folder.replace("/", ".")


class CaseResult:
    """One test case of the run: ``outcome`` is passed, failed, error or skipped."""

    __slots__ = ("classname", "message", "name", "outcome", "seconds")

    def __init__(self, classname: str, name: str, outcome: str = "passed", message: str = "",
                 seconds: float = 0.0) -> None:
        self.classname = classname
        self.name = name
        self.outcome = outcome
        self.message = message
        self.seconds = seconds

    @property
    def id(self) -> str:
        return f"{self.classname}::{self.name}" if self.classname else self.name


class Program:
    """The result of one run of the candidate program."""

    __slots__ = ("returncode", "seconds", "stderr", "stdout", "timed_out", "truncated")

    def __init__(self, stdout: bytes = b"", stderr: bytes = b"", returncode: int | None = None,
                 timed_out: bool = False, seconds: float = 0.0, truncated: bool = False) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.returncode = returncode
        self.timed_out = timed_out
        self.seconds = seconds
        self.truncated = truncated


def kill_group(proc: Any) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_program(command: str, *, cwd: str, stdin: bytes, seconds: float,
                output_limit: int) -> Program:
    """Run ``command`` (a shell command) as its own process group, feed ``stdin``, capture up
    to ``output_limit`` bytes of stdout; kill the whole group at the time limit or at the end.

    Under two-process grading (``VERIFY_CHANNEL`` set) the program runs in the candidate's own
    sandbox, through the candidate server's ``exec`` op (docs/wire-protocol.md)."""
    if os.environ.get("VERIFY_CHANNEL"):
        return _run_remote(command, cwd=cwd, stdin=stdin, seconds=seconds, output_limit=output_limit)
    import subprocess

    started = time.monotonic()
    proc = subprocess.Popen(["/bin/sh", "-c", command], cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=candidate_environment(), start_new_session=True, close_fds=True)
    try:
        out, err = proc.communicate(stdin, timeout=seconds)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    finally:
        kill_group(proc)
    truncated = len(out) > output_limit
    return Program(stdout=out[:output_limit], stderr=err[-4000:], returncode=proc.returncode,
                   timed_out=timed_out, seconds=time.monotonic() - started, truncated=truncated)


def _run_remote(command: str, *, cwd: str, stdin: bytes, seconds: float, output_limit: int) -> Program:
    import socket

    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "candidate"))
    from verify_wire import decode, encode, read_frame, write_frame

    started = time.monotonic()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    deadline = started + min(seconds, 30.0) + 30.0
    while True:  # the server may still be starting
        try:
            sock.connect(os.environ["VERIFY_CHANNEL"])
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)
    try:
        sock.settimeout(seconds + 10.0)
        write_frame(sock, {"id": 1, "op": "exec", "argv": encode(["/bin/sh", "-c", command]),
                           "env": encode(candidate_environment()), "cwd": encode(cwd),
                           "stdin": encode(stdin), "timeout": encode(float(seconds))})
        reply = read_frame(sock)
    except (OSError, EOFError) as e:
        return Program(stderr=f"the candidate sandbox did not answer: {e}".encode(), returncode=None,
                       timed_out=isinstance(e, TimeoutError), seconds=time.monotonic() - started)
    finally:
        sock.close()
    if "error" in reply:
        err = reply["error"] if isinstance(reply["error"], dict) else {}
        return Program(stderr=str(err.get("message", "")).encode(), returncode=None,
                       timed_out=err.get("type") == "TimeoutError", seconds=time.monotonic() - started)
    result = decode(reply.get("ok"))
    out = bytes(result["stdout"])
    return Program(stdout=out[:output_limit], stderr=bytes(result["stderr"])[-4000:],
                   returncode=int(result["returncode"]), seconds=time.monotonic() - started,
                   truncated=len(out) > output_limit)


def write_results(results_dir: str, suite: str, cases: list[CaseResult], key: str,
                  tampered: list[str] | None = None) -> None:
    """The JUnit file and, with a key, the signed record of the same outcomes."""
    failures = sum(c.outcome == "failed" for c in cases)
    errors = sum(c.outcome == "error" for c in cases)
    skipped = sum(c.outcome == "skipped" for c in cases)
    lines = ['<?xml version="1.0" encoding="utf-8"?>', "<testsuites>",
             f'<testsuite name={quoteattr(suite)} tests="{len(cases)}" failures="{failures}" '
             f'errors="{errors}" skipped="{skipped}">']
    for c in cases:
        head = (f'<testcase classname={quoteattr(c.classname)} name={quoteattr(c.name)} '
                f'time="{c.seconds:.4f}"')
        message = c.message[:2000]
        if c.outcome == "passed":
            lines.append(head + "/>")
        elif c.outcome == "skipped":
            lines.append(head + f"><skipped message={quoteattr(message)}/></testcase>")
        else:
            tag = "failure" if c.outcome == "failed" else "error"
            lines.append(head + f"><{tag} message={quoteattr(message)}/></testcase>")
    lines += ["</testsuite>", "</testsuites>", ""]
    with open(os.path.join(results_dir, RESULTS_FILE), "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    if key:
        outcomes = {c.id: c.outcome for c in cases}
        status = 0 if not (failures or errors) else 1
        payload = _dumps({"version": 1, "pid": os.getpid(), "exitstatus": status,
                          "collected": [c.id for c in cases], "outcomes": outcomes,
                          "tampered": list(tampered or [])[:50]},
                         sort_keys=True)
        mac = _hmac_new(key.encode(), payload.encode(), _sha256).hexdigest()
        path = os.path.join(results_dir, f"{SEAL_PREFIX}{os.getpid()}.json")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(_dumps({"payload": payload, "mac": mac}))


def finish(cases: list[CaseResult]) -> None:
    """Exit as a test runner does: 0 when every case passed, 1 otherwise (none counts as not)."""
    sys.stdout.flush()
    ok = bool(cases) and all(c.outcome == "passed" for c in cases)
    sys.exit(0 if ok else 1)
