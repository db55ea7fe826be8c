"""The exec server's own Python, carried into any image: a session needs no runtime of the task's.

A docker session's exec server (``verify_session_server.py``, standard library only) used to run
on the image's ``python``: an image without one (``verify-cli/node:20``, a shell or Go image)
could open no session at all. Instead the host's own interpreter is carried in, read-only, as a
small bundle: the interpreter, the standard-library modules the server imports (found by
importing them, and playing a snapshot and an unpack, in a child of this interpreter), the
shared libraries they load (``ldd``), and the host's dynamic loader, which runs it with those
libraries alone (``ld.so --library-path ... --inhibit-cache``). So the server runs the same on
any image of this machine's architecture, whatever C library (if any) the image holds; the
commands it starts are the image's own programs, with the image's own libraries.

The bundle is built once per interpreter (a few tens of MB, in the system's temporary folder),
named by the interpreter's identity, and shared by every session of this machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

#: Where the bundle is mounted in a container.
MOUNT = "/opt/verify-exec-python"
_PROBE = r"""
import io, json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
import verify_session_server, tarfile, ctypes, time, shutil, contextlib, errno
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w|", format=tarfile.PAX_FORMAT) as tar:
    info = tarfile.TarInfo("a/b.txt"); info.size = 1; tar.addfile(info, io.BytesIO(b"x"))
buf.seek(0)
with tempfile.TemporaryDirectory() as d, tarfile.open(fileobj=buf, mode="r|") as tar:
    tar.extractall(d, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(d)
files = sorted({m.__file__ for m in list(sys.modules.values()) if isinstance(getattr(m, "__file__", None), str)})
print(json.dumps(files))
"""


class ExecPythonUnavailable(Exception):
    """The bundle cannot be built here (no ``ldd``, a static or unusual interpreter)."""


@dataclass(frozen=True)
class ExecPython:
    """A built bundle: ``folder`` (mount it read-only at :data:`MOUNT`) and the argv prefix that
    runs its interpreter there."""

    folder: Path
    version: str

    def argv(self) -> list[str]:
        """How a container runs the bundle's interpreter (add ``-S``, a script and its arguments)."""
        return [f"{MOUNT}/ld.so", "--inhibit-cache", "--library-path", f"{MOUNT}/lib",
                f"{MOUNT}/bin/python{self.version}"]

    def environment(self) -> dict[str, str]:
        """The interpreter's environment (its home: the bundle)."""
        return {"PYTHONHOME": MOUNT, "PYTHONDONTWRITEBYTECODE": "1"}


_lock = threading.Lock()
_built: ExecPython | ExecPythonUnavailable | None = None


def exec_python() -> ExecPython:
    """The bundle of this interpreter, built on first use (ExecPythonUnavailable where it
    cannot be; the reason is kept, and asked once per process)."""
    global _built
    with _lock:
        if _built is None:
            try:
                _built = _build()
            except (OSError, ValueError, subprocess.SubprocessError, ExecPythonUnavailable) as e:
                _built = e if isinstance(e, ExecPythonUnavailable) else ExecPythonUnavailable(str(e))
        if isinstance(_built, ExecPythonUnavailable):
            raise _built
        return _built


def _interpreter() -> Path:
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    return (base if base.exists() else Path(sys.executable)).resolve()


def _build() -> ExecPython:
    from verify_cli.sandbox.environment import candidate_harness_dir, compile_harness

    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    interpreter = _interpreter()
    st = interpreter.stat()
    key = hashlib.sha256(f"{interpreter}|{st.st_size}|{st.st_mtime_ns}|{sys.version}|2".encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"verify-cli-exec-python-{os.getuid()}-{key}"
    if (folder / "ready").exists():
        if _ours(folder):
            return ExecPython(folder, version)
        # Someone else's in a shared temporary folder: build a private one instead.
        folder = Path(tempfile.mkdtemp(prefix="verify-cli-exec-python-")) / key
    if shutil.which("ldd") is None:
        raise ExecPythonUnavailable("ldd is not installed")
    compile_harness()
    probe = subprocess.run([str(interpreter), "-S", "-c", _PROBE, str(candidate_harness_dir())], capture_output=True,
                           text=True, timeout=60, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    if probe.returncode != 0:
        raise ExecPythonUnavailable(f"the exec server's modules could not be listed: {probe.stderr[-300:]}")
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    modules = [Path(f).resolve() for f in json.loads(probe.stdout)]
    modules = [m for m in modules if m.is_relative_to(stdlib) and "site-packages" not in m.parts]
    binaries = [interpreter, *(m for m in modules if m.suffix == ".so")]
    libraries, loader = _shared_libraries(binaries)
    staging = Path(tempfile.mkdtemp(prefix=f"{folder.name}.", dir=folder.parent))
    try:
        (staging / "bin").mkdir()
        (staging / "lib").mkdir()
        shutil.copy2(interpreter, staging / "bin" / f"python{version}")
        shutil.copy2(loader, staging / "ld.so")
        for name, path in libraries.items():
            shutil.copy2(path, staging / "lib" / name)
        home = staging / "lib" / f"python{version}"
        for module in {*modules, *_package_files(stdlib / "encodings"), stdlib / "os.py"}:
            if not module.exists():
                continue
            dest = home / module.relative_to(stdlib)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(module, dest)
            cached = module.parent / "__pycache__" / f"{module.stem}.{sys.implementation.cache_tag}.pyc"
            if module.suffix == ".py" and cached.exists():
                (dest.parent / "__pycache__").mkdir(exist_ok=True)
                shutil.copy2(cached, dest.parent / "__pycache__" / cached.name)
        (home / "lib-dynload").mkdir(exist_ok=True)
        for path in staging.rglob("*"):
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
        staging.chmod(0o755)
        (staging / "ready").touch()
        try:
            staging.rename(folder)
        except OSError:  # another process built it first
            if not (folder / "ready").exists():
                raise
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
    return ExecPython(folder, version)


def _ours(folder: Path) -> bool:
    """The bundle's folder and everything in it belong to this user and only it may write there
    (the exec server's output is what a snapshot, and so a grade, is made of)."""
    uid = os.getuid()
    for path in (folder, *folder.rglob("*")):
        st = path.lstat()
        if st.st_uid != uid or st.st_mode & 0o022:
            return False
    return True


def _package_files(package: Path) -> list[Path]:
    return sorted(package.glob("*.py")) if package.is_dir() else []


def _shared_libraries(binaries: list[Path]) -> tuple[dict[str, Path], Path]:
    """The shared libraries ``binaries`` load, by the name they are asked for, and the loader."""
    libraries: dict[str, Path] = {}
    loader: Path | None = None
    for binary in binaries:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30)
        if out.returncode != 0 and "not a dynamic executable" not in out.stdout + out.stderr:
            raise ExecPythonUnavailable(f"ldd {binary}: {out.stderr.strip()[:200]}")
        for line in out.stdout.splitlines():
            name, arrow, rest = line.strip().partition(" => ")
            if arrow:
                target = rest.split(" (")[0].strip()
                if target == "not found":
                    raise ExecPythonUnavailable(f"{binary} needs {name}, which is not found")
                if target:
                    libraries[name] = Path(target).resolve()
            elif name.startswith("/") and "ld-linux" in name:
                loader = Path(name.split(" (")[0]).resolve()
    if loader is None:
        raise ExecPythonUnavailable(f"{binaries[0]} names no dynamic loader (a static interpreter?)")
    return libraries, loader


__all__ = ["MOUNT", "ExecPython", "ExecPythonUnavailable", "exec_python"]
