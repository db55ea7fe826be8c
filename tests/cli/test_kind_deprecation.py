"""check-tasks on a set in the old task.toml form: it still runs, and says once per set what
to change."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from verify_cli.cli.app import main

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "kinds" / "legacy-form"


def test_check_tasks_warns_once_per_set_for_the_old_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a", "b"):
        shutil.copytree(LEGACY, tmp_path / "set" / name)
        toml = tmp_path / "set" / name / "task.toml"
        toml.write_text(toml.read_text().replace('id = "kinds/legacy-form"', f'id = "kinds/{name}"'))
    code = main(["check-tasks", str(tmp_path / "set"), "--sandbox", "process", "--repeats", "1",
                 "--jobs", "2", "--no-cache"])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "2 sound, 0 defective, 0 error" in captured.out
    err = " ".join(captured.err.split())  # the console wraps long lines
    assert err.count("deprecated:") == 1, err
    assert "(and 1 more task(s))" in err and 'write kind = "pytest"' in err, err
