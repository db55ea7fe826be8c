"""The warm runner of a pooled docker container: pytest imported before the job arrives.

Started by the docker backend (``verify_cli.sandbox.docker``) as the waiting process of a
pooled container, under the interpreter the task's command names (stdlib and pytest only). A
pooled container serves one run and is destroyed after it, so the container itself is the
isolation boundary: nothing here forks. The process

1. imports pytest, its plugins (through a dry session, as ``warm_worker.warm_up`` does) and the
   task's preload modules, with its output sent to /dev/null, then empties /tmp, /workspace and
   /results again;
2. says it is ready (``\\x03ready <cgroup cpu usec>`` on stderr) and waits on stdin for the job:
   a length line, a JSON header (the run's variables and pytest's arguments), then the work folder
   as a tar stream;
3. unpacks the work folder with ``tar`` exactly as the cold runner does (``\\x02`` + tar's
   complaint and exit 125 when it cannot), sets the environment a cold run's command sees, changes
   to /workspace, writes the cold runner's ready byte (``\\x01``) and runs pytest in-process
   (``python -m pytest ARGS`` or the ``pytest`` script); then shuts down the way the interpreter
   does and ``os._exit``-s with pytest's status.

The variables an interpreter reads at start (``PYTHONHASHSEED``...) are the job's already: the
backend keys its warm pools by them.
"""

from __future__ import annotations

import os
import sys

_START_ENV = dict(os.environ)  # before anything of ours: what the exec gave us

import contextlib  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import warm_worker  # noqa: E402  (same folder: sys.path[0])

WORKDIR = "/workspace"
RESULTS = "/results"
TMP = "/tmp"
WARMUP_DIR = "/tmp/.verify-warmup"
READY = b"\x01"
WARM_READY = b"\x03ready"
UNPACK_FAILED = 125
UNFIT = 97
_HEADER_MAX = 1 << 22


def _empty(folder: str) -> None:
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)


def _cgroup_cpu_usec() -> int:
    with contextlib.suppress(OSError, ValueError), open("/sys/fs/cgroup/cpu.stat") as fh:
        for line in fh:
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value)
    with contextlib.suppress(OSError, ValueError), open("/sys/fs/cgroup/cpuacct/cpuacct.usage") as fh:
        return int(fh.read().strip()) // 1000
    return 0


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """File descriptors 1 and 2 on /dev/null meanwhile (what imports and a dry session print;
    stdout is the container's protocol), flushed and put back after."""
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def warm_up(preload: list[str]) -> bool:
    os.makedirs(WARMUP_DIR)
    with open(os.path.join(WARMUP_DIR, "test_warm_up.py"), "w") as fh:
        fh.write(warm_worker.WARMUP_TEST)
    warm_worker.WARMUP_DIR = WARMUP_DIR  # the dry session's folder
    with silenced():
        _loaded, failed = warm_worker.warm_up(preload)
    for folder in (TMP, WORKDIR, RESULTS):
        _empty(folder)
    return "<pytest>" not in failed


def _read_exact(n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(0, n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def _read_job() -> dict[str, object] | None:
    line = b""
    while not line.endswith(b"\n"):
        c = os.read(0, 1)
        if not c or len(line) > 16:
            return None
        line += c
    size = int(line)
    if size > _HEADER_MAX:
        return None
    data = _read_exact(size)
    return json.loads(data) if len(data) == size else None


def _unpack(env: dict[str, str]) -> None:
    """``tar -x`` of stdin into /workspace, as the cold runner does it."""
    r, w = os.pipe()
    tar_env = dict(env)
    tar_env["TAR_OPTIONS"] = ""
    pid = os.posix_spawnp("tar", ["tar", "-x", "-f", "-", "-C", WORKDIR], tar_env,
                          file_actions=[(os.POSIX_SPAWN_DUP2, w, 1),
                                        (os.POSIX_SPAWN_DUP2, w, 2),
                                        (os.POSIX_SPAWN_CLOSE, r)])
    os.close(w)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk[: max(0, 65536 - len(out))]
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        os.write(2, b"\x02" + out.rstrip(b"\n") + b"\n")
        os._exit(UNPACK_FAILED)


def _limit_cpu(seconds: object) -> None:
    """The run's CPU-time limit counts from now (the container's ulimit left room for the warm-up)."""
    if not isinstance(seconds, int):
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime + 0.999)
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    new_hard = used + seconds + 1
    if hard != resource.RLIM_INFINITY:
        new_hard = min(new_hard, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (min(used + seconds, new_hard), new_hard))


def run_job(mode: str, program: str) -> None:
    job = _read_job()
    if job is None:
        os._exit(0)  # the host went away (a discarded pool container)
    env = {k: v for k, v in _START_ENV.items() if k not in ("PWD", "OLDPWD")}
    env.update({str(k): str(v) for k, v in dict(job["env"]).items()})  # type: ignore[call-overload]
    env["PWD"] = WORKDIR  # the command's shell exports it
    env = warm_worker._key_to_pipe(env)  # the seal key: in a pipe (not inherited), in no environment
    _unpack(env)
    args = [str(a) for a in job["args"]]  # type: ignore[attr-defined]
    _limit_cpu(job.get("cpu_seconds"))
    try:
        os.chdir(WORKDIR)
        os.environ.clear()
        os.environ.update(env)
        import time

        time.tzset()
        warm_worker._reseed_copied_generators()
        del job
    except BaseException as e:
        os.write(2, f"\x02warm runner setup failed: {type(e).__name__}: {e}\n".encode())
        os._exit(UNPACK_FAILED)
    os.write(2, READY)
    # In module mode ``program`` is the interpreter word the command used (its argv[0]).
    os._exit(warm_worker.run_pytest_as_command(mode, program, args, program))


def main(argv: list[str]) -> None:
    mode, program, preload = argv[1], argv[2], argv[3]
    if mode not in ("module", "script") or not warm_up([m for m in preload.split(",") if m]):
        os._exit(UNFIT)
    os.write(2, WARM_READY + f" {_cgroup_cpu_usec()}\n".encode())
    run_job(mode, program)


if __name__ == "__main__":
    main(sys.argv)
