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

from verify_cli import __version__


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


class ResultCache:
    """JSON documents under ``folder/namespace/``, written atomically; corrupt entries are misses."""

    def __init__(self, folder: Path, namespace: str) -> None:
        self.folder = Path(folder) / namespace

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.folder / f"{key}.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(value, fh)
            os.replace(tmp, self.folder / f"{key}.json")
