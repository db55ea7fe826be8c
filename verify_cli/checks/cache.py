"""A content-hash cache of check results: an unchanged task on the same backend is not rerun."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from verify_cli._version import __version__


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verify-cli"


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of verify-cli's own code and harness files: a changed grader never reuses old verdicts."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix in (".py", ".js", ".json"):
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def cache_key(*parts: str) -> str:
    """A key over the tool version, its code, and ``parts`` (task content hash, backend, options)."""
    h = hashlib.sha256(f"verify-cli {__version__} {code_fingerprint()}".encode())
    for p in parts:
        h.update(b"\0")
        h.update(p.encode())
    return h.hexdigest()


DEFAULT_MAX_ENTRIES = 20_000


class ResultCache:
    """JSON documents under ``folder/namespace/``, written atomically; corrupt entries are misses.

    Bounded: beyond ``max_entries`` documents the least recently used (by mtime; a hit touches
    its entry) are removed, down to nine tenths of the bound.
    """

    def __init__(self, folder: Path, namespace: str, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.folder = Path(folder) / namespace
        self.max_entries = max_entries

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.folder / f"{key}.json"
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)
        return data if isinstance(data, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store ``value``; a failed write (disk full, unserialisable value) leaves no file behind."""
        tmp: str | None = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(value, fh)
            os.replace(tmp, self.folder / f"{key}.json")
            tmp = None
        except (OSError, TypeError, ValueError):
            pass  # a cache that cannot be written is a cache miss next time, not an error
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self._evict()

    def _evict(self) -> None:
        try:
            entries = [e for e in os.scandir(self.folder) if e.name.endswith(".json")]
        except OSError:
            return
        if len(entries) <= self.max_entries:
            return
        aged: list[tuple[float, str]] = []
        for e in entries:
            with contextlib.suppress(OSError):
                aged.append((e.stat().st_mtime, e.path))
        aged.sort()
        for _, path in aged[: len(aged) - (self.max_entries * 9) // 10]:
            with contextlib.suppress(OSError):
                os.unlink(path)
