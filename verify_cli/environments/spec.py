"""What a task's environment is: its declaration, normalised, and the content address of it.

An environment's identity is the hash of what declares it (the requirement lines and the bytes
of the files it names, the system packages, the set-up commands and the starter files they run
over, the Dockerfile's whole build context, the base image and runtime) plus, once realised on a
backend, what it was built over (the interpreter, or the base image's digest). Tasks that
declare the same thing share one build.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import list_files

#: How long an environment id is (hex digits of its SHA-256).
ID_LENGTH = 16


@dataclass(frozen=True)
class EnvironmentSpec:
    """A task's declared environment, independent of the backend that realises it."""

    base_image: str
    runtime: str
    requirements: tuple[str, ...]
    python: str | None
    system_packages: tuple[str, ...]
    setup: tuple[str, ...]
    #: The Dockerfile (host path) and its build context (its folder), or None.
    dockerfile: Path | None
    #: The starter's files (work-folder path, host path) the set-up commands run over.
    workspace: tuple[tuple[str, Path], ...]
    #: SHA-256 (hex) of the canonical declaration, the bytes of every file it names included.
    digest: str

    @property
    def id(self) -> str:
        """The declaration's short content address (what tasks that share it have in common)."""
        return self.digest[:ID_LENGTH]

    @property
    def needs_image(self) -> bool:
        """Whether only an image can realise it (system packages or a Dockerfile)."""
        return bool(self.system_packages or self.dockerfile)

    def describe(self) -> dict[str, object]:
        """The declaration as plain data (manifests, ``env list``)."""
        return {"base_image": self.base_image, "runtime": self.runtime,
                "requirements": list(self.requirements), "python": self.python,
                "system_packages": list(self.system_packages), "setup": list(self.setup),
                "dockerfile": str(self.dockerfile) if self.dockerfile else None,
                "workspace_files": len(self.workspace)}


def requirement_lines(text: str) -> list[str]:
    """The requirement lines of a requirements or lock file: comments and blank lines dropped,
    continuation lines (``\\`` before a hash) joined."""
    joined = re.sub(r"\\\r?\n", " ", text)
    out = []
    for raw in joined.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.append(" ".join(line.split()))
    return out


def _names_pytest(requirements: tuple[str, ...]) -> bool:
    return any(re.match(r"^pytest(?![A-Za-z0-9_.-])", r.lower().replace("_", "-")) for r in requirements)


def _host_pytest_requirement() -> str:
    """``pytest==V`` for the pytest verify-cli's own harness is tested with (this interpreter's)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"pytest=={version('pytest')}"
    except PackageNotFoundError:
        return "pytest"


def spec_of(task: Task) -> EnvironmentSpec | None:
    """The environment ``task`` declares, or None where it declares none (it runs in the
    backend's default: verify-cli's interpreter locally, ``[environment] image`` on docker).

    A ``pytest`` task whose requirements do not name pytest gets the pytest verify-cli's harness
    is tested with (pinned): the environment, not verify-cli's own interpreter, runs its tests.
    """
    env = task.environment
    if not env.declared:
        return None
    requirements = list(env.requirements)
    if env.requirements_file:
        requirements += requirement_lines((task.root / env.requirements_file).read_text(encoding="utf-8"))
    if str(task.kind) == "pytest" and not env.dockerfile and not _names_pytest(tuple(requirements)):
        requirements.append(_host_pytest_requirement())
    dockerfile = (task.root / env.dockerfile).resolve() if env.dockerfile else None
    workspace = tuple(sorted(task.starter_files().items())) if env.setup else ()
    h = hashlib.sha256()
    declaration = {"base_image": env.image, "runtime": env.runtime, "requirements": requirements,
                   "python": env.python, "system_packages": sorted(env.system_packages),
                   "setup": list(env.setup)}
    h.update(json.dumps(declaration, sort_keys=True).encode())
    if dockerfile is not None:
        h.update(b"\0dockerfile\0" + dockerfile.name.encode())
        _hash_files(h, list_files(dockerfile.parent).items())
    if workspace:
        h.update(b"\0workspace\0")
        _hash_files(h, workspace)
    return EnvironmentSpec(base_image=env.image, runtime=env.runtime, requirements=tuple(requirements),
                           python=env.python, system_packages=tuple(sorted(env.system_packages)),
                           setup=tuple(env.setup), dockerfile=dockerfile, workspace=workspace,
                           digest=h.hexdigest())


def packages_spec(base_image: str, runtime: str, system_packages: tuple[str, ...]) -> EnvironmentSpec:
    """An environment of Debian packages over ``base_image`` that no task declares (the
    service's /run_code toolchains): addressed as a task declaring the same would be."""
    packages = tuple(sorted(set(system_packages)))
    declaration = {"base_image": base_image, "runtime": runtime, "requirements": [], "python": None,
                   "system_packages": list(packages), "setup": []}
    digest = hashlib.sha256(json.dumps(declaration, sort_keys=True).encode()).hexdigest()
    return EnvironmentSpec(base_image=base_image, runtime=runtime, requirements=(), python=None,
                           system_packages=packages, setup=(), dockerfile=None, workspace=(), digest=digest)


def _hash_files(h: hashlib._Hash, files: object) -> None:
    for rel, path in files:  # type: ignore[attr-defined]
        h.update(str(rel).encode() + b"\0")
        h.update(Path(path).read_bytes())
        h.update(b"\0")


def realised_id(spec: EnvironmentSpec, form: str, base: str) -> str:
    """The identity of ``spec`` realised as ``form`` ("prefix" or "image") over ``base`` (the
    interpreter's identity, or the base image's digest): the cache's key, recorded with every
    verdict and sample."""
    return hashlib.sha256(f"{spec.digest}\0{form}\0{base}".encode()).hexdigest()[:ID_LENGTH]


__all__ = ["ID_LENGTH", "EnvironmentSpec", "packages_spec", "realised_id", "requirement_lines", "spec_of"]
