"""``process``: a plain subprocess in its own session, under rlimits (and a cgroup where writable).

No file system or network isolation: the command can read whatever the user running verify-cli
can. Use it only when asked for, or as the announced fallback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from verify_cli.sandbox.base import RunSpec
from verify_cli.sandbox.environment import DEFAULT_PATH, HARNESS_DIR, pinned_environment
from verify_cli.sandbox.local import LocalSandbox, Prepared
from verify_cli.sandbox.registry import register_sandbox


def runtime_path() -> str:
    """PATH for local backends: the running interpreter's folder first, then the system's."""
    return f"{Path(sys.executable).parent}:{DEFAULT_PATH}"


@register_sandbox("process")
class ProcessSandbox(LocalSandbox):
    isolation = ("none: plain subprocess with rlimits/cgroup limits and process-group kill; "
                 "no file system or network isolation")

    def prepare(self, spec: RunSpec, scratch: Path) -> Prepared:
        results = scratch / "results"
        tmp = scratch / "tmp"
        results.mkdir()
        tmp.mkdir()
        workdir = str(Path(spec.workdir).resolve())
        env = pinned_environment(workdir=workdir, results_dir=str(results), harness_dir=str(HARNESS_DIR),
                                 tmp_dir=str(tmp), path=runtime_path(), extra=spec.env)
        os.chmod(workdir, 0o755)
        return Prepared(argv=list(spec.command), env=env, cwd=workdir, results_dir=results)
