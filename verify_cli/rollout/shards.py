"""Trajectory shards on disk: atomic Parquet files and the ``_manifest.jsonl`` that commits them.

Layout of a run folder::

    RUN_DIR/run.json            the run's identity and options (checked on --resume)
    RUN_DIR/_manifest.jsonl     one line per shard: step, part, parts, rows, groups, sha256
    RUN_DIR/shards/*.parquet    step-SSSSSS-PPP.parquet

A step is committed when the manifest holds a valid line for every one of its ``parts``. Shards
are written first (temporary file, fsync, rename, fsync the folder), then the step's manifest
lines in one append and an fsync. A crash at any point (SIGKILL included) leaves either a
committed step or nothing the reader will count: :func:`recover` drops a torn trailing line, the
lines of an uncommitted step and shard files no committed line names, so the step is redone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from verify_cli.errors import UsageError
from verify_cli.rollout.schema import AGENT_TRAJECTORY_SCHEMA, TRAJECTORY_SCHEMA, rows_to_table

MANIFEST = "_manifest.jsonl"
SHARDS_DIR = "shards"
RUN_FILE = "run.json"
#: Rows per Parquet row group: a few MB of tokens, so a reader streams a shard without holding it.
ROW_GROUP_ROWS = 512


@dataclass(frozen=True)
class ShardEntry:
    """One manifest line."""

    shard: str  # path relative to the run folder
    step: int
    part: int
    parts: int
    rows: int
    groups: tuple[str, ...]
    sha256: str
    bytes: int
    #: The step's report (rewards, statuses, timings), on the step's first part only.
    stats: Mapping[str, Any] | None = None

    def to_json(self) -> str:
        d: dict[str, Any] = {"shard": self.shard, "step": self.step, "part": self.part, "parts": self.parts,
                             "rows": self.rows, "groups": list(self.groups), "sha256": self.sha256,
                             "bytes": self.bytes}
        if self.stats is not None:
            d["stats"] = dict(self.stats)
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> ShardEntry:
        d = json.loads(line)
        return cls(shard=str(d["shard"]), step=int(d["step"]), part=int(d["part"]), parts=int(d["parts"]),
                   rows=int(d["rows"]), groups=tuple(d["groups"]), sha256=str(d["sha256"]),
                   bytes=int(d["bytes"]), stats=d.get("stats"))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one, never half."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def split_groups(rows: Sequence[Mapping[str, Any]], max_rows: int) -> list[list[Mapping[str, Any]]]:
    """Rows in parts of at most ``max_rows`` (more when one group alone is larger), never splitting
    a group: rows of one ``group_id`` are contiguous and end up in the same part."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(str(r["group_id"]), []).append(r)
    parts: list[list[Mapping[str, Any]]] = []
    current: list[Mapping[str, Any]] = []
    for members in groups.values():
        if current and len(current) + len(members) > max_rows:
            parts.append(current)
            current = []
        current.extend(members)
    if current:
        parts.append(current)
    return parts


class ShardWriter:
    """Writes committed steps into a run folder. One writer per run folder at a time."""

    def __init__(self, run_dir: Path, *, max_rows_per_shard: int = 4096,
                 row_group_rows: int = ROW_GROUP_ROWS, schema: pa.Schema = TRAJECTORY_SCHEMA) -> None:
        self.run_dir = run_dir
        self.schema = schema
        self.shards_dir = run_dir / SHARDS_DIR
        self.shards_dir.mkdir(parents=True, exist_ok=True)
        self.max_rows_per_shard = max(1, max_rows_per_shard)
        self.row_group_rows = max(1, row_group_rows)

    def write_step(self, step: int, rows: Sequence[Mapping[str, Any]],
                   stats: Mapping[str, Any] | None = None) -> list[ShardEntry]:
        """Write one step's rows as shards and commit them in the manifest (all or nothing);
        ``stats`` (the step's report) rides on the first part's line."""
        parts = split_groups(rows, self.max_rows_per_shard) or [[]]
        entries: list[ShardEntry] = []
        for i, part in enumerate(parts):
            rel = f"{SHARDS_DIR}/step-{step:06d}-{i:03d}.parquet"
            path = self.run_dir / rel
            tmp = path.with_name(f".{path.name}.tmp")
            table = rows_to_table(part, self.schema)
            pq.write_table(table, tmp, row_group_size=self.row_group_rows, compression="zstd")
            with tmp.open("rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
            groups = tuple(dict.fromkeys(str(r["group_id"]) for r in part))
            entries.append(ShardEntry(rel, step, i, len(parts), len(part), groups, sha256_file(path),
                                      path.stat().st_size, stats if i == 0 else None))
        _fsync_dir(self.shards_dir)
        with (self.run_dir / MANIFEST).open("a", encoding="utf-8") as f:
            f.write("".join(e.to_json() + "\n" for e in entries))
            f.flush()
            os.fsync(f.fileno())
        return entries


def read_manifest(run_dir: Path) -> list[ShardEntry]:
    """The committed shards of a run, in order (uncommitted steps and torn lines are left out)."""
    path = run_dir / MANIFEST
    if not path.is_file():
        return []
    entries: list[ShardEntry] = []
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if not line.endswith("\n"):
            break  # torn by a crash mid-append
        try:
            entries.append(ShardEntry.from_json(line))
        except (ValueError, KeyError, TypeError):
            break
    by_step: dict[int, list[ShardEntry]] = {}
    for e in entries:
        by_step.setdefault(e.step, []).append(e)
    committed = [s for s, es in by_step.items() if {e.part for e in es} == set(range(es[0].parts))]
    return [e for e in entries if e.step in committed]


def committed_steps(run_dir: Path) -> list[int]:
    return sorted({e.step for e in read_manifest(run_dir)})


def recover(run_dir: Path) -> list[ShardEntry]:
    """Bring a run folder back to its last committed step after a crash; returns the manifest.

    Rewrites the manifest with only committed lines, and deletes shard and temporary files that
    no committed line names (an interrupted step is redone from scratch, with the same seeds).
    """
    entries = read_manifest(run_dir)
    path = run_dir / MANIFEST
    text = "".join(e.to_json() + "\n" for e in entries)
    if path.exists() and path.read_text(encoding="utf-8") != text:
        write_atomic(path, text.encode())
    named = {e.shard for e in entries}
    shards = run_dir / SHARDS_DIR
    if shards.is_dir():
        for p in shards.iterdir():
            if f"{SHARDS_DIR}/{p.name}" not in named:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
    return entries


def run_schema(run_dir: Path) -> pa.Schema:
    """The schema of a run's shards: the agent schema for a ``train --agent`` run (run.json
    names its agent limits), else the one-shot schema."""
    config = read_run_config(run_dir) or {}
    return AGENT_TRAJECTORY_SCHEMA if config.get("agent") else TRAJECTORY_SCHEMA


def verify_run(run_dir: Path) -> list[str]:
    """Problems found holding each committed shard against its manifest line (empty: sound)."""
    problems: list[str] = []
    schema = run_schema(run_dir)
    for e in read_manifest(run_dir):
        p = run_dir / e.shard
        if not p.is_file():
            problems.append(f"{e.shard}: missing")
            continue
        if sha256_file(p) != e.sha256:
            problems.append(f"{e.shard}: checksum differs from the manifest")
            continue
        meta = pq.read_metadata(p)
        if meta.num_rows != e.rows:
            problems.append(f"{e.shard}: {meta.num_rows} rows, manifest says {e.rows}")
        if not meta.schema.to_arrow_schema().equals(schema, check_metadata=False):
            problems.append(f"{e.shard}: schema differs from the trajectory schema")
    return problems


def iter_tables(run_dir: Path, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
    schema = run_schema(run_dir)
    for e in read_manifest(run_dir):
        yield pq.read_table(run_dir / e.shard, columns=list(columns) if columns else None, schema=schema)


def read_run(run_dir: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """Every committed row of a run as one table (in step order)."""
    if not (run_dir / MANIFEST).is_file() and not (run_dir / RUN_FILE).is_file():
        raise UsageError(f"{run_dir}: not a verify-cli train run folder (no {MANIFEST})",
                         hint="pass the --out folder of a `verify-cli train` run")
    tables = list(iter_tables(run_dir, columns))
    if not tables:
        full = run_schema(run_dir)
        schema = full if not columns else pa.schema([full.field(c) for c in columns])
        return schema.empty_table()
    return pa.concat_tables(tables)


def read_run_config(run_dir: Path) -> dict[str, Any] | None:
    p = run_dir / RUN_FILE
    if not p.is_file():
        return None
    data: dict[str, Any] = json.loads(p.read_text(encoding="utf-8"))
    return data


def write_run_config(run_dir: Path, config: Mapping[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / RUN_FILE, (json.dumps(dict(config), indent=2, sort_keys=True) + "\n").encode())
