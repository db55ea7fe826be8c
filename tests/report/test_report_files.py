"""Report files are written atomically with the usual umask (not mkstemp's 0600)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from verify_cli.report.files import write_json, write_junit


def test_reports_follow_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "r.json", {"a": 1})
        write_junit(tmp_path / "r.xml", [])
    finally:
        os.umask(old)
    for name in ("r.json", "r.xml"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.xml"]  # no temp file left
