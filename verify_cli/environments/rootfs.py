"""Environments for bwrap that need an image (system packages, a Dockerfile): the image built as
for docker (:mod:`.image`), then its root file system exported once into the environment's store
folder (``docker create`` + ``docker export``, unpacked by ``tar``), where bwrap runs use it as
their system (:attr:`verify_cli.sandbox.base.RuntimeLayer.root`). Docker is needed to build,
never to run: the store folder alone serves every later run, on this machine or any that shares
the store.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import IO, Any

from verify_cli.environments.prefix import Say
from verify_cli.environments.store import remove_tree
from verify_cli.errors import EnvironmentBuildError
from verify_cli.sandbox.bwrap.rootfs import file_in_root, prepare_root

#: The folder of an environment's store folder that holds the exported root file system.
ROOTFS_DIR = "rootfs"
#: The file beside an exported root that keeps what its image's configuration says and a root
#: file system cannot: its ``Env``, ``User`` and ``WorkingDir`` (a JSON object of those keys).
IMAGE_CONFIG = "image-config.json"
#: Where an image's Python interpreter is looked for, in order (paths inside the root).
PYTHON_CANDIDATES = ("/usr/local/bin/python3", "/usr/bin/python3", "/usr/local/bin/python", "/usr/bin/python")


def export_rootfs(client: Any, image: str, folder: Path, log: IO[str], log_path: Path, identity: str, *,
                  say: Say | None = None) -> dict[str, Any]:
    """Export ``image``'s root file system into ``folder/rootfs`` (unpacked beside it first,
    renamed into place when whole: a half-exported root is never used); returns the manifest's
    fields (the root, its python, its size)."""
    from docker.errors import DockerException

    dest = folder / ROOTFS_DIR
    partial = folder / f".{ROOTFS_DIR}.partial"
    remove_tree(partial)
    partial.mkdir(parents=True)
    if say:
        say(f"exporting the root file system of {image}")
    log.write(f"$ docker export $(docker create {image}) | tar -x -C {partial}\n")
    log.flush()
    container = None
    try:
        container = client.containers.create(image, command=["true"], entrypoint=[], network_disabled=True,
                                             labels={"verify-cli.environment": identity})
        tar = subprocess.Popen(["tar", "-x", "-f", "-", "-C", str(partial), "--no-same-owner",
                                "--exclude=dev/*", "--exclude=./dev/*"],
                               stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT)
        assert tar.stdin is not None
        try:
            for chunk in container.export():
                tar.stdin.write(chunk)
        except BrokenPipeError:
            pass
        finally:
            tar.stdin.close()
        status = tar.wait()
    except (DockerException, OSError) as e:
        log.write(f"ERROR: {e}\n")
        log.flush()
        remove_tree(partial)
        raise EnvironmentBuildError(identity, f"exporting the root file system of {image} failed: "
                                    f"{str(e).strip().splitlines()[-1][:300] if str(e).strip() else type(e).__name__}",
                                    log=str(log_path)) from None
    finally:
        if container is not None:
            with contextlib.suppress(DockerException):
                container.remove(force=True)
    if status != 0:
        remove_tree(partial)
        raise EnvironmentBuildError(identity, f"unpacking the root file system of {image} failed (tar exit {status})",
                                    log=str(log_path))
    try:
        prepare_root(partial)
    except ValueError as e:
        remove_tree(partial)
        raise EnvironmentBuildError(identity, str(e), log=str(log_path)) from None
    config: dict[str, Any] = {}
    with contextlib.suppress(DockerException, KeyError, TypeError):
        raw = client.images.get(image).attrs.get("Config") or {}
        config = {k: raw.get(k) for k in ("Env", "User", "WorkingDir")}
    (folder / IMAGE_CONFIG).write_text(json.dumps(config, sort_keys=True))
    remove_tree(dest)
    os.replace(partial, dest)
    python = find_python(dest)
    log.write(f"root file system: {dest} (python: {python or 'none'})\n")
    log.flush()
    return {"rootfs": str(dest), "rootfs_python": python}


def image_config(root: str | Path) -> dict[str, Any]:
    """What the image of the exported root ``root`` was configured with (:data:`IMAGE_CONFIG`):
    ``Env`` (a list of ``NAME=value``), ``User``, ``WorkingDir``; empty where it was not kept."""
    try:
        data = json.loads((Path(root).parent / IMAGE_CONFIG).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def find_python(root: Path) -> str:
    """The path (inside ``root``) of its Python interpreter, or "" where it has none."""
    for candidate in PYTHON_CANDIDATES:
        if file_in_root(root, candidate) is not None:
            return candidate
    return ""


__all__ = ["IMAGE_CONFIG", "PYTHON_CANDIDATES", "ROOTFS_DIR", "export_rootfs", "find_python", "image_config"]
