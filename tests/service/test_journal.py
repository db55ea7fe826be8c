"""The journal of acknowledged results: survives a reopen, a torn last line, its own compaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from verify_cli.errors import UsageError
from verify_cli.service.journal import Journal, JournalConflict, candidate_digest


def test_results_survive_a_reopen_and_a_line_torn_by_a_kill(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    j = Journal(path)
    d = candidate_digest({"task": "t", "files": {"a.py": "eA=="}})
    j.put("c1", d, {"score": 1.0, "status": "graded"})
    j.close()
    with open(path, "ab") as fh:
        fh.write(b'{"key": "c2", "digest": "x", "res')  # killed mid-write: never answered
    again = Journal(path)
    assert again.get("c1", d) == {"score": 1.0, "status": "graded"}
    assert again.get("c2", "x") is None
    with pytest.raises(JournalConflict):
        again.get("c1", candidate_digest({"task": "t", "files": {}}))
    again.close()


def test_one_service_per_journal(tmp_path: Path) -> None:
    first = Journal(tmp_path / "j.jsonl")
    with pytest.raises(UsageError, match="another verify-cli serve"):
        Journal(tmp_path / "j.jsonl")
    first.close()
    Journal(tmp_path / "j.jsonl").close()


def test_compaction_keeps_the_newest_entries(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    j = Journal(path, max_entries=3)
    for i in range(7):
        j.put(f"c{i}", "d", {"i": i})
    assert len(j) == 3 and [j.get(f"c{i}", "d") for i in (4, 5, 6)] == [{"i": 4}, {"i": 5}, {"i": 6}]
    j.put("c7", "d", {"i": 7})  # appends to the compacted file
    j.close()
    reopened = Journal(path, max_entries=3)
    assert reopened.get("c0", "d") is None and reopened.get("c7", "d") == {"i": 7}
    assert len(path.read_text().splitlines()) <= 4
    reopened.close()


def test_a_held_default_journal_gives_way_to_the_next_free_one(tmp_path: Path) -> None:
    from verify_cli.service.journal import journal_key, open_journal

    first = open_journal(tmp_path / "j.jsonl", spares=2)
    second = open_journal(tmp_path / "j.jsonl", spares=2)
    third = open_journal(tmp_path / "j.jsonl", spares=2)
    assert [j.path.name for j in (first, second, third)] == ["j.jsonl", "j-2.jsonl", "j-3.jsonl"]
    with pytest.raises(UsageError):
        open_journal(tmp_path / "j.jsonl", spares=2)
    with pytest.raises(UsageError):
        open_journal(tmp_path / "j.jsonl")  # a journal the user named is never substituted
    for j in (first, second, third):
        j.close()
    assert journal_key("id-1", "a" * 64) != journal_key("id-1", "b" * 64)
