"""Rows from a data file: JSONL, Parquet, a ``datasets`` folder, or a hub name via ``datasets``."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify_cli.errors import UsageError


@dataclass(frozen=True)
class Row:
    index: int
    data: dict[str, Any]
    split: str = ""


def _jsonl(path: Path) -> Iterator[Row]:
    # Bytes, decoded line by line: a line that is not UTF-8 is that row's failure, not the file's.
    with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as fh:
        index = 0
        for raw in fh:
            if not raw.strip():
                continue
            try:
                value = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as e:
                value = {"__error__": f"not UTF-8 text ({e.reason} at byte {e.start})"}
            except ValueError as e:
                value = {"__error__": f"not valid JSON ({e})"}
            yield Row(index, value if isinstance(value, dict) else {"__error__": "not a JSON object"})
            index += 1


def _json_array(path: Path) -> Iterator[Row]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise UsageError(f"{path}: not valid JSON ({e})",
                         hint="give JSONL, a JSON array, Parquet or a datasets folder") from None
    if not isinstance(doc, list):
        raise UsageError(f"{path}: a JSON file must hold an array of rows", hint="or use JSONL: one object a line")
    for i, value in enumerate(doc):
        yield Row(i, value if isinstance(value, dict) else {"__error__": "not a JSON object"})


def _parquet(path: Path) -> Iterator[Row]:
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        raise UsageError(f"{path}: not a readable Parquet file ({e})") from None
    index = 0
    for batch in table.iter_batches(batch_size=2048):
        for data in batch.to_pylist():
            yield Row(index, data)
            index += 1


def _datasets_folder(path: Path) -> Iterator[Row]:
    import datasets

    loaded = datasets.load_from_disk(str(path))
    splits = loaded.items() if isinstance(loaded, datasets.DatasetDict) else [("", loaded)]
    index = 0
    for split, ds in splits:
        for data in ds:
            yield Row(index, dict(data), str(split))
            index += 1


def _hub(name: str) -> Iterator[Row]:
    import datasets

    try:
        loaded = datasets.load_dataset(name)
    except Exception as e:  # offline, unknown name: datasets raises many types
        raise UsageError(f"{name}: not a local file or folder, and the datasets library could not load it "
                         f"by name ({type(e).__name__}: {str(e)[:200]})",
                         hint="offline, download the data set's files and give their path") from None
    index = 0
    for split, ds in loaded.items():
        for data in ds:
            yield Row(index, dict(data), str(split))
            index += 1


def read_rows(source: str) -> Iterator[Row]:
    """The rows of ``source``, in order, each with its index (and split for datasets).

    A file that cannot be read to its end (a broken gzip stream, a truncated Parquet file, a
    damaged datasets folder) raises UsageError naming it, after the rows read before."""
    return _reporting_read_errors(source, _open_rows(source))


def _reporting_read_errors(source: str, rows: Iterator[Row]) -> Iterator[Row]:
    last = -1
    try:
        for row in rows:
            last = row.index
            yield row
    except Exception as e:
        # pyarrow's errors, where Parquet or datasets read the rows (not imported for JSONL).
        arrow = sys.modules.get("pyarrow")
        if not isinstance(e, (OSError, EOFError, ValueError)) and not (
                arrow is not None and isinstance(e, arrow.ArrowException)):
            raise
        where = "cannot read it" if last < 0 else f"cannot read past row {last}"
        raise UsageError(f"{source}: {where} ({type(e).__name__}: {str(e)[:200]})",
                         hint="the file is damaged or not in the format its name says"
                              + ("" if last < 0 else "; the rows before were imported")) from None


def _open_rows(source: str) -> Iterator[Row]:
    path = Path(source)
    if path.is_dir():
        if (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file():
            return _datasets_folder(path)
        raise UsageError(f"{path}: a folder, but not one saved by datasets (no dataset_info.json)",
                         hint="give a JSONL or Parquet file, or a folder written by Dataset.save_to_disk")
    if path.is_file():
        name = path.name.lower()
        if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
            return _jsonl(path)
        if name.endswith(".json"):
            return _json_array(path)
        if name.endswith((".parquet", ".pq")):
            return _parquet(path)
        raise UsageError(f"{path}: unknown file type",
                         hint="give .jsonl, .jsonl.gz, .json, .parquet, or a datasets folder")
    if "/" in source and not source.startswith((".", "/")):
        return _hub(source)
    raise UsageError(f"{source}: no such file or folder",
                     hint="give a JSONL or Parquet file, a datasets folder, or a hub name (owner/name)")
