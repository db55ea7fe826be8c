"""What every backend shares when it judges a run: OOM markers, signal names, the verdict of a
signal, and the reader of a results-folder tar archive."""

from __future__ import annotations

import contextlib
import io
import re
import signal
import tarfile
from pathlib import PurePosixPath
from typing import IO

from verify_cli.sandbox.base import MAX_RESULT_FILE_BYTES, Verdict

#: What a program prints when it runs out of memory (checked only for a failed run).
OOM_MARKERS = re.compile(
    rb"MemoryError|Cannot allocate memory|std::bad_alloc|JavaScript heap out of memory|"
    rb"out of memory|Killed process")


def signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return "unknown"


def signal_verdict(sig: int) -> tuple[Verdict, str]:
    """The verdict of a death by ``sig``: CPU and file-size limits are limits, not crashes."""
    if sig == signal.SIGXCPU:
        return Verdict.TIMEOUT, "exceeded the CPU-time limit"
    if sig == signal.SIGXFSZ:
        return Verdict.OUTPUT_LIMIT, "exceeded the file-size limit"
    return Verdict.SIGNAL, f"killed by signal {sig} ({signame(sig)})"


def out_of_memory(stderr_head: bytes, stderr_tail: bytes) -> bool:
    return OOM_MARKERS.search(stderr_tail + stderr_head) is not None


def result_name(name: str) -> str | None:
    """The results-folder name of a tar member, or None for one that must be refused
    (absolute, ``..`` anywhere, empty)."""
    path = PurePosixPath(name)
    parts = [p for p in path.parts if p != "."]
    if path.is_absolute() or ".." in parts or not parts:
        return None
    return "/".join(parts)


def read_results_tar(fileobj: IO[bytes] | io.RawIOBase, *, stream: bool) -> dict[str, bytes]:
    """Regular files of a tar archive (links, devices, odd names and files over
    MAX_RESULT_FILE_BYTES refused). ``stream``: read ``fileobj`` once, front to back (a socket);
    what a truncated archive held up to its break is kept."""
    out: dict[str, bytes] = {}
    with contextlib.suppress(tarfile.TarError, OSError, EOFError), \
            tarfile.open(fileobj=fileobj, mode="r|" if stream else "r:") as archive:
        for member in archive:
            name = result_name(member.name)
            if not member.isreg() or name is None or member.size > MAX_RESULT_FILE_BYTES:
                continue
            fh = archive.extractfile(member)
            if fh is not None:
                out[name] = fh.read(MAX_RESULT_FILE_BYTES)
    return out


__all__ = ["OOM_MARKERS", "out_of_memory", "read_results_tar", "result_name", "signal_verdict",
           "signame"]
