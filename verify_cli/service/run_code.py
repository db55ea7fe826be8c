"""SandboxFusion's ``POST /run_code``, run in verify-cli's sandboxes.

The request and answer are SandboxFusion's (``sandbox/server/sandbox_api.py``): the code is
written to a file in a fresh work folder with the request's ``files`` (base64), run as
SandboxFusion runs it (``python F.py``, ``pytest F.py``, ``node F.js``, ``bash F.sh``; compiled
languages compiled first: :mod:`verify_cli.service.languages`) with ``stdin``, under
``run_timeout`` (the compile step under ``compile_timeout``) and ``memory_limit_MB``, and
``fetch_files`` come back base64. The status follows SandboxFusion's ``parse_run_status``:
``SandboxError`` when the sandbox failed or the language's toolchain is not here (verl scores
that -1, an API error, never a wrong answer), ``Failed`` on a compile error (``compile_result``
with the compiler's output, no ``run_result``), a time limit or a non-zero exit, else
``Success``. Languages outside the table are refused with a 422 naming ``/language``.
"""

from __future__ import annotations

import base64
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from verify_cli.sandbox.base import Cancellation, Limits, RunResult, RunSpec, Sandbox, Verdict
from verify_cli.sandbox.environment import scratch_root
from verify_cli.service.core import ServiceConfig, ServiceError, decode_files
from verify_cli.service.languages import JAVATUPLES_JAR, LANGUAGES, Toolchains
from verify_cli.service.models import CommandRunResult, CommandRunStatus, RunCodeRequest, RunCodeResponse, RunStatus
from verify_cli.tasks.paths import unsafe_relative_path

#: The folder fetched files are copied to before the run ends (inside the results folder).
_FETCH_DIR = "fetched"
#: The compile and run steps' status files of a compiled language (inside the results folder).
_STEPS_DIR = "run_code"


def check_request(req: RunCodeRequest) -> dict[str, bytes]:
    """The request's files, decoded; ServiceError (a 422 naming the field) for a request that
    cannot run: an unsupported language, a bad path or base64."""
    if req.language not in LANGUAGES:
        raise ServiceError(422, "unsupported_language", f"language {req.language!r} is not run by verify-cli",
                           field="/language", hint=f"supported: {', '.join(LANGUAGES)}")
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


def _timed(command: str, timeout: float, name: str, stdin: str = "") -> str:
    """``command`` under ``timeout`` seconds, its exit status and start and end times (ns)
    written to the steps folder as ``name``."""
    status = f"\"$VERIFY_RESULTS_DIR/{_STEPS_DIR}/{name}\""
    return (f"t0=$(date +%s%N); timeout -k 1 {timeout:g} /bin/sh -c {shlex.quote(command)}{stdin}; rc=$?; "
            f"echo \"$rc $t0 $(date +%s%N)\" > {status}")


def run_spec(req: RunCodeRequest, config: ServiceConfig, root: Path, cancel: Cancellation | None = None,
             image: str | None = None) -> RunSpec:
    """Lay out ``root`` for ``req`` and say how to run it (``cancel`` stops it early; ``image``:
    the toolchain image of a compiled language on docker)."""
    files = check_request(req)
    lang = LANGUAGES[req.language]
    for rel, data in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    (root / lang.file).write_text(req.code, encoding="utf-8")
    classpath = shlex.quote(":".join([".", JAVATUPLES_JAR, *sorted(r for r in files if r.endswith(".jar"))]))
    seconds = min(max(0.1, req.run_timeout), config.max_run_seconds)
    wall = seconds
    if lang.compile is None and not lang.needs_toolchain:
        command = lang.run.replace("{classpath}", classpath)
    else:
        # Compile, then (when it succeeded) run, as SandboxFusion's run_commands does: each step
        # under its own time limit, the compile's output kept apart from the run's.
        compile_seconds = min(max(0.1, req.compile_timeout), config.max_run_seconds)
        steps = f"mkdir -p \"$VERIFY_RESULTS_DIR/{_STEPS_DIR}\"; "
        out = f"\"$VERIFY_RESULTS_DIR/{_STEPS_DIR}/compile."
        if lang.compile is not None:
            compile_command = lang.compile.replace("{classpath}", classpath)
            steps += _timed(compile_command, compile_seconds, "compile.status",
                            f" </dev/null >{out}stdout\" 2>{out}stderr\"") + "; "
            wall += compile_seconds
        else:
            steps += "rc=0; "
        run = _timed(lang.run.replace("{classpath}", classpath), seconds, "run.status")
        command = f"{steps}if [ $rc -eq 0 ]; then {run}; (exit $rc); fi"
        wall += 3.0  # the steps' own limits end them first: the sandbox's is a backstop
    if req.fetch_files:
        # Copied into the results folder after the code ends, keeping its exit status.
        copies = " ".join(
            f"if [ -f {shlex.quote(p)} ]; then mkdir -p \"$VERIFY_RESULTS_DIR/{_FETCH_DIR}/$(dirname "
            f"{shlex.quote(_fetch_key(p))})\" && cp {shlex.quote(p)} "
            f"\"$VERIFY_RESULTS_DIR/{_FETCH_DIR}/\"{shlex.quote(_fetch_key(p))}; fi;"
            for p in req.fetch_files)
        command = f"{command}; rc=$?; {copies} exit $rc"
    # SandboxFusion: -1 (the default) is no limit: the machine's memory, or the service's cap
    memory = (req.memory_limit_MB if req.memory_limit_MB > 0
              else config.default_memory_mb or physical_memory_mb())
    limits = Limits(wall_seconds=wall, memory_mb=memory)
    return RunSpec(command=["/bin/sh", "-c", command], workdir=root, limits=limits,
                   stdin=req.stdin.encode("utf-8") if req.stdin is not None else None,
                   image=image or lang.image, runtime=lang.runtime, labels={"verify-cli.phase": "run_code"},
                   cancel=cancel)


def _step(run: RunResult, name: str) -> tuple[int, float] | None:
    """A compiled language's step status: (exit status, seconds), None when it did not run."""
    raw = run.results.get(f"{_STEPS_DIR}/{name}")
    try:
        rc, t0, t1 = (int(x) for x in (raw or b"").split())
    except ValueError:
        return None
    return rc, max(0.0, (t1 - t0) / 1e9)


def _timed_out(rc: int, seconds: float, limit: float) -> bool:
    # timeout(1) exits 124 at its limit (137 when the command needed the KILL)
    return rc in (124, 137) and seconds >= limit - 0.05


def _compiled_response(req: RunCodeRequest, config: ServiceConfig, run: RunResult) -> RunCodeResponse | None:
    """SandboxFusion's answer for a compiled language's ``run``; None where its steps left no
    trace (the sandbox ended it: judged as an interpreted run)."""
    lang = LANGUAGES[req.language]
    compiled = _step(run, "compile.status") if lang.compile is not None else None
    if lang.compile is not None and compiled is None:
        return None
    compile_result = None
    if compiled is not None:
        rc, took = compiled
        limit = min(max(0.1, req.compile_timeout), config.max_run_seconds)
        out, err = ((run.results.get(f"{_STEPS_DIR}/compile.{k}") or b"").decode("utf-8", "replace")
                    for k in ("stdout", "stderr"))
        if _timed_out(rc, took, limit):
            compile_result = CommandRunResult(status=CommandRunStatus.TimeLimitExceeded,
                                              execution_time=round(took, 6), stdout=out, stderr=err)
        else:
            compile_result = CommandRunResult(status=CommandRunStatus.Finished, execution_time=round(took, 6),
                                              return_code=rc, stdout=out, stderr=err)
        if compile_result.status is not CommandRunStatus.Finished or rc != 0:
            # a compile error is the code's failure: graded, with the compiler's output
            return RunCodeResponse(status=RunStatus.Failed, message="", compile_result=compile_result)
    ran = _step(run, "run.status")
    if ran is None:
        return None
    rc, took = ran
    limit = min(max(0.1, req.run_timeout), config.max_run_seconds)
    if run.verdict is Verdict.TIMEOUT or _timed_out(rc, took, limit):
        result = CommandRunResult(status=CommandRunStatus.TimeLimitExceeded, execution_time=round(took, 6),
                                  stdout=run.stdout.text, stderr=run.stderr.text)
    else:
        result = CommandRunResult(status=CommandRunStatus.Finished, execution_time=round(took, 6), return_code=rc,
                                  stdout=run.stdout.text, stderr=run.stderr.text)
    failed = result.status is CommandRunStatus.TimeLimitExceeded or rc != 0
    return RunCodeResponse(status=RunStatus.Failed if failed else RunStatus.Success, message="",
                           compile_result=compile_result, run_result=result, files=_fetched(req, run))


def _fetched(req: RunCodeRequest, run: RunResult) -> dict[str, str]:
    fetched = {}
    for path in req.fetch_files:
        data = run.results.get(f"{_FETCH_DIR}/{_fetch_key(path)}")
        if data is not None:
            fetched[path] = base64.b64encode(data).decode("ascii")
    return fetched


def response_of(req: RunCodeRequest, run: RunResult, config: ServiceConfig | None = None) -> RunCodeResponse:
    """SandboxFusion's answer for ``run``."""
    if run.verdict.is_infrastructure:
        result = CommandRunResult(status=CommandRunStatus.Error, execution_time=run.wall_seconds,
                                  stdout=run.stdout.text, stderr=run.stderr.text or run.message)
        return RunCodeResponse(status=RunStatus.SandboxError, message=run.message or run.verdict.value,
                               run_result=result)
    if LANGUAGES[req.language].needs_toolchain:
        compiled = _compiled_response(req, config or ServiceConfig(roots=()), run)
        if compiled is not None:
            return compiled
    if run.verdict is Verdict.TIMEOUT:
        status, code = CommandRunStatus.TimeLimitExceeded, None
    else:
        status = CommandRunStatus.Finished
        code = run.exit_code if run.exit_code is not None else (-run.signal if run.signal else 1)
    result = CommandRunResult(status=status, execution_time=round(run.wall_seconds, 6), return_code=code,
                              stdout=run.stdout.text, stderr=run.stderr.text)
    failed = status is CommandRunStatus.TimeLimitExceeded or code != 0
    return RunCodeResponse(status=RunStatus.Failed if failed else RunStatus.Success, message="",
                           run_result=result, files=_fetched(req, run))


def unavailable_response(message: str) -> RunCodeResponse:
    """SandboxFusion's answer for a language this service cannot run (a SandboxError: verl
    scores it as an API error, never as a wrong answer)."""
    return RunCodeResponse(status=RunStatus.SandboxError, message=message,
                           run_result=CommandRunResult(status=CommandRunStatus.Error, stderr=message))


def run_code(sandbox: Sandbox, req: RunCodeRequest, config: ServiceConfig,
             cancel: Cancellation | None = None, toolchains: Toolchains | None = None) -> RunCodeResponse:
    """Run ``req`` to completion in ``sandbox`` (blocking: call it on a worker); ``cancel``
    set meanwhile kills the run (its answer is then a SandboxError nobody reads);
    ``toolchains``: where compiled languages' compilers are (default: the host's)."""
    toolchains = toolchains or Toolchains(sandbox)
    why = toolchains.unavailable(req.language)
    if why is not None:
        return unavailable_response(why)
    root = Path(tempfile.mkdtemp(prefix="verify-run-code-", dir=scratch_root()))
    try:
        spec = run_spec(req, config, root, cancel, toolchains.image_for(req.language))
        try:
            run = sandbox.run(spec)
        except Exception as e:  # a backend bug is a sandbox error, never the code's verdict
            run = RunResult(Verdict.INFRA_ERROR, sandbox.name, message=f"{type(e).__name__}: {e}")
        return response_of(req, run, config)
    finally:
        shutil.rmtree(root, ignore_errors=True)
