"""Through the service: correct answers under a bwrap that fails one start in three are the
true grade or ``infra_error`` with bwrap's words, never a graded 0 (``serve`` started with a
stand-in ``bwrap`` first on its PATH, cold: each run its own bwrap)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.adapters.test_trl import answer_task
from tests.service.conftest import start_server
from verify_cli.client import VerifyClient
from verify_cli.sandbox.kit.standins import NAMESPACE_FAILURE, standin_bwrap, standin_starts

pytestmark = [pytest.mark.bwrap]


def test_the_service_never_scores_an_unstarted_sandbox_0(tmp_path: Path) -> None:
    tasks = answer_task(tmp_path / "tasks")
    folder = standin_bwrap(tmp_path / "bin", fail_every=3)
    s = start_server([tasks], "--jobs", "1", "--cold", env={"PATH": f"{folder}:{os.environ['PATH']}"})
    try:
        client = VerifyClient(s.url)
        results = [client.grade("test/answer-length", files={"answer.txt": "abcde\n"}) for _ in range(6)]
    finally:
        s.stop()
    assert standin_starts(folder) >= 6  # the service's runs went through the stand-in
    for r in results:
        assert r["status"] in ("graded", "infra_error"), r
        if r["status"] == "graded":
            assert r["score"] == pytest.approx(1.0), r
        else:
            assert r["score"] is None and any(NAMESPACE_FAILURE in p for p in r["problems"]), r
    assert any(r["status"] == "infra_error" for r in results)
