"""Removing a folder whole, whatever its entries' permissions."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path


def remove_tree(path: Path) -> None:
    """Remove ``path`` whole, whatever its entries' permissions: an image's exported root holds
    read-only folders, and overlayfs leaves its work folder without any."""
    def writable_and_retry(func: object, name: str, _exc: object) -> None:
        try:
            parent = os.path.dirname(name)
            os.chmod(parent, os.lstat(parent).st_mode | stat.S_IRWXU)
            if os.path.isdir(name) and not os.path.islink(name):
                os.chmod(name, os.lstat(name).st_mode | stat.S_IRWXU)
            if os.path.isdir(name) and not os.path.islink(name):
                shutil.rmtree(name, ignore_errors=True)
            else:
                os.unlink(name)
        except OSError:
            pass

    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=writable_and_retry)
        else:
            shutil.rmtree(path, onerror=writable_and_retry)
