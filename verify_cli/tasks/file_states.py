"""What a candidate's ``Mapping[str, bytes]`` may say about a path beyond its contents.

A candidate is the files it overlays on the starter. Two values say more than contents, and
stay ``bytes`` so that every mapping of files keeps its type and every path through grading
(executors, Ray, the audit's derived candidates) carries them unchanged:

- :data:`REMOVED_FILE`: the candidate removes that starter file (a diff's deletion, or the old
  side of a rename). The work folder's layout honours it under the same guards as an edit: only
  within the editable globs, never a test, a harness or trusted file.
- :class:`ModedFile`: contents with the executable bit a diff gave them (git's ``100755`` /
  ``100644``). Plain bytes keep the mode of the starter file they replace (new files: not
  executable).
"""

from __future__ import annotations

from typing import Any


class RemovedFile(bytes):
    """The value of a path a candidate removes (no contents; compare with :func:`is_removed`)."""

    def __new__(cls) -> RemovedFile:
        return super().__new__(cls, b"")

    def __reduce__(self) -> tuple[Any, ...]:
        return (RemovedFile, ())

    def __repr__(self) -> str:
        return "REMOVED_FILE"


#: A candidate's value for a starter file it removes: ``{"old_name.py": REMOVED_FILE}``.
REMOVED_FILE = RemovedFile()


class ModedFile(bytes):
    """A file's contents with its executable bit stated (equal to the plain bytes)."""

    executable: bool

    def __new__(cls, data: bytes, executable: bool) -> ModedFile:
        self = super().__new__(cls, data)
        self.executable = bool(executable)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (ModedFile, (bytes(self), self.executable))


def is_removed(data: bytes) -> bool:
    """True for :data:`REMOVED_FILE` (or a copy of it that crossed a process boundary)."""
    return isinstance(data, RemovedFile)


def stated_executable(data: bytes) -> bool | None:
    """The executable bit ``data`` states (a :class:`ModedFile`), or None for plain bytes."""
    return data.executable if isinstance(data, ModedFile) else None


__all__ = ["REMOVED_FILE", "ModedFile", "RemovedFile", "is_removed", "stated_executable"]
