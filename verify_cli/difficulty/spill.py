"""Graded samples kept on the disk, not in memory, from the moment they are graded until the
run's outputs are written.

A difficulty run keeps, per sample, only what its statistics need (:class:`Kept`: the index,
the status, the score, whether the visible tests passed, where the record lies); the records
themselves (completion, files, per-test outcomes, token ids: kilobytes each) go to one unnamed
temporary file, a JSON line each, as the sample cache writes them. The file has no name from
the start (``tempfile.TemporaryFile``): it is gone when the run's report is, or when the process
ends however it ends, and leaves nothing in the scratch space. samples.parquet reads the records
back a row group at a time, in the report's order (:class:`SpilledRecords`).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator, Sequence
from typing import NamedTuple, overload

from verify_cli.difficulty.samples import SampleRecord
from verify_cli.difficulty.stats import SampleOutcome, SampleStatus


class Kept(NamedTuple):
    """What a run holds of one graded sample: what the statistics and the sampling plan need,
    and where the whole record lies in the spill."""

    sample_index: int
    status: str
    score: float | None
    visible_passed: bool | None
    offset: int

    @property
    def outcome(self) -> SampleOutcome:
        return SampleOutcome(SampleStatus(self.status), self.score or 0.0, self.visible_passed)

    @property
    def passed(self) -> bool:
        return self.status == SampleStatus.PASSED.value


class RecordSpill:
    """An append-only file of records, safe to share between the grading threads."""

    def __init__(self) -> None:
        self._fh = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the report that reads it
        self._lock = threading.Lock()
        self._end = 0

    def add(self, record: SampleRecord, *, line: str | None = None) -> Kept:
        """Spill ``record`` (``line``: its :meth:`SampleRecord.to_line`, if made already)."""
        data = (line if line is not None else record.to_line()).encode("utf-8")
        with self._lock:
            offset = self._end
            self._fh.seek(offset)
            self._fh.write(data)
            self._end += len(data)
        return Kept(record.sample_index, record.status, record.score, record.visible_passed, offset)

    def read(self, offset: int) -> SampleRecord:
        with self._lock:
            self._fh.seek(offset)
            line = self._fh.readline()
        return SampleRecord.from_line(line)

    def close(self) -> None:
        self._fh.close()


class SpilledRecords(Sequence[SampleRecord]):
    """The records at ``offsets`` of ``spill``, in that order, read from the disk each time."""

    def __init__(self, spill: RecordSpill, offsets: Sequence[int]) -> None:
        self._spill = spill
        self._offsets = list(offsets)

    def __len__(self) -> int:
        return len(self._offsets)

    @overload
    def __getitem__(self, i: int) -> SampleRecord: ...

    @overload
    def __getitem__(self, i: slice) -> list[SampleRecord]: ...

    def __getitem__(self, i: int | slice) -> SampleRecord | list[SampleRecord]:
        if isinstance(i, slice):
            return [self._spill.read(o) for o in self._offsets[i]]
        return self._spill.read(self._offsets[i])

    def __iter__(self) -> Iterator[SampleRecord]:
        for offset in self._offsets:
            yield self._spill.read(offset)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SpilledRecords({len(self)} records)"
