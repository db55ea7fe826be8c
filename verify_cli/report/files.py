"""Write reports: JSON documents and JUnit XML with one test case per task."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verify_cli.checks.report import TaskReport, TaskVerdict
from verify_cli.errors import UsageError


def write_json(path: str | Path, document: dict[str, Any]) -> None:
    """Write ``document`` to ``path`` atomically; ``-`` writes to standard output."""
    text = json.dumps(document, indent=2, sort_keys=False, default=str)
    if str(path) == "-":
        sys.stdout.write(text + "\n")
        return
    _atomic_write(Path(path), text.encode("utf-8"))


def _umask() -> int:
    """The process umask (read by setting it, then restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; a path that cannot be written is a UsageError."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600; reports are shared
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise UsageError(f"{path}: cannot write the report: {e.strerror or e}",
                         hint="give the path of a file in a writable folder") from None


def junit_document(reports: Sequence[TaskReport], *, suite: str = "verify-cli check-tasks") -> bytes:
    """JUnit XML with one test case per task: defective tasks and tasks not gradeable two-process
    fail, infrastructure errors error."""
    failures = sum(r.verdict in (TaskVerdict.DEFECTIVE, TaskVerdict.NOT_GRADEABLE, TaskVerdict.ENVIRONMENT_ERROR)
                   for r in reports)
    errors = sum(r.verdict is TaskVerdict.ERROR for r in reports)
    total_time = sum(r.reference_seconds or 0.0 for r in reports)
    root = ET.Element("testsuites", name=suite, tests=str(len(reports)), failures=str(failures),
                      errors=str(errors), time=f"{total_time:.3f}")
    ts = ET.SubElement(root, "testsuite", name=suite, tests=str(len(reports)), failures=str(failures),
                       errors=str(errors), time=f"{total_time:.3f}")
    for r in reports:
        case = ET.SubElement(ts, "testcase", classname=r.domain, name=r.task_id,
                             time=f"{r.reference_seconds or 0.0:.3f}", file=r.path)
        if r.verdict is TaskVerdict.ENVIRONMENT_ERROR:
            el = ET.SubElement(case, "failure", message="environment-error", type="EnvironmentError")
            el.text = "\n".join(f"{c.name}: {c.message}" for c in r.defects)
        elif r.verdict is TaskVerdict.DEFECTIVE:
            names = ", ".join(c.name for c in r.defects)
            el = ET.SubElement(case, "failure", message=f"defective: {names}", type="DefectiveTask")
            el.text = "\n".join(f"{c.name}: {c.message}" for c in r.defects)
        elif r.verdict is TaskVerdict.NOT_GRADEABLE:
            el = ET.SubElement(case, "failure", message="not gradeable two-process",
                               type="NotGradeableTwoProcess")
            el.text = "\n".join(f"{c.name}: {c.message}" for c in r.gaps)
        elif r.verdict is TaskVerdict.ERROR:
            el = ET.SubElement(case, "error", message="could not be checked", type="InfrastructureError")
            el.text = "\n".join(f"{c.name}: {c.message}" for c in r.warnings)
        warn = [c for c in r.warnings if c.status.value == "warn"]
        if warn:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(f"warning {c.name}: {c.message}" for c in warn)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def write_junit(path: str | Path, reports: Sequence[TaskReport]) -> None:
    _atomic_write(Path(path), junit_document(reports))
