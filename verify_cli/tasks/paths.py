"""Path globs and containment checks shared by the loader and grading."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path, PurePosixPath


@lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_matches(pattern: str, relpath: str) -> bool:
    """True when the POSIX relative path matches the glob (``*``, ``?``, ``**`` across folders)."""
    return _glob_regex(pattern).match(relpath) is not None


def matches_any(patterns: Iterable[str], relpath: str) -> bool:
    return any(glob_matches(p, relpath) for p in patterns)


def unsafe_relative_path(path: str) -> str | None:
    """Why ``path`` could escape the folder it is relative to, or None when it is safe."""
    if not path:
        return "is empty"
    if path.startswith(("/", "\\")) or PurePosixPath(path).is_absolute() or re.match(r"^[A-Za-z]:", path):
        return "is absolute; use a path relative to the task folder"
    if ".." in PurePosixPath(path).parts:
        return "contains '..' and could escape the task folder"
    return None


def list_files(root: Path) -> dict[str, Path]:
    """Regular files under ``root`` by POSIX relative path, sorted; symlinks are not followed."""
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    top = os.fspath(root)
    cut = len(top.rstrip("/")) + 1  # plain string work: this runs for every graded run
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            if not name.endswith(".pyc"):
                path = os.path.join(dirpath, name)
                found[path[cut:]] = Path(path)
    return dict(sorted(found.items()))


def escaping_symlinks(root: Path) -> list[tuple[Path, str]]:
    """Symlinks under ``root`` whose target resolves outside ``root``, with their targets."""
    bad: list[tuple[Path, str]] = []
    real_root = root.resolve()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath) / name
            if p.is_symlink():
                target = os.readlink(p)
                resolved = p.resolve()
                if resolved != real_root and real_root not in resolved.parents:
                    bad.append((p, target))
    return bad
