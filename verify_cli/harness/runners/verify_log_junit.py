"""Turn a test runner's log into JUnit XML, for the ``log`` task kind (a project's own runner:
Django's ``tests/runtests.py``, SymPy's ``bin/test``, pytest's ``-rA`` summary).

    python -S -m verify_log_junit PARSER LOG JUNIT

The parsers read the logs as SWE-bench's log parsers do (``swebench.harness.log_parsers``), so a
task imported from a SWE-bench row is judged by the ids and statuses its lists were made with.
Standard library only; it runs in the task's environment.
"""

from __future__ import annotations

import re
import sys
from xml.sax.saxutils import quoteattr

PASSED, FAILED, ERROR, SKIPPED, XFAIL = "PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL"
_FAILING = (FAILED, ERROR)


class Statuses(dict):
    """Test id -> status, where a failing report is final: the candidate's code shares the
    runner's output, so a forged "... ok" line for a test the runner reports failing (before or
    after it) never turns it into a pass; a line where reports ran together names no test."""

    def __setitem__(self, tid: str, state: str) -> None:
        if " ... " in tid:  # two reports run together on one line (output the candidate wrote): no id
            return
        if self.get(tid) not in _FAILING:
            super().__setitem__(tid, state)


def parse_django(log: str) -> dict[str, str]:
    """Django's runner at ``--verbosity 2``: ``test_x (module.Class) ... ok|FAIL|ERROR|skipped``,
    and ``FAIL: test_x (module.Class)`` headers."""
    status: dict[str, str] = Statuses()
    prev = None
    for raw in log.split("\n"):
        line = raw.strip()
        if " ... " in line:
            prev = line.split(" ... ")[0]
        for suffix in (" ... ok", " ... OK", " ...  OK"):
            if line.endswith(suffix):
                status[line.rsplit(suffix, 1)[0]] = PASSED
                break
        if " ... skipped" in line:
            status[line.split(" ... skipped")[0]] = SKIPPED
        if line.endswith(" ... FAIL"):
            status[line.split(" ... FAIL")[0]] = FAILED
        if line.startswith("FAIL:") and len(line.split()) > 1:
            status[line.split(None, 1)[1].strip()] = FAILED
        if line.endswith(" ... ERROR"):
            status[line.split(" ... ERROR")[0]] = ERROR
        if line.startswith("ERROR:") and len(line.split()) > 1:
            status[line.split(None, 1)[1].strip()] = ERROR
        if line.startswith("ok") and prev is not None:  # output between "..." and "ok"
            status[prev] = PASSED
    for pattern in (r"^(.*?)\s\.\.\.\sTesting\ against\ Django\ installed\ in\ ((?s:.*?))\ silenced\)\.\nok$",
                    r"^(.*?)\s\.\.\.\sInternal\ Server\ Error:\ \/(.*)\/\nok$",
                    r"^(.*?)\s\.\.\.\sSystem check identified no issues \(0 silenced\)\nok$"):
        for match in re.finditer(pattern, log, re.MULTILINE):
            status[match.group(1)] = PASSED
    return status


def parse_sympy(log: str) -> dict[str, str]:
    """SymPy's ``bin/test -C --verbose``: ``test_x ok|F|E`` lines, and the failure headers."""
    status: dict[str, str] = Statuses()
    for match in re.findall(r"(_*) (.*)\.py:(.*) (_*)", log):
        status[f"{match[1]}.py:{match[2]}"] = FAILED
    for raw in log.split("\n"):
        line = raw.strip()
        if line.startswith("test_"):
            name = line.split()[0]
            if line.endswith(" E"):
                status[name] = ERROR
            elif line.endswith(" F"):
                status[name] = FAILED
            elif line.endswith(" ok"):
                status[name] = PASSED
    return status


def parse_pytest_log(log: str) -> dict[str, str]:
    """pytest's ``-rA`` short summary: ``PASSED tests/test_x.py::test_y`` (and FAILED, ERROR,
    SKIPPED, XFAIL, XPASS) lines."""
    status: dict[str, str] = Statuses()
    for raw in log.split("\n"):
        parts = raw.strip().split()
        if len(parts) >= 2 and parts[0] in (PASSED, FAILED, ERROR, SKIPPED, XFAIL, "XPASS"):
            status[parts[1]] = PASSED if parts[0] == "XPASS" else parts[0]
    return status


PARSERS = {"django": parse_django, "sympy": parse_sympy, "pytest-log": parse_pytest_log}


def junit(status: dict[str, str]) -> str:
    """One test case per test id (its name the id, as the lists name it)."""
    cases = []
    for tid, state in status.items():
        inner = {FAILED: '<failure message="failed"/>', ERROR: '<error message="error"/>',
                 SKIPPED: '<skipped message="skipped"/>',
                 XFAIL: '<skipped type="pytest.xfail" message="xfail"/>'}.get(state, "")
        cases.append(f"<testcase name={quoteattr(tid)}>{inner}</testcase>")
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite tests="{len(cases)}">'
            + "".join(cases) + "</testsuite></testsuites>\n")


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[1] not in PARSERS:
        sys.stderr.write(f"usage: verify_log_junit {{{','.join(PARSERS)}}} LOG JUNIT\n")
        return 2
    with open(argv[2], encoding="utf-8", errors="replace") as fh:
        log = fh.read()
    with open(argv[3], "w", encoding="utf-8") as fh:
        fh.write(junit(PARSERS[argv[1]](log)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
