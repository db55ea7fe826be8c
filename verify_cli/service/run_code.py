"""SandboxFusion's ``POST /run_code``, run in verify-cli's sandboxes.

The request and answer are SandboxFusion's (``sandbox/server/sandbox_api.py``): the code is
written to a file in a fresh work folder with the request's ``files`` (base64), run as
SandboxFusion runs it (``python F.py``, ``pytest F.py``, ``node F.js``, ``bash F.sh``) with
``stdin``, under ``run_timeout`` and ``memory_limit_MB``, and ``fetch_files`` come back base64.
The status follows SandboxFusion's ``parse_run_status``: ``SandboxError`` when the sandbox failed
(verl scores that -1, an API error, never a wrong answer), ``Failed`` on a time limit or a
non-zero exit, else ``Success``. Languages other than these four are refused with a 422 naming
``/language``: nothing is run.
"""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from verify_cli.sandbox.base import Cancellation, Limits, RunResult, RunSpec, Sandbox, Verdict
from verify_cli.sandbox.environment import scratch_root
from verify_cli.service.core import ServiceConfig, ServiceError, decode_files
from verify_cli.service.models import CommandRunResult, CommandRunStatus, RunCodeRequest, RunCodeResponse, RunStatus
from verify_cli.tasks.paths import unsafe_relative_path

#: The folder fetched files are copied to before the run ends (inside the results folder).
_FETCH_DIR = "fetched"


@dataclass(frozen=True)
class _Language:
    suffix: str
    command: str  # {file} is the code's file name
    runtime: str
    image: str


LANGUAGES: dict[str, _Language] = {
    "python": _Language(".py", "python {file}", "python", "verify-cli/python:3.11"),
    "pytest": _Language(".py", "python -m pytest -q -p no:cacheprovider {file}", "python", "verify-cli/python:3.11"),
    "nodejs": _Language(".js", "node {file}", "node", "verify-cli/node:20"),
    "bash": _Language(".sh", "/bin/bash {file}", "shell", "verify-cli/python:3.11"),
}


def check_request(req: RunCodeRequest) -> dict[str, bytes]:
    """The request's files, decoded; ServiceError (a 422 naming the field) for a request that
    cannot run: an unsupported language, a bad path or base64."""
    if req.language not in LANGUAGES:
        raise ServiceError(422, "unsupported_language", f"language {req.language!r} is not run by verify-cli",
                           field="/language", hint=f"supported: {', '.join(sorted(LANGUAGES))}")
    for i, path in enumerate(req.fetch_files):
        why = unsafe_relative_path(_fetch_key(path))
        if why:
            raise ServiceError(422, "invalid_path", f"fetch path {path!r} {why}", field=f"/fetch_files/{i}")
    return decode_files(req.files, "files")


def _fetch_key(path: str) -> str:
    """Where a fetched file is kept in the results folder: a relative path as it is, an
    absolute one (SandboxFusion allows ``/tmp/out.txt``) under ``abs/``."""
    return f"abs/{path.lstrip('/')}" if path.startswith("/") else f"rel/{path}"


def physical_memory_mb() -> int:
    """The machine's memory in MB: the limit of a run that asks for none (-1)."""
    try:
        return max(256, os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024))
    except (ValueError, OSError):
        return 16 * 1024


def run_spec(req: RunCodeRequest, config: ServiceConfig, root: Path, cancel: Cancellation | None = None) -> RunSpec:
    """Lay out ``root`` for ``req`` and say how to run it (``cancel`` stops it early)."""
    files = check_request(req)
    lang = LANGUAGES[req.language]
    for rel, data in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    name = f"verify_run_code{lang.suffix}"
    (root / name).write_text(req.code, encoding="utf-8")
    command = lang.command.format(file=name)
    if req.fetch_files:
        # Copied into the results folder after the code ends, keeping its exit status.
        copies = " ".join(
            f"if [ -f {shlex.quote(p)} ]; then mkdir -p \"$VERIFY_RESULTS_DIR/{_FETCH_DIR}/$(dirname "
            f"{shlex.quote(_fetch_key(p))})\" && cp {shlex.quote(p)} "
            f"\"$VERIFY_RESULTS_DIR/{_FETCH_DIR}/\"{shlex.quote(_fetch_key(p))}; fi;"
            for p in req.fetch_files)
        command = f"{command}; rc=$?; {copies} exit $rc"
    seconds = min(max(0.1, req.run_timeout), config.max_run_seconds)
    # SandboxFusion: -1 (the default) is no limit: the machine's memory, or the service's cap
    memory = (req.memory_limit_MB if req.memory_limit_MB > 0
              else config.default_memory_mb or physical_memory_mb())
    limits = Limits(wall_seconds=seconds, memory_mb=memory)
    return RunSpec(command=["/bin/sh", "-c", command], workdir=root, limits=limits,
                   stdin=req.stdin.encode("utf-8") if req.stdin is not None else None,
                   image=lang.image, runtime=lang.runtime, labels={"verify-cli.phase": "run_code"}, cancel=cancel)


def response_of(req: RunCodeRequest, run: RunResult) -> RunCodeResponse:
    """SandboxFusion's answer for ``run``."""
    if run.verdict.is_infrastructure:
        result = CommandRunResult(status=CommandRunStatus.Error, execution_time=run.wall_seconds,
                                  stdout=run.stdout.text, stderr=run.stderr.text or run.message)
        return RunCodeResponse(status=RunStatus.SandboxError, message=run.message or run.verdict.value,
                               run_result=result)
    if run.verdict is Verdict.TIMEOUT:
        status, code = CommandRunStatus.TimeLimitExceeded, None
    else:
        status = CommandRunStatus.Finished
        code = run.exit_code if run.exit_code is not None else (-run.signal if run.signal else 1)
    result = CommandRunResult(status=status, execution_time=round(run.wall_seconds, 6), return_code=code,
                              stdout=run.stdout.text, stderr=run.stderr.text)
    failed = status is CommandRunStatus.TimeLimitExceeded or code != 0
    fetched = {}
    for path in req.fetch_files:
        data = run.results.get(f"{_FETCH_DIR}/{_fetch_key(path)}")
        if data is not None:
            fetched[path] = base64.b64encode(data).decode("ascii")
    return RunCodeResponse(status=RunStatus.Failed if failed else RunStatus.Success, message="",
                           run_result=result, files=fetched)


def run_code(sandbox: Sandbox, req: RunCodeRequest, config: ServiceConfig,
             cancel: Cancellation | None = None) -> RunCodeResponse:
    """Run ``req`` to completion in ``sandbox`` (blocking: call it on a worker); ``cancel``
    set meanwhile kills the run (its answer is then a SandboxError nobody reads)."""
    root = Path(tempfile.mkdtemp(prefix="verify-run-code-", dir=scratch_root()))
    try:
        spec = run_spec(req, config, root, cancel)
        try:
            run = sandbox.run(spec)
        except Exception as e:  # a backend bug is a sandbox error, never the code's verdict
            run = RunResult(Verdict.INFRA_ERROR, sandbox.name, message=f"{type(e).__name__}: {e}")
        return response_of(req, run)
    finally:
        shutil.rmtree(root, ignore_errors=True)
