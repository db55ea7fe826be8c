"""Failure messages an author can read: the candidate's frames first, the harness's dropped.

pytest's JUnit writer cuts a failure's ``message`` attribute after ten lines; two-process, those
ten lines are the exception's first line and then the harness's own frames (the stand-in's call,
the candidate server's dispatch), so the candidate's line never shows. :func:`readable_failure`
rebuilds the message from the element's full text where the attribute was cut, keeps the
exception line and the candidate's frames, names the test's own line, and drops every frame of
verify-cli's harness. Messages of other runners, and of in-process runs, come back unchanged.
"""

from __future__ import annotations

import re

#: pytest's mark on a message attribute it shortened (``_pytest.junitxml``).
_SHORTENED = re.compile(r"\n\[\+\d+ more lines?; full report in element text\]\s*$")
#: The note the stand-in adds to an exception raised in the candidate's process.
CANDIDATE_NOTE = "in the candidate process:"
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')
#: Where verify-cli's harness lives in a sandbox (sandbox/environment.py) and, for backends
#: without a file system of their own, on the host: the run-time folder ``harness_dir`` builds
#: (``verify-cli-harness-*``) or the package's sources.
_HARNESS_PARTS = ("/opt/verify-harness/", "/opt/verify-candidate/", "/verify-cli-harness-", "/verify_cli/harness/")
_HARNESS_FILES = re.compile(r"(^|/)verify_[a-z_]+\.py$")
#: pytest's location line of a long report: ``tests/test_x.py:8: AssertionError`` or ``...:8: ``.
_LOCATION = re.compile(r"^(?P<path>[^\s:][^:]*\.py):(?P<line>\d+):(?: .*)?$")
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
LIMIT = 2000


def is_harness_path(path: str) -> bool:
    """A file of verify-cli's own harness (never the task's nor the candidate's)."""
    return any(part in path for part in _HARNESS_PARTS) or (
        path.startswith("/opt/") and bool(_HARNESS_FILES.search(path)))


def _error_lines(text: str) -> str:
    """The ``E`` lines of a pytest long report (the exception as raised), de-indented."""
    lines = [ln[1:] for ln in text.splitlines() if ln.startswith("E") and (len(ln) == 1 or ln[1] == " ")]
    if not lines:
        return ""
    indent = min((len(ln) - len(ln.lstrip(" ")) for ln in lines if ln.strip()), default=0)
    return "\n".join(ln[indent:] for ln in lines)


#: Messages that only label a failure (pytest's for a test module that did not import, a fixture
#: or set-up error): the report's last exception line says what went wrong.
#: pytest's message for a test module that did not import (the cause follows it, where found).
COLLECTION_FAILURE = "collection failure"
_LABELS = (COLLECTION_FAILURE, "failed on setup with", "error", "failed")


def is_collection_failure(message: str) -> bool:
    """Whether a test's message says its module did not import (pytest's label, with or without
    the cause :func:`readable_failure` adds)."""
    return message.strip().startswith(COLLECTION_FAILURE)
_EXCEPTION_LINE = re.compile(r"^(?:E\s+)?((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)\b:? ?.*)$")


def _last_exception(text: str) -> str:
    """The last ``Name: message`` exception line of a report (``ModuleNotFoundError: No module
    named 'lxml'``), or ``""``."""
    found = ""
    for ln in text.splitlines():
        m = _EXCEPTION_LINE.match(ln.strip())
        if m:
            found = m.group(1).strip()
    return found[:300]


def line_in_test(text: str) -> str:
    """The test's own line from a pytest long report: ``tests/test_x.py:8: assert f(x) == 3``
    (the ``>`` line just before the first location that is not a harness file), or ``""``."""
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        m = _LOCATION.match(ln)
        if not m or is_harness_path(m["path"]):
            continue
        code = next((lines[j][1:].strip() for j in range(i - 1, -1, -1) if lines[j].startswith(">")), "")
        return f"{m['path']}:{m['line']}" + (f": {code}" if code else "")
    return ""


def _is_library(path: str) -> bool:
    return path.startswith("<") or "/lib/python" in path or "site-packages" in path


def candidate_frames(message: str) -> list[tuple[str, bool]]:
    """The frames of the note the stand-in adds (``path:line in func: code``, and whether it is
    the candidate's own file rather than a library's), innermost last, harness frames left out."""
    at = message.find(CANDIDATE_NOTE)
    if at < 0:
        return []
    lines = message[at + len(CANDIDATE_NOTE):].splitlines()
    out: list[tuple[str, bool]] = []
    for i, ln in enumerate(lines):
        m = _FRAME.match(ln)
        if not m or is_harness_path(m["path"]):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        code = nxt.strip() if nxt.startswith("    ") and not _CARETS.match(nxt) else ""
        out.append((f"{m['path']}:{m['line']} in {m['func'].strip()}" + (f": {code}" if code else ""),
                    not _is_library(m["path"])))
    return out


def readable_failure(message: str, text: str = "") -> str:
    """A failure's message for an author: ``message`` (the JUnit attribute) restored from
    ``text`` (the element's full report) where pytest cut it, the candidate's traceback reduced
    to its own frames, and the test's line named. Unchanged when there is nothing to drop."""
    full = message
    if _SHORTENED.search(message):
        full = _error_lines(text) or _SHORTENED.sub("", message)
    elif message.strip().lower() in _LABELS or not message.strip():
        # pytest's label for an error outside a test: the exception that caused it is the cause
        cause = _last_exception(text)
        if cause:
            full = f"{message.strip()}: {cause}" if message.strip() else cause
    at = full.find(CANDIDATE_NOTE)
    if at < 0:
        return (full if full is not message else message).strip()[:LIMIT]
    head = full[:at].rstrip()
    frames = candidate_frames(full)
    parts = [head]
    own = [f for f, mine in frames if mine]
    if own:
        parts.append("in the candidate's code: " + own[-1])
        if frames[-1][0] != own[-1]:
            parts.append(f"  raised in {frames[-1][0]}")
        parts.extend(f"  called from {f}" for f in reversed(own[:-1]))
    elif frames:
        parts.append("in the candidate's process: " + frames[-1][0])
    where = line_in_test(text)
    if where:
        parts.append(f"in the test: {where}")
    return "\n".join(parts)[:LIMIT]
