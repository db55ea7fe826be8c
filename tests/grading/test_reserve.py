"""Grader.reserve sizes the backend's warm host ahead of grading, through the WarmHost protocol."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from verify_cli.grading import Grader
from verify_cli.sandbox import RunSpec, create_sandbox
from verify_cli.sandbox.base import WarmHost, WarmInvocation, WarmOutcome, WarmStats
from verify_cli.sandbox.kit.testing import FakeSandbox


class RecordingHost(WarmHost):
    """A warm host that records what it was asked (the grader, not a pool, is under test)."""

    def __init__(self) -> None:
        self.reserved: list[int] = []
        self.closed = False
        self._stats = WarmStats()

    @property
    def stats(self) -> WarmStats:
        return self._stats

    def environment(self, spec: RunSpec) -> dict[str, str]:
        return dict(spec.env)

    def run_warm(self, spec: RunSpec, invocation: WarmInvocation, *,
                   preload: Sequence[str] = (), report_imports: bool = False) -> WarmOutcome:
        raise AssertionError("nothing is graded here")

    def reserve(self, jobs: int) -> None:
        self.reserved.append(jobs)

    def close(self) -> None:
        self.closed = True


class HostingSandbox(FakeSandbox):
    """A fake backend that declares a warm host (the capability under test is the protocol)."""

    def __init__(self) -> None:
        super().__init__(fail_if=lambda _spec: True)
        self.host = RecordingHost()
        self.opened: list[int] = []

    def warm_unavailable(self) -> str | None:
        return None

    def warm_host(self, *, workers_per_key: int = 2) -> WarmHost | None:
        self.opened.append(workers_per_key)
        return self.host


def test_reserve_sizes_the_warm_host_once_opened_and_close_releases_it() -> None:
    box = HostingSandbox()
    grader = Grader(box, warm=True)
    grader.reserve(3)
    grader.reserve(0)  # at least one run at a time
    assert box.opened == [2] and box.host.reserved == [3, 1]
    assert list(grader.grade_many((), jobs=5)) == [] and box.host.reserved == [3, 1, 5]
    grader.close()
    assert box.host.closed and box.runs == 0


def test_reserve_without_warm_opens_nothing() -> None:
    box = HostingSandbox()
    Grader(box).reserve(4)
    assert box.opened == [] and box.host.reserved == []


def test_a_backend_without_the_capability_says_why() -> None:
    grader = Grader(FakeSandbox(), warm=True)
    grader.reserve(2)  # nothing to size, no error
    assert grader.warm_stats is None
    assert FakeSandbox().warm_unavailable() == "the fake backend cannot host a warm worker"


@pytest.mark.bwrap
def test_reserve_lets_more_bwrap_workers_serve_a_key() -> None:
    with create_sandbox("bwrap") as box, Grader(box, warm=True) as grader:
        if box.warm_unavailable() is not None:
            pytest.skip(str(box.warm_unavailable()))
        grader.reserve(3)
        host = grader._warm.host if grader._warm is not None else None
        assert host is not None and host.workers_per_key == 3  # type: ignore[attr-defined]
        assert host.max_workers == 12  # type: ignore[attr-defined]
