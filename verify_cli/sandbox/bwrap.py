"""``bwrap``: bubblewrap namespaces around the local runner.

All namespaces unshared (no network), read-only system folders, a private size-limited work
folder filled from the caller's files, a private results folder, a fresh session, and
``--die-with-parent``: killing bwrap takes the whole pid namespace with it.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

from verify_cli.sandbox.base import Availability, RunSpec
from verify_cli.sandbox.environment import (
    HARNESS_DIR,
    SANDBOX_HARNESS,
    SANDBOX_RESULTS,
    SANDBOX_TMP,
    SANDBOX_WORKDIR,
    pinned_environment,
)
from verify_cli.sandbox.local import LocalSandbox, Prepared
from verify_cli.sandbox.process import runtime_path
from verify_cli.sandbox.registry import python_runtime_prefixes, register_sandbox

SOURCE_MOUNT = "/.verify-src"
SANDBOX_UID = 1000
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install -y bubblewrap) and make sure "
                "unprivileged user namespaces are enabled (sysctl kernel.unprivileged_userns_clone=1)")

_SYSTEM_DIRS = ("/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/alternatives", "/etc/ssl", "/etc/nsswitch.conf",
              "/etc/localtime")


@functools.lru_cache(maxsize=1)
def _probe() -> Availability:
    exe = shutil.which("bwrap")
    if exe is None:
        return Availability(False, "bwrap is not installed", INSTALL_HINT)
    try:
        proc = subprocess.run([exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Availability(False, f"bwrap failed to start: {e}", INSTALL_HINT)
    if proc.returncode != 0:
        why = proc.stderr.decode(errors="replace").strip() or f"exit {proc.returncode}"
        return Availability(False, f"bwrap cannot create namespaces here: {why}", INSTALL_HINT)
    return Availability(True)


@register_sandbox("bwrap")
class BwrapSandbox(LocalSandbox):
    isolation = ("bubblewrap: all namespaces unshared (no network), read-only system, private tmpfs "
                 "work folder, cgroup/rlimit limits, whole pid namespace killed on timeout")

    @classmethod
    def availability(cls) -> Availability:
        return _probe()

    def prepare(self, spec: RunSpec, scratch: Path) -> Prepared:
        results = scratch / "results"
        results.mkdir(mode=0o777)
        results.chmod(0o777)
        passwd = scratch / "passwd"
        passwd.write_text(f"root:x:0:0:root:/root:/bin/sh\nsandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:"
                          f"sandbox:{SANDBOX_WORKDIR}:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n")
        group = scratch / "group"
        group.write_text(f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n")
        disk = f"{spec.limits.file_bytes}"
        argv = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]
        for d in _SYSTEM_DIRS:
            if Path(d).is_symlink():
                argv += ["--symlink", str(Path(d).readlink()), d]
            elif Path(d).is_dir():
                argv += ["--ro-bind", d, d]
        for f in _ETC_FILES:
            argv += ["--ro-bind-try", f, f]
        argv += ["--ro-bind", str(passwd), "/etc/passwd", "--ro-bind", str(group), "/etc/group"]
        for prefix in python_runtime_prefixes():
            real = str(Path(prefix).resolve())
            if not any(real == d or real.startswith(d + "/") for d in _SYSTEM_DIRS):
                argv += ["--ro-bind", real, real]
                if prefix != real:
                    argv += ["--symlink", real, prefix]
        argv += ["--proc", "/proc", "--dev", "/dev",
                 "--size", disk, "--tmpfs", SANDBOX_TMP,
                 "--size", disk, "--perms", "0755", "--tmpfs", SANDBOX_WORKDIR,
                 "--ro-bind", str(Path(spec.workdir).resolve()), SOURCE_MOUNT,
                 "--bind", str(results), SANDBOX_RESULTS,
                 "--ro-bind", str(HARNESS_DIR), SANDBOX_HARNESS,
                 "--chdir", SANDBOX_WORKDIR, "--"]
        # Copy the caller's files into the private tmpfs, then become the command.
        argv += ["/bin/sh", "-c", f'cp -R {SOURCE_MOUNT}/. {SANDBOX_WORKDIR}/ && exec "$@"', "sh",
                 *spec.command]
        env = pinned_environment(workdir=SANDBOX_WORKDIR, results_dir=SANDBOX_RESULTS,
                                 harness_dir=SANDBOX_HARNESS, tmp_dir=SANDBOX_TMP, path=runtime_path(),
                                 extra=spec.env)
        return Prepared(argv=argv, env=env, cwd="/", results_dir=results, signal_from_status=True)


__all__ = ["BwrapSandbox", "sys"]
