"""Stand-in programs for the infrastructure a backend runs on, failing the way the real ones do.

A sandbox that did not start must come back ``infra_error`` with the machinery's own words as
its cause, never as the command's failure (a graded 0). These stand-ins make such failures on
demand for the tests and ``sandbox doctor``: a ``bwrap`` earlier on ``PATH`` that fails to
create its namespaces (as bwrap does when the host runs out of user namespaces), always or one
run in N, and one that starts the run but makes every bwrap nested inside it fail (a two-process
run's own sandboxes). Put :func:`standin_bwrap`'s folder first on ``PATH`` of the process that
runs the backend.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

#: What bwrap prints when clone(CLONE_NEWUSER...) fails (ENOSPC: max_user_namespaces reached).
NAMESPACE_FAILURE = "bwrap: Creating new namespace failed: No space left on device"


def _real_bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise FileNotFoundError("bwrap is not installed: the stand-ins wrap the real one")
    return found


def standin_bwrap(folder: Path, *, fail_every: int = 1, nested: bool = False) -> Path:
    """Write a stand-in ``bwrap`` into ``folder`` (returned: put it first on ``PATH``).

    ``fail_every=1``: every start fails to create namespaces; ``N``: the 1st, (N+1)th, ... of
    the starts fail (a counter file beside it), the others run the real bwrap. ``nested``: every
    start runs the real bwrap, but each bwrap started inside the sandbox fails instead (a
    stand-in bound over the sandbox's own ``bwrap``).
    """
    if fail_every < 1:
        raise ValueError("fail_every must be at least 1 (every start fails)")
    folder.mkdir(parents=True, exist_ok=True)
    real = _real_bwrap()
    failing = folder / "bwrap-failing"
    failing.write_text(f"#!/bin/sh\necho {shlex.quote(NAMESPACE_FAILURE)} >&2\nexit 1\n")
    failing.chmod(0o755)
    script = folder / "bwrap"
    counter = folder / "starts"
    if nested:
        # Bind the failing stand-in over the sandbox's bwrap, just before the command ("--").
        body = ("seen=0; bound=0\n"
                'for a in "$@"; do\n'
                '  if [ $seen = 0 ]; then set --; seen=1; fi\n'
                '  if [ "$a" = -- ] && [ $bound = 0 ]; then\n'
                f'    set -- "$@" --ro-bind {shlex.quote(str(failing))} {shlex.quote(real)}; bound=1\n'
                '  fi\n'
                '  set -- "$@" "$a"\n'
                'done\n'
                f'exec {shlex.quote(real)} "$@"\n')
    else:
        # One start at a time counts (flock(1), util-linux, on a lock file of its own; the run's
        # descriptors pass through untouched): concurrent starts each get their own number.
        body = (f"counter={shlex.quote(str(counter))}\n"
                'n=$(flock "$counter.lock" sh -c \'n=$(cat "$1" 2>/dev/null || echo 0); '
                'echo $((n + 1)) > "$1"; echo $n\' sh "$counter")\n'
                f'if [ $((n % {int(fail_every)})) -eq 0 ]; then exec {shlex.quote(str(failing))}; fi\n'
                f'exec {shlex.quote(real)} "$@"\n')
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return folder


def standin_starts(folder: Path) -> int:
    """How many times the stand-in in ``folder`` was started (counting ones only)."""
    try:
        return int((folder / "starts").read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


__all__ = ["NAMESPACE_FAILURE", "standin_bwrap", "standin_starts"]
