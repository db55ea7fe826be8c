"""The shell programs of a single-use container (collector, runner, warm launcher) and the
orders the host writes them."""

from __future__ import annotations

import io
import json
import re
import shlex
from collections.abc import Sequence
from typing import IO

from verify_cli.sandbox.base import (
    RunSpec,
)
from verify_cli.sandbox.docker.archives import write_workdir_tar
from verify_cli.sandbox.docker.containers import WARM_SCRIPT
from verify_cli.sandbox.environment import (
    SANDBOX_HARNESS,
    SANDBOX_RESULTS,
    SANDBOX_WORKDIR,
)
from verify_cli.sandbox.plumbing.trusted_launch import absolute_harness_requires, seal_key_heredoc

#: Starts docker_warm.py under the interpreter the command's first word names, found as the
#: command's shell finds it: ``$0`` is that word, ``$1`` the mode, ``$2`` the preload list.
WARM_LAUNCHER = (
    'case "$1" in '
    f'module) exec "$0" -s {WARM_SCRIPT} module "$0" "$2" ;; '
    'script) s=$(command -v "$0") || exit 97; IFS= read -r l < "$s" || exit 97; '
    'case "$l" in "#!/"*) ;; *) exit 97 ;; esac; i=${l#??}; '
    'case "$i" in *" "*|*"	"*) exit 97 ;; esac; '
    f'exec "$i" -s {WARM_SCRIPT} script "$s" "$2" ;; '
    'esac; exit 97')
WARM_READY = b"\x03ready"


COUNTER_FILES = ("/sys/fs/cgroup/cpuacct/cpuacct.usage /sys/fs/cgroup/cpu.stat "
                  "/sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events")
COUNTERS_MARK = b"verify-counters\n"
RESULTS_MARK = b"\nverify-results\n"
#: pid 1 of every container. Woken by a line on stdin (or SIGUSR1), it kills every other process,
#: prints the counters with shell builtins only (no fork: the process limit may be spent) and
#: becomes ``tar -c`` of the results folder.
COLLECTOR = (
    "c() { trap '' USR1; kill -9 -1 2>/dev/null; printf 'verify-counters\\n'; "
    f"for f in {COUNTER_FILES}; do "
    '[ -r "$f" ] && while IFS= read -r l || [ -n "$l" ]; do printf \'%s\\n\' "$l"; done < "$f"; '
    "done; printf '\\nverify-results\\n'; "
    f"exec tar -c -f - -C {SANDBOX_RESULTS} .; }}; trap c USR1; read -r _; c"
)
#: The runner: reads a script up to a line equal to its ``$0`` (a per-container nonce), then
#: evaluates it. ``read`` takes stdin a byte at a time, so the tar stream after it stays unread.
RUNNER = ('s=; while IFS= read -r l; do [ "$l" = "$0" ] && break; s="$s$l\n"; done; '
           '[ "$l" = "$0" ] || exit 0; eval "$s"')
#: First byte the runner writes on stderr: 1 once the work folder is in place, 2 before tar's
#: complaint when it is not (then it exits 125). Nothing of the run has started before either.
READY = b"\x01"
UNPACK_FAILED = 125
#: Processes the runner's unpacking takes at most (sh, subshell, head, tar).
RUNNER_PROCESSES = 4
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def runner_script(nonce: str, spec: RunSpec, archive_bytes: int | None) -> bytes:
    """What the runner evaluates: unpack the work folder from stdin (only ``archive_bytes`` of it
    when the run's stdin follows), set the run's environment, mark ready, become the command.
    Every value is shell-quoted; the runner's own variables are not exported."""
    source = "" if archive_bytes is None else f"head -c {archive_bytes} | "
    env = dict(spec.env)
    key_doc = seal_key_heredoc(env)  # the key on a descriptor of the command's, in no environment
    if env.get("NODE_OPTIONS"):  # preloads by absolute path, never looked up from the work folder
        env["NODE_OPTIONS"] = absolute_harness_requires(env["NODE_OPTIONS"], SANDBOX_HARNESS)
    lines = [
        f"e=$({source}TAR_OPTIONS= tar -x -f - -C {SANDBOX_WORKDIR} 2>&1) || "
        f"{{ printf '\\002%s\\n' \"$e\" >&2; exit {UNPACK_FAILED}; }}",
        "unset PWD OLDPWD",  # the shell's own; a direct exec has neither
        *(f"export {name}={shlex.quote(value)}" for name, value in env.items()),
        "printf '\\001' >&2",
        "exec " + " ".join(shlex.quote(arg) for arg in spec.command) + key_doc,
        nonce,
    ]
    return ("\n".join(lines) + "\n").encode()


def read_at_start(name: str) -> bool:
    """Whether the interpreter or pytest reads ``name`` once, at start (a warm pool's key).
    Not ``PYTEST_ADDOPTS``: each run's pytest reads it, in its own work folder (its ``-c`` names
    the trusted configuration there; a warm-up elsewhere would not find it)."""
    return (name.startswith(("PYTHON", "PYTEST_", "LC_")) or name in ("LANG", "HOME")) and name != "PYTEST_ADDOPTS"


def warm_job(spec: RunSpec, args: Sequence[str]) -> bytes:
    """What docker_warm.py reads before the work folder: a length line, then the JSON header."""
    cpu = spec.limits.cpu_seconds
    header = json.dumps({
        "env": dict(spec.env), "args": list(args),
        "cpu_seconds": None if cpu is None else max(1, int(cpu + 0.999)),
    }).encode()
    return f"{len(header)}\n".encode() + header


def feed_runner(out: io.RawIOBase, script: bytes, spec: RunSpec,
                 archive: IO[bytes] | None) -> None:
    out.write(script)
    if archive is None:
        write_workdir_tar(out, spec.workdir)
        return
    archive.seek(0)
    while chunk := archive.read(1 << 16):
        out.write(chunk)
    if spec.stdin:
        out.write(spec.stdin)
