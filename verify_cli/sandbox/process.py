"""``process``: a plain subprocess in its own session, under rlimits (and a cgroup where writable).

No file system or network isolation: the command can read whatever the user running verify-cli
can. Use it only when asked for, or as the announced fallback.
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from verify_cli.sandbox.base import RunSpec, RuntimeLayer
from verify_cli.sandbox.environment import (
    CHANNEL_SOCKET,
    DEFAULT_PATH,
    candidate_environment,
    candidate_exec_prefix,
    candidate_harness_dir,
    harness_dir,
    pinned_environment,
)
from verify_cli.sandbox.local import LocalSandbox, Prepared, key_stdin_of
from verify_cli.sandbox.plumbing.trusted_launch import CLOSE_SEAL_FD, MOVE_SEAL_FD
from verify_cli.sandbox.registry import register_sandbox

if TYPE_CHECKING:
    from verify_cli.sandbox.sessions.base import Session, SessionLimits, Workspace


@functools.cache
def runtime_path() -> str:
    """PATH for local backends: the running interpreter's folder first, then the system's."""
    return f"{Path(sys.executable).parent}:{DEFAULT_PATH}"


def run_path(spec: RunSpec) -> str:
    """PATH of ``spec``'s run on a local backend: its environment's folders first
    (:attr:`RunSpec.layer`), else the running interpreter's (:func:`runtime_path`)."""
    return spec.layer.search_path(DEFAULT_PATH) if spec.layer is not None else runtime_path()


@register_sandbox("process")
class ProcessSandbox(LocalSandbox):
    isolation = ("none: plain subprocess with rlimits/cgroup limits and process-group kill; "
                 "no file system or network isolation")
    two_process = True
    two_process_gaps = (
        "no file system isolation: the candidate process can read the tests, the hidden tests, "
        "the results folder and the harness",
        "same user, no pid namespace: the candidate process can see the test process "
        "(/proc/<pid>/environ, signals)",
        "no network isolation",
    )

    def sessions_unavailable(self) -> str | None:
        return None

    def open_session(self, workspace: Workspace = None, limits: SessionLimits | None = None, *,
                     env: Mapping[str, str] | None = None, image: str | None = None,
                     labels: Mapping[str, str] | None = None, layer: RuntimeLayer | None = None) -> Session:
        """A session whose exec server is a plain subprocess: NOT isolated
        (:mod:`verify_cli.sandbox.sessions.process`); ``image`` and ``labels`` are ignored."""
        from verify_cli.sandbox.sessions.base import SessionLimits as _Limits
        from verify_cli.sandbox.sessions.process import open_process_session

        return open_process_session(workspace, limits or _Limits(), env, layer)

    def prepare(self, spec: RunSpec, scratch: Path) -> Prepared:
        results = scratch / "results"
        tmp = scratch / "tmp"
        results.mkdir()
        tmp.mkdir()
        workdir = str(Path(spec.workdir).resolve())
        extra = dict(spec.env)
        key_stdin = key_stdin_of(spec, extra)
        env = pinned_environment(workdir=workdir, results_dir=str(results), harness_dir=str(harness_dir()),
                                 tmp_dir=str(tmp), path=run_path(spec), extra=extra)
        os.chmod(workdir, 0o755)
        argv = list(spec.command)
        if spec.candidate is not None:
            channel_dir = scratch / "channel"
            channel_dir.mkdir(mode=0o700)
            channel = str(channel_dir / CHANNEL_SOCKET)
            env.update(VERIFY_CHANNEL=channel, VERIFY_CANDIDATE_EXEC=candidate_exec_prefix(
                sys.executable, str(harness_dir()), channel))
            cand_env = candidate_environment(workdir=workdir, tmp_dir=str(tmp), channel=channel,
                                             candidate_harness=str(candidate_harness_dir()),
                                             path=run_path(spec), extra=spec.candidate.env)
            start = shlex.join(["env", "-i", *(f"{k}={v}" for k, v in sorted(cand_env.items())),
                                *spec.candidate.command])
            script = f'{start}{CLOSE_SEAL_FD} &\n"$@"\nstatus=$?\nkill $! 2>/dev/null\nexit $status\n'
            if key_stdin is not None:
                script = f"{MOVE_SEAL_FD}\n{script}"
            argv = ["/bin/sh", "-c", script, "sh", *argv]
        elif key_stdin is not None:
            argv = ["/bin/sh", "-c", f'{MOVE_SEAL_FD}; exec "$@"', "sh", *argv]
        return Prepared(argv=argv, env=env, cwd=workdir, results_dir=results, key_stdin=key_stdin)
