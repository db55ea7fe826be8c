"""What every backend shares when it judges a run: the results-archive reader and the signal
verdicts (the docker backend and the local ones use the same code)."""

from __future__ import annotations

import io
import signal
import tarfile

import pytest

from verify_cli.sandbox.base import MAX_RESULT_FILE_BYTES, Verdict
from verify_cli.sandbox.local import read_results_archive
from verify_cli.sandbox.plumbing.judging import out_of_memory, read_results_tar, signal_verdict


def _archive(members: list[tuple[str, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.SYMTYPE
                info.linkname = "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


HOSTILE = [("./junit.xml", b"<ok/>"), ("../escape.xml", b"x"), ("a/../../up.xml", b"x"),
           ("/abs.xml", b"x"), ("link.xml", None), ("sub/./deep.xml", b"deep"), (".", b"")]


@pytest.mark.parametrize("stream", [True, False])
def test_the_results_reader_refuses_dot_dot_absolute_and_links(stream: bool) -> None:
    got = read_results_tar(io.BytesIO(_archive(HOSTILE)), stream=stream)
    assert got == {"junit.xml": b"<ok/>", "sub/deep.xml": b"deep"}


def test_the_local_backends_use_the_same_reader() -> None:
    assert read_results_archive(_archive(HOSTILE)) == {"junit.xml": b"<ok/>", "sub/deep.xml": b"deep"}


def test_a_truncated_archive_keeps_what_came_before_the_break() -> None:
    data = _archive([("a.xml", b"a" * 600), ("b.xml", b"b" * 5000)])
    got = read_results_tar(io.BytesIO(data[:2048]), stream=True)
    assert got == {"a.xml": b"a" * 600}


def test_oversized_files_are_left_out() -> None:
    big = tarfile.TarInfo("big.xml")
    big.size = MAX_RESULT_FILE_BYTES + 1
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.addfile(big, io.BytesIO(b"\0" * big.size))
        small = tarfile.TarInfo("small.xml")
        small.size = 1
        tar.addfile(small, io.BytesIO(b"s"))
    assert read_results_tar(io.BytesIO(buf.getvalue()), stream=True) == {"small.xml": b"s"}


def test_signal_verdicts() -> None:
    assert signal_verdict(signal.SIGXCPU)[0] is Verdict.TIMEOUT
    assert signal_verdict(signal.SIGXFSZ)[0] is Verdict.OUTPUT_LIMIT
    verdict, message = signal_verdict(signal.SIGSEGV)
    assert verdict is Verdict.SIGNAL and "SIGSEGV" in message
    assert out_of_memory(b"", b"MemoryError\n") and not out_of_memory(b"fine", b"")
