"""A task's environment on a sandbox backend: built once (per machine: the store's lock), then
taken from the store; the form follows the backend (an image where runs run in images, a venv
prefix bound read-only where they run on the host's system, and, where a declaration needs an
image and the backend can run over a root file system of its own (bwrap), the image's root file
system exported into the image environment's own store folder: one identity on both backends)."""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verify_cli.environments.image import base_digest, build_image, docker_client, image_tag
from verify_cli.environments.prefix import Say, build_prefix, find_interpreter, interpreter_identity
from verify_cli.environments.rootfs import export_rootfs
from verify_cli.environments.spec import EnvironmentSpec, realised_id, spec_of
from verify_cli.environments.store import BUILD_LOG, EnvironmentStore
from verify_cli.errors import EnvironmentBuildError
from verify_cli.sandbox.base import RuntimeLayer, Sandbox
from verify_cli.tasks.model import Task

#: The form an environment takes on a backend whose runs run in an image, and elsewhere; and
#: an image's root file system, exported, for a backend that runs over one (bwrap).
IMAGE, PREFIX, ROOTFS = "image", "prefix", "rootfs"
#: What to do where Docker is missing when an image's root file system must be built.
ROOTFS_HINT = ("start the Docker engine and build once (`verify-cli env build TASKS --sandbox bwrap`; runs then need "
               "no daemon, and a store shared through VERIFY_CLI_ENV_DIR serves other machines), or grade with "
               "--sandbox docker")


@dataclass(frozen=True)
class Realised:
    """A built environment, ready for a run: the image to run in (docker), or the layer a local
    backend shows the run (bwrap, process)."""

    identity: str
    spec_id: str
    form: str
    image: str | None = None
    layer: RuntimeLayer | None = None
    built: bool = False  # built by this call (False: found in the store)
    seconds: float = 0.0
    #: Forms ``rootfs`` and ``image``: the Python interpreter runs find in it (a path inside
    #: it), "" where it has none, None where that is not known (a venv prefix has one).
    python: str | None = None

    def record(self) -> dict[str, str]:
        """What is recorded with every verdict and sample made in it."""
        return {"environment": self.identity, "environment_form": self.form}


def form_for(sandbox: Sandbox | type[Sandbox]) -> str:
    return IMAGE if sandbox.runs_in_image else PREFIX


class Environments:
    """Realises tasks' environments for one backend; safe to call from many threads (each
    identity is built once; concurrent callers wait for it). A failed build is remembered for
    the life of this object (every run of the task gets the same verdict without building again)."""

    def __init__(self, sandbox: Sandbox | type[Sandbox], store: EnvironmentStore | None = None) -> None:
        self.form = form_for(sandbox)
        #: Whether declarations that need an image run over its exported root file system.
        self.over_root = self.form == PREFIX and bool(getattr(sandbox, "runs_over_root", False))
        self.store = store or EnvironmentStore()
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._done: dict[str, Realised | EnvironmentBuildError] = {}
        self._base: dict[str, str] = {}
        self._specs: dict[int, tuple[weakref.ref[Task], EnvironmentSpec | None]] = {}
        self._client: Any = None
        self._client_error: LookupError | None = None
        self._rootfs_ids: dict[str, str] = {}

    def form_of(self, spec: EnvironmentSpec) -> str:
        """The form ``spec`` takes on this backend."""
        if self.form == PREFIX and spec.needs_image and self.over_root:
            return ROOTFS
        return self.form

    def identity(self, spec: EnvironmentSpec) -> str:
        """The realised identity of ``spec`` on this backend (builds nothing; raises
        :class:`EnvironmentBuildError` where its base cannot be found). An exported root file
        system has its image's identity: the same environment as on docker."""
        form = self.form_of(spec)
        if form == ROOTFS:
            return self._rootfs_identity(spec)
        return realised_id(spec, form, self._base_of(spec))

    def _rootfs_identity(self, spec: EnvironmentSpec) -> str:
        with self._lock:
            known = self._rootfs_ids.get(spec.digest)
        if known is not None:
            return known
        try:
            identity = realised_id(spec, IMAGE, self._base_of(spec, IMAGE))
        except EnvironmentBuildError:
            # No Docker engine to ask for the base image's digest: a root already exported (here,
            # or by a machine sharing the store) for this declaration still serves the runs.
            found = [e.identity for e in self.store.entries() if e.manifest.get("spec_id") == spec.id
                     and e.manifest.get("rootfs") and Path(str(e.manifest["rootfs"])).is_dir()]
            if not found:
                raise
            identity = found[-1]  # the newest
        with self._lock:
            self._rootfs_ids[spec.digest] = identity
        return identity

    def _base_of(self, spec: EnvironmentSpec, form: str | None = None) -> str:
        form = form or self.form
        key = f"image:{spec.base_image}" if form == IMAGE else f"python:{spec.python or ''}"
        with self._lock:
            if key in self._base:
                return self._base[key]
        try:
            if form == IMAGE:
                # a Dockerfile's FROM lines and context are in the declaration's digest
                base = "dockerfile" if spec.dockerfile is not None else base_digest(self._docker(), spec.base_image)
            else:
                if spec.needs_image:
                    raise LookupError("system packages and Dockerfiles are built into an image: grade this "
                                      "task with --sandbox docker, or --sandbox bwrap (over the image's root "
                                      "file system); the process backend cannot run over one")
                base = interpreter_identity(find_interpreter(spec.python))
        except LookupError as e:
            raise EnvironmentBuildError(spec.id, str(e)) from None
        with self._lock:
            self._base[key] = base
        return base

    def _docker(self) -> Any:
        """The Docker client; LookupError (the cause, what to do) where no engine answers."""
        with self._lock:
            if self._client_error is not None:  # asked once: an engine that hangs costs one wait
                raise self._client_error
            if self._client is None:
                try:
                    self._client = docker_client()
                except Exception as e:  # docker's DockerException, or no docker package
                    cause = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
                    what = ("building an image's root file system for bwrap (system_packages, dockerfile) "
                            if self.form != IMAGE else "building this environment's image ")
                    self._client_error = LookupError(
                        f"{what}needs a Docker engine, and none answers ({cause[:200]}): "
                        f"{ROOTFS_HINT if self.form != IMAGE else 'start the Docker engine'}")
                    raise self._client_error from None
            return self._client

    def realise(self, task: Task, *, say: Say | None = None) -> Realised | None:
        """``task``'s environment on this backend, built if it is not in the store; None where
        the task declares none. Raises :class:`EnvironmentBuildError` (the cause in one line,
        the log's tail) where it does not build."""
        if not task.environment.declared:
            return None
        spec = self._spec(task)
        return self.realise_spec(spec, say=say) if spec is not None else None

    def _spec(self, task: Task) -> EnvironmentSpec | None:
        """``spec_of(task)``, once per Task object: every grade asks, and the declaration's
        digest reads the files it names (the whole starter, for set-up commands)."""
        key = id(task)
        with self._lock:
            known = self._specs.get(key)
        if known is not None and known[0]() is task:
            return known[1]
        spec = spec_of(task)
        with self._lock:
            if len(self._specs) >= 4096:  # tasks of sets reloaded: drop those gone
                self._specs = {k: v for k, v in self._specs.items() if v[0]() is not None}
            self._specs[key] = (weakref.ref(task), spec)
        return spec

    def realise_spec(self, spec: EnvironmentSpec, *, say: Say | None = None) -> Realised:
        identity = self.identity(spec)
        with self._lock:
            done = self._done.get(identity)
            lock = self._locks.setdefault(identity, threading.Lock())
        if done is None:
            with lock:
                done = self._done.get(identity)
                if done is None:
                    try:
                        done = self._load_or_build(spec, identity, say)
                    except EnvironmentBuildError as e:
                        done = e
                    with self._lock:  # later callers find it built: not by them
                        self._done[identity] = done if isinstance(done, EnvironmentBuildError) else \
                            replace(done, built=False)
        if isinstance(done, EnvironmentBuildError):
            raise done
        return done

    def _load_or_build(self, spec: EnvironmentSpec, identity: str, say: Say | None) -> Realised:
        form = self.form_of(spec)
        manifest = self.store.manifest(identity)
        if manifest is None or not self._usable(manifest, form):
            with self.store.building(identity):
                manifest = self.store.manifest(identity)
                if manifest is None or not self._usable(manifest, form):
                    t0 = time.monotonic()
                    manifest = (self._build_rootfs(spec, identity, manifest, say) if form == ROOTFS
                                else self._build(spec, identity, say))
                    return self._realised(spec, identity, manifest, built=True, seconds=time.monotonic() - t0)
        return self._realised(spec, identity, manifest)

    def _build_rootfs(self, spec: EnvironmentSpec, identity: str, manifest: dict[str, Any] | None,
                      say: Say | None) -> dict[str, Any]:
        """Export the image's root file system into its store folder (building the image first
        where the engine does not hold it); the image environment's manifest gains the root."""
        try:
            client = self._docker()
        except LookupError as e:
            raise EnvironmentBuildError(identity, str(e)) from None
        if manifest is None or not self._usable(manifest, IMAGE):
            manifest = self._build(spec, identity, say, form=IMAGE)
        folder = self.store.folder(identity)
        log_path = folder / BUILD_LOG
        with open(log_path, "a") as log:
            fields = export_rootfs(client, str(manifest["image"]), folder, log, log_path, identity, say=say)
        merged = {k: v for k, v in manifest.items() if k not in ("identity", "built_at")}
        merged.update(fields)
        self.store.finish(identity, merged)
        return {**merged, "identity": identity}

    def _usable(self, manifest: dict[str, Any], form: str | None = None) -> bool:
        """A stored image environment is usable while its image is on the engine; an exported
        root while its folder is there (no engine needed)."""
        if form == ROOTFS:
            return bool(manifest.get("rootfs")) and Path(str(manifest["rootfs"])).is_dir()
        if manifest.get("form") != IMAGE:
            return all(Path(b).exists() for b in manifest.get("binds", ()))
        try:
            return str(self._docker().images.get(manifest["image"]).id) == manifest.get("image_id")
        except Exception:
            return False

    def _build(self, spec: EnvironmentSpec, identity: str, say: Say | None, *,
               form: str | None = None) -> dict[str, Any]:
        folder = self.store.begin(identity)
        log_path = folder / BUILD_LOG
        with open(log_path, "w") as log:
            if (form or self.form) == IMAGE:
                fields = build_image(spec, identity, log, log_path, client=self._docker(), say=say)
            else:
                fields = build_prefix(spec, identity, folder, log, log_path,
                                      interpreter=find_interpreter(spec.python), say=say)
        manifest = {**fields, "spec_id": spec.id, "spec": spec.describe()}
        self.store.finish(identity, manifest)
        return {**manifest, "identity": identity}

    def _realised(self, spec: EnvironmentSpec, identity: str, manifest: dict[str, Any], *,
                  built: bool = False, seconds: float = 0.0) -> Realised:
        if self.form_of(spec) == ROOTFS:
            root = RuntimeLayer(identity=identity, binds=(), path=(), root=str(manifest["rootfs"]))
            return Realised(identity, spec.id, ROOTFS, layer=root, built=built, seconds=seconds,
                            python=str(manifest.get("rootfs_python") or ""))
        if manifest.get("form") == IMAGE:
            python = manifest.get("python")  # absent from older manifests: not known
            return Realised(identity, spec.id, IMAGE, image=str(manifest.get("image") or image_tag(identity)),
                            built=built, seconds=seconds, python=str(python) if python is not None else None)
        layer = RuntimeLayer(identity=identity, binds=tuple(manifest["binds"]), path=tuple(manifest["path"]))
        return Realised(identity, spec.id, PREFIX, layer=layer, built=built, seconds=seconds)

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


__all__ = ["IMAGE", "PREFIX", "ROOTFS", "Environments", "Realised", "form_for"]
