"""Converted copies: ``export --format harbor`` of any verify-cli task and back gives the same
folder (and so the same verdicts); the exported Harbor tasks are sound under Harbor grading;
Terminal-Bench 1 folders become Harbor folders; what Harbor cannot express is said per field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify_cli.checks.report import TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.cli.app import app, main
from verify_cli.environments import Environments
from verify_cli.environments.store import EnvironmentStore
from verify_cli.formats.harbor.convert import convert_folder
from verify_cli.grading.grader import Grader
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks import load_task, load_task_set
from verify_cli.tasks.paths import list_files

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "sample_tasks"
TB1 = ROOT / "tests" / "fixtures" / "terminal-bench"


def _tree(folder: Path) -> dict[str, bytes]:
    return {rel: p.read_bytes() for rel, p in list_files(folder).items()}


def _export_and_back(tmp_path: Path) -> tuple[Path, Path, dict[str, object]]:
    runner = CliRunner()
    out, back = tmp_path / "harbor", tmp_path / "back"
    result = runner.invoke(app, ["export", str(SAMPLES), "--format", "harbor", "--out", str(out),
                                 "--json", str(tmp_path / "export.json")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["import", "--preset", "harbor", str(out), "--out", str(back)])
    assert result.exit_code == 0, result.output
    return out, back, json.loads((tmp_path / "export.json").read_text())


def test_export_to_harbor_and_back_gives_identical_folders(tmp_path: Path) -> None:
    out, back, report = _export_and_back(tmp_path)
    originals = sorted(p.parent for p in SAMPLES.rglob("task.toml"))
    assert len(originals) == 11
    for folder in originals:
        rel = folder.relative_to(SAMPLES)
        assert (out / rel / "instruction.md").is_file() and (out / rel / "tests" / "test.sh").is_file()
        assert load_task(out / rel).kind == "harbor"  # read as it is, no conversion
        assert _tree(back / rel) == _tree(folder), rel
        assert load_task(back / rel).content_hash() == load_task(folder).content_hash()
    # what Harbor cannot express is said per task and field, never dropped
    unsupported = report["unsupported"]
    assert isinstance(unsupported, dict)
    assert any(k.endswith(": isolation") for k in unsupported)
    assert any(k.endswith(": scoring.policy") and "swebench" in v for k, v in unsupported.items())


def test_a_terminal_bench_1_task_becomes_a_harbor_folder(tmp_path: Path) -> None:
    conversions = convert_folder(TB1, tmp_path / "out", "terminal-bench")
    assert [c.task_id for c in conversions] == ["hello-file"]
    assert set(conversions[0].unsupported) == {"parser_name", "run_tests_in_same_shell"}
    task = load_task(tmp_path / "out" / "hello-file")
    assert task.kind == "harbor" and task.prompt.startswith("Create /app/hello.txt")
    assert task.harbor is not None and task.harbor.verifier_timeout_sec == 60.0
    assert task.harbor.metadata["difficulty"] == "easy"
    assert not (tmp_path / "out" / "hello-file" / "environment" / "tests").exists()


@pytest.mark.docker
def test_exported_and_converted_tasks_are_sound_under_harbor_grading(tmp_path: Path) -> None:
    subset = tmp_path / "subset"
    for name in ("coding-interval-merge", "coding-word-wrap-js", "repo-inventory-package"):
        shutil.copytree(SAMPLES / name, subset / name)
    out = tmp_path / "harbor"
    assert CliRunner().invoke(app, ["export", str(subset), "--format", "harbor", "--out", str(out)]).exit_code == 0
    convert_folder(TB1, out, "terminal-bench")
    box = create_sandbox("docker")
    box.start()
    try:
        grader = Grader(box, environments=Environments(box, EnvironmentStore(tmp_path / "store")))
        reports = check_tasks(load_task_set(out), grader, CheckOptions(repeats=1))
    finally:
        box.close()
    assert {r.task_id: r.verdict for r in reports} == {
        "coding-interval-merge": TaskVerdict.SOUND, "coding-word-wrap-js": TaskVerdict.SOUND,
        "repo-inventory-package": TaskVerdict.SOUND, "hello-file": TaskVerdict.SOUND}


def test_row_exports_leave_harbor_folders_out_saying_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(TB1), "--format", "jsonl", "--out", str(tmp_path / "rows.jsonl")]) == 2
    assert "a Harbor task folder" in " ".join(capsys.readouterr().err.split())
    assert main(["export", str(TB1), "--format", "harbor", "--out", str(tmp_path / "again")]) == 2
    assert "already Harbor task folders" in capsys.readouterr().err


def test_the_oracle_removes_what_the_gold_patch_deletes(tmp_path: Path) -> None:
    """A task whose solution.patch deletes a file exports a solve.sh that removes it in the workdir
    (run here with its two absolute folders pointed at temporary ones)."""
    import subprocess

    from tests.conftest import write_task
    from verify_cli.formats.harbor.convert import WORKDIR, to_harbor

    gold = ("diff --git a/extra.py b/extra.py\ndeleted file mode 100644\n--- a/extra.py\n+++ /dev/null\n"
            "@@ -1 +0,0 @@\n-EXTRA = 1\n"
            "diff --git a/solution.py b/solution.py\n--- a/solution.py\n+++ b/solution.py\n@@ -1,2 +1,2 @@\n"
            " def total(values):\n-    raise NotImplementedError\n+    return sum(values)\n")
    root = write_task(tmp_path / "task", mutate=lambda d: d.update(editable=["*.py"]),
                      files={"starter/extra.py": "EXTRA = 1\n", "solution.patch": gold})
    shutil.rmtree(root / "solution")
    to_harbor(load_task(root), tmp_path / "harbor")
    work = tmp_path / "work"
    shutil.copytree(root / "starter", work)
    script = (tmp_path / "harbor" / "solution" / "solve.sh").read_text()
    script = script.replace("/solution/files", str(tmp_path / "harbor" / "solution" / "files")).replace(
        WORKDIR, str(work))
    subprocess.run(["bash", "-c", script], check=True)
    assert sorted(p.name for p in work.iterdir()) == ["solution.py"]
    assert "sum(values)" in (work / "solution.py").read_text()
