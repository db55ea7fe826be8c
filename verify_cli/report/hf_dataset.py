"""Hugging Face ``datasets`` files written with pyarrow alone: what ``DatasetDict.save_to_disk``
and ``Dataset.to_parquet`` write for a table of plain columns (strings, integers, floats,
booleans), without importing ``datasets`` (and pandas with it), which costs a CLI run more than
writing the files.

The files are those ``datasets`` (5.x) writes, byte for byte (``tests/difficulty/
test_hf_dataset.py`` compares them with the library's own, which is installed beside): the Arrow
stream of each split with the features in its schema metadata, ``dataset_info.json``,
``state.json`` (its ``_fingerprint`` is random, as ``datasets`` makes one for a table it cannot
hash) and ``dataset_dict.json``; and the Parquet file of ``to_parquet`` (content-defined
chunking, page index, snappy and dictionary encoding on every column, the features in the
schema metadata). ``datasets.load_from_disk`` and ``load_dataset("parquet", ...)`` read them.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: ``datasets``' shard size (``config.MAX_SHARD_SIZE``, 500MB), row-group size
#: (``config.MAX_ROW_GROUP_SIZE``, 100MB), Arrow batch size (``config.DEFAULT_MAX_BATCH_SIZE``)
#: and content-defined chunking options (``config.DEFAULT_CDC_OPTIONS``).
MAX_SHARD_BYTES = 500 * 2**20
MAX_ROW_GROUP_BYTES = 100 * 2**20
MAX_BATCH_ROWS = 1000
CDC_OPTIONS = {"min_chunk_size": 256 * 1024, "max_chunk_size": 1024 * 1024, "norm_level": 0}

_DTYPES = {pa.string(): "string", pa.large_string(): "large_string", pa.bool_(): "bool", pa.int8(): "int8",
           pa.int16(): "int16", pa.int32(): "int32", pa.int64(): "int64", pa.float32(): "float32",
           pa.float64(): "float64"}


def features_dict(schema: pa.Schema) -> dict[str, Any]:
    """``Features.to_dict()`` of a schema of plain columns."""
    out = {}
    for f in schema:
        if f.type not in _DTYPES:
            raise TypeError(f"column {f.name!r}: {f.type} is not a plain column")
        out[f.name] = {"dtype": _DTYPES[f.type], "_type": "Value"}
    return out


def features_schema(schema: pa.Schema) -> pa.Schema:
    """``Features.arrow_schema``: every column nullable, the features in the metadata."""
    plain = pa.schema([pa.field(f.name, f.type) for f in schema])
    return plain.with_metadata({"huggingface": json.dumps({"info": {"features": features_dict(schema)}})})


def _dataset_info(schema: pa.Schema) -> dict[str, Any]:
    """``asdict(DatasetInfo(features=...))`` (which leaves out the fields that are None), top-level
    keys sorted, as ``save_to_disk`` writes it."""
    info = {"description": "", "citation": "", "homepage": "", "license": "", "features": features_dict(schema)}
    return {k: info[k] for k in sorted(info)}


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def save_split(table: pa.Table, folder: Path) -> None:
    """One split's folder, as ``Dataset.save_to_disk`` writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    table = table.cast(features_schema(table.schema)).combine_chunks()
    nbytes = table.nbytes
    shards = min(table.num_rows, int(nbytes / MAX_SHARD_BYTES) + 1)  # none for no rows, as datasets
    batch = MAX_BATCH_ROWS
    if nbytes > 0:
        batch = min(batch, max(1, table.num_rows * MAX_ROW_GROUP_BYTES // nbytes))
    names = [f"data-{i:05d}-of-{shards:05d}.arrow" for i in range(shards)]
    stream_schema = table.schema.with_metadata(
        {"huggingface": json.dumps({"info": {"features": features_dict(table.schema)}})})
    div, mod = divmod(table.num_rows, shards) if shards else (0, 0)
    for i, name in enumerate(names):  # contiguous shards, the first ``mod`` one row longer
        start = div * i + min(i, mod)
        shard = table.slice(start, div + (1 if i < mod else 0))
        with pa.OSFile(str(folder / name), "wb") as sink, pa.RecordBatchStreamWriter(sink, stream_schema) as w:
            for offset in range(0, shard.num_rows, batch):
                part = shard.slice(offset, batch).combine_chunks()
                w.write_table(part.replace_schema_metadata(stream_schema.metadata), batch)
    state: dict[str, Any] = {
        "_data_files": [{"filename": n} for n in names], "_fingerprint": secrets.token_hex(8),
        "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
        "_split": None}
    _write_text(folder / "state.json", json.dumps(state, indent=2, sort_keys=True))
    _write_text(folder / "dataset_info.json", json.dumps(_dataset_info(table.schema), indent=2))


def save_dataset_dict(splits: Mapping[str, pa.Table], folder: Path) -> None:
    """A ``DatasetDict`` folder, as ``DatasetDict.save_to_disk`` writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    _write_text(folder / "dataset_dict.json", json.dumps({"splits": list(splits)}))
    for name, table in splits.items():
        save_split(table, folder / name)


def write_parquet(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """``Dataset.to_parquet(path)`` of ``table``."""
    schema = features_schema(table.schema)
    table = table.cast(schema)
    nbytes = table.nbytes
    rows = max(1, table.num_rows * MAX_ROW_GROUP_BYTES // nbytes) if nbytes > 0 else 1
    leaves: Sequence[str] = schema.names
    writer = pq.ParquetWriter(str(path), schema=schema, use_content_defined_chunking=CDC_OPTIONS,
                              write_page_index=True, compression={n: "snappy" for n in leaves},
                              use_dictionary=list(leaves), column_encoding={})
    for offset in range(0, table.num_rows, rows):
        writer.write_table(table.slice(offset, rows))
    writer.add_key_value_metadata({"content_defined_chunking": json.dumps(CDC_OPTIONS)})
    writer.close()
