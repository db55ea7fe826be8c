"""Tar streams in and out of containers: the work folder, the harness, the results folder."""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def write_workdir_tar(out: Any, workdir: Path) -> None:
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path in walk(workdir):
            info = tar.gettarinfo(str(path), arcname=path.relative_to(workdir).as_posix())
            if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
                continue  # sockets, fifos, devices
            info.uid = info.gid = 1000
            info.uname = info.gname = "sandbox"
            if info.isfile():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)


def walk(root: Path) -> Iterable[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in dirnames:
            yield base / name
        for name in sorted(filenames):
            yield base / name


def harness_archive(folder: Path) -> bytes:
    """The harness helpers as a tar owned by root, readable by everyone."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if folder.is_dir():
            for path in walk(folder):
                rel = path.relative_to(folder)
                if "__pycache__" in rel.parts or path.suffix == ".pyc":
                    continue
                info = tar.gettarinfo(str(path), arcname=rel.as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mode = 0o755 if info.isdir() else 0o644
                if info.isfile():
                    with path.open("rb") as f:
                        tar.addfile(info, f)
                elif info.isdir():
                    tar.addfile(info)
    return buf.getvalue()
