"""The stdin/stdout runner: ``python -m verify_stdio`` (a task of kind 'stdio').

Each case is a pair ``NAME.in`` / ``NAME.out`` (or ``NAME.ans``) under tests/ or hidden_tests/.
For each, the candidate program (``[stdio] program``, a shell command) runs as a process of its
own with the input on stdin, under the per-case time limit; its output is compared here, in the
runner, never in the candidate's process: exactly, line by line, token by token, numerically
within a tolerance, or by the task's checker program. One JUnit test case per pair. The cases
share a total time budget: once it is spent the rest fail without running.

Configuration comes from the grader in ``VERIFY_RUNNER_CONFIG`` (JSON), taken out of the
environment at start like the seal key.

Imports are kept to what every run needs (the checker's are made when there is one): under
two-process grading the runner starts no process itself.
"""

from __future__ import annotations

import json
import math
import os
import time

from verify_runner_common import (
    CaseResult,
    Program,
    case_classname,
    changed_test_files,
    find_files,
    finish,
    hash_test_files,
    run_program,
    start_runner,
    trusted_environment,
    write_results,
)

EXPECTED_SUFFIXES = (".out", ".ans")


def _lines(data: bytes) -> list[bytes]:
    lines = [line.rstrip() for line in data.replace(b"\r\n", b"\n").split(b"\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _number(token: bytes) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _integer(token: bytes) -> int | None:
    body = token[1:] if token[:1] in (b"-", b"+") else token
    return int(token) if body.isdigit() else None


def _numbers_match(got: bytes, want: bytes, tolerance: float) -> bool:
    if got == want:
        return True
    # Two integers are equal or not: a relative tolerance would pass 1000000 for 1000001, and
    # as floats, integers past 2**53 that differ compare equal.
    i, j = _integer(got), _integer(want)
    if i is not None and j is not None:
        return i == j
    a, b = _number(got), _number(want)
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return False
    return abs(a - b) <= tolerance or abs(a - b) <= tolerance * abs(b)


def compare(mode: str, got: bytes, want: bytes, tolerance: float) -> str:
    """'' when ``got`` is accepted, else why not."""
    if mode == "exact":
        return "" if got == want else "output differs from the expected output (exact comparison)"
    if mode == "lines":
        g, w = _lines(got), _lines(want)
        for i, (a, b) in enumerate(zip(g, w, strict=False)):
            if a != b:
                return f"line {i + 1}: got {a[:80]!r}, expected {b[:80]!r}"
        return "" if len(g) == len(w) else f"got {len(g)} lines, expected {len(w)}"
    g_tokens, w_tokens = got.split(), want.split()
    for i, (a, b) in enumerate(zip(g_tokens, w_tokens, strict=False)):
        same = _numbers_match(a, b, tolerance) if mode == "numeric" else a == b
        if not same:
            return f"token {i + 1}: got {a[:40]!r}, expected {b[:40]!r}"
    if len(g_tokens) != len(w_tokens):
        return f"got {len(g_tokens)} tokens, expected {len(w_tokens)}"
    return ""


def run_checker(checker: str, root: str, input_path: str, expected_path: str, got: bytes,
                seconds: float) -> str:
    """The task's checker decides: '' when it exits 0, else its message.

    The candidate's output reaches it as data the candidate cannot touch: a memfd this runner
    wrote, named to the checker as ``/dev/fd/N`` (never a file in the shared ``/tmp``, which a
    process the candidate left behind could replace with a link to the expected output)."""
    import shlex  # only checker tasks pay for these imports
    import subprocess

    fd = os.memfd_create("verify-actual", 0)
    try:
        _write_all(fd, got)
        os.lseek(fd, 0, os.SEEK_SET)
        command = " ".join([checker, *(shlex.quote(p) for p in (input_path, expected_path, f"/dev/fd/{fd}"))])
        try:
            done = subprocess.run(["/bin/sh", "-c", command], cwd=root, capture_output=True,
                                  timeout=seconds, env=trusted_environment(), pass_fds=(fd,),
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            return f"the checker ran past {seconds:g}s"
        if done.returncode == 0:
            return ""
        said = (done.stdout + done.stderr).decode("utf-8", "replace").strip()
        return f"checker rejected the output (exit {done.returncode}): {said[:500]}"
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _verdict(program: Program, case_seconds: float) -> str:
    if program.timed_out:
        return f"time limit exceeded ({case_seconds:g}s)"
    if program.truncated:
        return "output limit exceeded"
    if program.returncode != 0:
        tail = program.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return f"exit code {program.returncode}: {' | '.join(tail)[:500]}"
    return ""


def _load_cases(root: str) -> list[tuple[CaseResult, bytes, bytes, str, str]]:
    """Every case with its input and expected output read now, before any candidate runs."""
    out: list[tuple[CaseResult, bytes, bytes, str, str]] = []
    for rel, path in find_files(root, ".in"):
        stem = rel[: -len(".in")]
        case = CaseResult(case_classname(rel), stem.rsplit("/", 1)[-1])
        expected_path = next((path[: -len(".in")] + s for s in EXPECTED_SUFFIXES
                              if os.path.isfile(path[: -len(".in")] + s)), "")
        if not expected_path:
            case.outcome, case.message = "error", f"{stem}.in has no {stem}.out"
            out.append((case, b"", b"", path, ""))
            continue
        with open(path, "rb") as fh:
            stdin = fh.read()
        with open(expected_path, "rb") as fh:
            want = fh.read()
        out.append((case, stdin, want, path, expected_path))
    return out


def _trace_case(results_dir: str, case_id: str, program: Program) -> None:
    """Opt-in (``VERIFY_TRACE_CALLS``, audit's mutation runs): what the program did on this
    case, appended to the call trace that checks/audit/observed.py compares."""
    if not os.environ.get("VERIFY_TRACE_CALLS"):
        return
    path = os.path.join(results_dir, "verify-call-trace.jsonl")
    did = {"stdout": program.stdout.hex(), "stderr": program.stderr.hex(), "returncode": program.returncode,
           "timed_out": program.timed_out, "truncated": program.truncated}
    record: dict[str, object] = {"test": case_id, "case": did}
    try:
        if os.path.getsize(path) > 8 * 1024 * 1024:
            record = {"truncated": True}
    except OSError:
        pass
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True) + "\n")
    except OSError:
        pass


def main() -> None:
    key, config, root, results_dir = start_runner()
    program_command = str(config.get("program", ""))
    mode = str(config.get("compare", "lines"))
    tolerance = float(config.get("tolerance", 1e-6))
    checker = str(config.get("checker", ""))
    case_seconds = float(config.get("case_seconds", 5.0))
    total_seconds = float(config.get("total_seconds", 60.0))
    output_limit = int(config.get("output_bytes", 1 << 20))
    started = time.monotonic()
    pristine = hash_test_files(root)
    loaded = _load_cases(root)
    tampered: list[str] = []

    for case, stdin, want, input_path, expected_path in loaded:
        if case.outcome != "passed":
            continue
        left = total_seconds - (time.monotonic() - started)
        if left <= 0:
            case.outcome, case.message = "failed", f"not run: the total time limit ({total_seconds:g}s) was spent"
            continue
        limit = min(case_seconds, left)
        program = run_program(program_command, cwd=root, stdin=stdin, seconds=limit,
                              output_limit=output_limit)
        case.seconds = program.seconds
        _trace_case(results_dir, case.id, program)
        why = _verdict(program, limit)
        if not why and mode == "checker":
            # The checker lives in the test folders, which the candidate could reach: run it
            # only while they are as the task shipped them.
            tampered.extend(changed_test_files(root, pristine))
            why = ("the test folders changed during the run" if tampered else
                   run_checker(checker, root, input_path, expected_path, program.stdout, max(case_seconds, 5.0)))
        elif not why:
            why = compare(mode, program.stdout, want, tolerance)
        if why:
            case.outcome, case.message = "failed", why
    cases = [c for c, *_ in loaded]
    if not cases:
        cases.append(CaseResult("", "cases", "error", "no NAME.in files under tests/ or hidden_tests/"))
    tampered.extend(changed_test_files(root, pristine))
    write_results(results_dir, "stdio", cases, key, list(dict.fromkeys(tampered)))
    finish(cases)


if __name__ == "__main__":
    main()
