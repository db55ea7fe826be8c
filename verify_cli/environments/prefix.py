"""Environments for the local backends (bwrap, process): a virtual environment over a host
interpreter, holding the task's requirements and what its set-up commands install.

The venv is made with uv where it can be found (``uv`` on PATH, or the one beside verify-cli's
venv that ``scripts/setup.sh`` installs), given pip's own index configuration
(:mod:`.pip_config`), else with ``venv`` and pip. Set-up commands run once, in a bubblewrap
sandbox with the network, the starter's files at ``/workspace`` (so ``pip install -e .`` points
at the work folder every run lays out there) and the venv writable; where bubblewrap is absent
(the process backend on a host without it) they run on the host in a copy of the starter.
The finished venv is bound read-only into every run; it never holds verify-cli's own packages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from verify_cli.environments.pip_config import uv_install_options
from verify_cli.environments.spec import EnvironmentSpec
from verify_cli.errors import EnvironmentBuildError

#: Where the starter's files are while set-up commands run (a run's work folder).
WORKSPACE = "/workspace"
#: The longest a build step may take.
STEP_SECONDS = 1800.0

Say = Callable[[str], None]


def find_uv() -> str | None:
    """uv: on PATH, or beside verify-cli's venv (``scripts/setup.sh``'s), or None."""
    found = shutil.which("uv")
    if found:
        return found
    beside = Path(sys.prefix) / "verify-tools" / "uv" / "bin" / "uv"
    return str(beside) if beside.is_file() else None


def find_interpreter(version: str | None) -> str:
    """The host interpreter a venv of Python ``version`` is made over (verify-cli's own base
    interpreter where ``version`` is None or its own)."""
    own = f"{sys.version_info[0]}.{sys.version_info[1]}"
    base = Path(sys.base_prefix) / "bin" / f"python{own}"
    if version is None or version == own:
        return str(base if base.is_file() else Path(sys.executable).resolve())
    found = shutil.which(f"python{version}")
    if found is None:
        raise LookupError(f"no Python {version} interpreter on this host (python{version} is not on PATH)")
    return str(Path(found).resolve())


def interpreter_identity(python: str) -> str:
    """What a venv's behaviour depends on in its interpreter: its path and full version."""
    out = subprocess.run([python, "-c", "import sys,platform; print(sys.version.split()[0], platform.machine())"],
                         capture_output=True, text=True, timeout=60)
    return f"{python} {out.stdout.strip()}"


def run_step(argv: Sequence[str], log: IO[str], what: str, identity: str, log_path: Path, *,
          env: dict[str, str] | None = None, cwd: str | None = None) -> None:
    """Run one build step with its output in the build log; EnvironmentBuildError (the cause from
    the log's tail) where it fails or takes longer than :data:`STEP_SECONDS`."""
    log.write(f"$ {' '.join(argv)}\n")
    log.flush()
    try:
        proc = subprocess.run(list(argv), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                              timeout=STEP_SECONDS, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise EnvironmentBuildError(identity, f"{what} took longer than {STEP_SECONDS:g} s",
                                    log=str(log_path), tail=tail_of(log_path)) from None
    except OSError as e:
        raise EnvironmentBuildError(identity, f"{what}: {e}", log=str(log_path)) from None
    if proc.returncode != 0:
        log.flush()
        tail = tail_of(log_path)
        raise EnvironmentBuildError(identity, f"{what} failed (exit {proc.returncode}): {cause_of(tail)}",
                                    log=str(log_path), tail=tail)


def tail_of(log_path: Path, lines: int = 12) -> str:
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


#: Words that mark the line of a build log that says why it failed.
_CAUSE_MARKS = ("error:", "ERROR:", "No matching distribution", "not found", "Because ", "Could not",
                "No solution", "E: ", "failed", "Traceback")


#: What uv and pip draw around their error lines.
_DECORATION = " |\u00d7\u2570\u2500\u25b6"


def cause_of(tail: str) -> str:
    """The one line of a build log's tail that says why it failed (the last marked one)."""
    lines = [line.strip(_DECORATION) for line in tail.splitlines() if line.strip()]
    marked = [line for line in lines if any(m in line for m in _CAUSE_MARKS)]
    pick = marked[-1] if marked else (lines[-1] if lines else "no output")
    return pick[:300]


def build_prefix(spec: EnvironmentSpec, identity: str, folder: Path, log: IO[str], log_path: Path,
                 *, interpreter: str, say: Say | None = None) -> dict[str, Any]:
    """Build ``spec`` as a venv at ``folder/prefix``; returns the manifest's fields (the layer's
    binds and PATH, the installed packages pinned)."""
    prefix = folder / "prefix"
    uv = find_uv()
    uv_opts = uv_install_options() if uv else None
    uv_args = [o for o in (uv_opts or []) if not o.startswith("SSL_CERT_FILE=")]
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.update(dict(o.split("=", 1) for o in (uv_opts or []) if o.startswith("SSL_CERT_FILE=")))
    use_uv = uv is not None and uv_opts is not None
    if say:
        say(f"venv over {interpreter} ({'uv' if use_uv else 'pip'})")
    if use_uv:
        assert uv is not None
        run_step([uv, "venv", "-q", *(["--seed"] if spec.setup else []), "--python", interpreter, str(prefix)],
              log, "making the venv", identity, log_path, env=env)
    else:
        run_step([interpreter, "-m", "venv", *([] if spec.setup else ["--without-pip"]), str(prefix)],
              log, "making the venv", identity, log_path, env=env)
    python = str(prefix / "bin" / "python")
    if spec.requirements:
        req = folder / "requirements.txt"
        req.write_text("\n".join(spec.requirements) + "\n")
        if say:
            say(f"installing {len(spec.requirements)} requirement(s)")
        if use_uv:
            assert uv is not None
            run_step([uv, "pip", "install", "-q", "--python", python, "--index-strategy", "unsafe-best-match",
                   *uv_args, "-r", str(req)], log, "installing the requirements", identity, log_path, env=env)
        else:
            if not (prefix / "bin" / "pip").exists():
                run_step([python, "-m", "ensurepip", "-q"], log, "adding pip", identity, log_path, env=env)
            run_step([python, "-m", "pip", "install", "-q", "-r", str(req)], log, "installing the requirements",
                  identity, log_path, env=env)
    if spec.setup:
        _run_setup(spec, prefix, log, log_path, identity, env, say)
    # Runs never write bytecode (and the prefix is read-only to them): compiled now, once, or
    # every run would compile what it imports (pytest alone: a second a start).
    run_step([python, "-m", "compileall", "-q", "-j", "0", str(prefix)], log, "byte-compiling", identity, log_path,
          env=env)
    base = subprocess.run([python, "-c", "import sys; print(sys.base_prefix)"], capture_output=True,
                          text=True, timeout=60).stdout.strip()
    freeze = (subprocess.run([uv, "pip", "freeze", "--python", python], capture_output=True, text=True,
                             timeout=120, env=env) if use_uv and uv else
              subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True, timeout=120, env=env))
    return {"form": "prefix", "binds": [str(prefix), *([base] if base else [])], "path": [str(prefix / "bin")],
            "interpreter": interpreter, "packages": [p for p in freeze.stdout.splitlines() if p.strip()],
            "installer": "uv" if use_uv else "pip"}


def _run_setup(spec: EnvironmentSpec, prefix: Path, log: IO[str], log_path: Path, identity: str,
               env: dict[str, str], say: Say | None) -> None:
    with tempfile.TemporaryDirectory(prefix="verify-env-setup-") as tmp:
        work = Path(tmp) / "workspace"
        work.mkdir()
        for rel, src in spec.workspace:
            dest = work / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
        home = Path(tmp) / "home"
        home.mkdir()
        path = f"{prefix / 'bin'}:/usr/local/bin:/usr/bin:/bin"
        run_env = {**env, "PATH": path, "HOME": str(home), "VIRTUAL_ENV": str(prefix)}
        bwrap = shutil.which("bwrap")
        for i, command in enumerate(spec.setup, 1):
            if say:
                say(f"set-up {i}/{len(spec.setup)}: {command}")
            if bwrap:
                argv = [bwrap, *_host_view(), "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                        "--bind", str(prefix), str(prefix), "--bind", str(work), WORKSPACE,
                        "--bind", str(home), str(home), "--chdir", WORKSPACE, "--die-with-parent",
                        "/bin/sh", "-c", command]
                run_step(argv, log, f"set-up command {command!r}", identity, log_path, env=run_env)
            else:
                run_step(["/bin/sh", "-c", command], log, f"set-up command {command!r}", identity, log_path,
                      env=run_env, cwd=str(work))


def _host_view() -> list[str]:
    """bubblewrap binds of the host's top-level folders, read-only (not /proc, /dev, /tmp): a
    build sees the host's tools and package configuration and writes only where it is given."""
    argv: list[str] = []
    for name in sorted(os.listdir("/")):
        if name in ("proc", "dev", "sys", "tmp", "workspace", "run", "lost+found"):
            continue
        path = f"/{name}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    return argv


__all__ = ["build_prefix", "cause_of", "find_interpreter", "find_uv", "interpreter_identity", "run_step", "tail_of"]
