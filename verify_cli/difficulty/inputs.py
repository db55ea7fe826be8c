"""Tasks named by a data set: Parquet, JSONL or a ``datasets`` folder whose rows have a ``path``
column holding a task folder (as difficulty's own ``buckets/*.parquet`` and ``dataset/`` do), so
a re-bucketed set can be measured again, e.g. its hard tasks under a stronger model.

Rows that carry a task's files instead of a path are not read yet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from verify_cli.errors import UsageError

DATA_FILE_SUFFIXES = (".parquet", ".jsonl")


def is_data_set(path: Path) -> bool:
    if path.is_file():
        return path.suffix in DATA_FILE_SUFFIXES
    return path.is_dir() and any((path / f).is_file() for f in ("dataset_dict.json", "dataset_info.json"))


def _rows(path: Path) -> list[dict[str, Any]]:
    try:
        return _read_rows(path)
    except UsageError:
        raise
    except Exception as e:  # pyarrow and datasets raise their own types for unreadable input
        raise UsageError(f"{path}: cannot read the data set ({type(e).__name__}: {e})") from None


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if path.is_dir():
        import datasets

        loaded = datasets.load_from_disk(str(path))
        parts = loaded.values() if isinstance(loaded, datasets.DatasetDict) else [loaded]
        return [dict(row) for part in parts for row in part]
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise UsageError(f"{path}:{lineno}: not a JSON object ({e})") from None
    return rows


def task_dirs_from_data_set(path: Path) -> list[Path]:
    """The task folders the rows of ``path`` name (relative paths are taken from the data set's
    folder), in row order, without repeats."""
    rows = _rows(path)
    if rows and not all(isinstance(r, dict) and isinstance(r.get("path"), str) for r in rows):
        raise UsageError(f"{path}: reading tasks from data set rows without a 'path' column (the task's files "
                         "in the row) is not built yet", hint="give rows with a 'path' to a task folder, or a task "
                                                              "folder, or a folder of task folders")
    if not rows:
        raise UsageError(f"{path}: the data set has no rows")
    base = path if path.is_dir() else path.parent
    seen: dict[Path, None] = {}
    for r in rows:
        p = Path(r["path"])
        seen.setdefault(p if p.is_absolute() else (base / p), None)
    return list(seen)
