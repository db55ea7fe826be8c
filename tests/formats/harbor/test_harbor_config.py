"""Harbor task folders load as they are (no conversion): the layout is recognised, task.toml is
read with Harbor's own semantics (schema 1.1), mistakes name their file and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from verify_cli.checks.probes import build_probe, probe_context, probes_for
from verify_cli.errors import TaskFormatError
from verify_cli.formats.harbor.config import is_harbor_folder, parse_size_mb
from verify_cli.formats.harbor.dockerfile import baked_in, dockerfile_workdir
from verify_cli.formats.harbor.reward import read_reward
from verify_cli.formats.harbor.spec import VerifierMode
from verify_cli.kinds.registry import kind_of
from verify_cli.tasks import load_task, load_task_set
from verify_cli.tasks.loader import TaskLoadFailure

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "harbor"


def _copy(tmp_path: Path, name: str = "fix-sum") -> Path:
    dest = tmp_path / name
    shutil.copytree(FIXTURES / "sound" / name, dest)
    return dest


def test_a_harbor_folder_loads_as_a_harbor_task() -> None:
    task = load_task(FIXTURES / "sound" / "fix-sum")
    assert task.kind == "harbor" and task.id == "fix-sum"
    assert task.harbor is not None
    assert task.prompt.startswith("`/app/calc.py` defines")  # instruction.md is the prompt
    assert task.harbor.memory_mb == 1024  # legacy memory = "1G"
    assert task.harbor.verifier_timeout_sec == 60.0 and task.harbor.agent_timeout_sec == 120.0
    assert task.harbor.workdir == "/app"  # the Dockerfile's WORKDIR
    assert task.harbor.mode is VerifierMode.ISOLATED
    assert task.environment.dockerfile == "environment/Dockerfile"
    assert task.domain == "debugging" and task.tags == ("python", "bugfix")


def test_schema_version_and_task_name_are_read() -> None:
    task = load_task(FIXTURES / "sound" / "partial-credit")
    assert task.harbor is not None
    assert task.harbor.schema_version == "1.1" and task.harbor.name == "verify-cli/partial-credit"
    assert task.id == "partial-credit"
    assert task.harbor.verifier_env == {"EXPECTED_GREETING": "Hello, world!"}


def test_a_folder_of_harbor_tasks_loads_every_one() -> None:
    items = list(load_task_set(FIXTURES / "defects"))
    assert not [i for i in items if isinstance(i, TaskLoadFailure)]
    assert len(items) == 8 and all(i.kind == "harbor" for i in items)


def test_legacy_sizes_parse_as_harbor_parses_them() -> None:
    assert parse_size_mb("2G", Path("task.toml"), "/environment/memory") == 2048
    assert parse_size_mb("512M", Path("task.toml"), "/environment/memory") == 512
    assert parse_size_mb("1.5g", Path("task.toml"), "/environment/memory") == 1536
    with pytest.raises(TaskFormatError, match="not like '2G'"):
        parse_size_mb("lots", Path("task.toml"), "/environment/memory")


def test_workdir_setting_beats_the_dockerfile(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text() + 'workdir = "/srv/project"\n')
    task = load_task(folder)
    assert task.harbor is not None and task.harbor.workdir == "/srv/project"
    assert dockerfile_workdir("FROM x\nWORKDIR /a\nWORKDIR b\n", "/app") == "/a/b"
    assert dockerfile_workdir("FROM x\n", "/app") == "/app"


def test_mistakes_name_their_file_and_field(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("memory = \"1G\"", "memory = \"much\""))
    with pytest.raises(TaskFormatError) as e:
        load_task(folder)
    assert e.value.pointer == "/environment/memory"
    toml.write_text('version = "1.0"\nextra = 1\n')
    with pytest.raises(TaskFormatError, match="unknown top-level field 'extra'"):
        load_task(folder)
    toml.write_text('version = "1.0"\n')
    (folder / "solution" / "solve.sh").unlink()
    with pytest.raises(TaskFormatError, match=r"missing solution/solve\.sh"):
        load_task(folder)


def test_the_verifier_mode_is_an_explicit_option(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text() + '\n[verify_cli]\nverifier = "shared"\n')
    task = load_task(folder)
    assert task.harbor is not None and task.harbor.mode is VerifierMode.SHARED
    warned = {name: defect for name, _, defect in kind_of(task).findings(task)}
    assert warned.get("verifier") is False  # flagged as weaker, not a defect
    toml.write_text(toml.read_text().replace('"shared"', '"nearby"'))
    with pytest.raises(TaskFormatError) as e:
        load_task(folder)
    assert e.value.pointer == "/verify_cli/verifier"


def test_a_verify_cli_task_is_not_taken_for_a_harbor_one(tmp_path: Path) -> None:
    assert is_harbor_folder(FIXTURES / "sound" / "fix-sum")
    sample = Path(__file__).resolve().parents[3] / "sample_tasks"
    assert not any(is_harbor_folder(p.parent) for p in sample.rglob("task.toml"))


def test_reward_json_is_read_before_reward_txt() -> None:
    both = read_reward({"reward.json": b'{"a": 1, "b": 0.5}', "reward.txt": b"0"})
    assert both.source == "reward.json" and both.values == {"a": 1.0, "b": 0.5} and both.score == 0.75
    assert not both.passed
    assert read_reward({"reward.txt": b" 1\n"}).values == {"reward": 1.0}
    assert "no reward file" in read_reward({}).error
    assert "does not parse" in read_reward({"reward.json": b"{"}).error
    assert "non-number" in read_reward({"reward.json": b'{"a": "yes"}'}).error
    assert "does not parse as a number" in read_reward({"reward.txt": b"PASS"}).error


def test_tests_or_solution_baked_into_the_image_are_found(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    dockerfile = folder / "environment" / "Dockerfile"
    assert baked_in(dockerfile, folder) == []
    dockerfile.write_text(dockerfile.read_text() + "COPY app/ /app/\nADD --chown=0:0 solution /opt/s\n"
                          "COPY test_outputs.py \\\n  /opt/t.py\n")
    leaks = baked_in(dockerfile, folder)
    assert [(leak.line, leak.what) for leak in leaks] == [(6, "solution"), (7, "tests")]


def test_the_hack_probes_apply_to_harbor_tasks_only() -> None:
    harbor = load_task(FIXTURES / "sound" / "fix-sum")
    sample = load_task(Path(__file__).resolve().parents[3] / "sample_tasks" / "coding-interval-merge")
    for probe in probes_for("shell"):
        assert build_probe(probe, probe_context(harbor))
        assert build_probe(probe, probe_context(sample)) is None


def test_a_copy_of_a_test_file_under_another_name_is_found(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "environment" / "app").mkdir()
    (folder / "environment" / "app" / "check.py").write_bytes((folder / "tests" / "test_outputs.py").read_bytes())
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY app/ /app/\n")
    assert [(leak.line, leak.what) for leak in baked_in(dockerfile, folder)] == [(5, "tests")]
    (folder / "environment" / "app" / "check.py").write_text("print('mine')\n")
    assert baked_in(dockerfile, folder) == []


TB1 = Path(__file__).resolve().parents[2] / "fixtures" / "terminal-bench"


def test_a_terminal_bench_1_folder_loads_as_it_is(tmp_path: Path) -> None:
    task = load_task(TB1 / "hello-file")
    assert task.kind == "harbor" and task.harbor is not None and task.harbor.layout == "terminal-bench"
    assert task.prompt == 'Create /app/hello.txt containing the line "Hello, world!".\n'
    assert task.harbor.verifier_timeout_sec == 60.0 and task.harbor.agent_timeout_sec == 120.0
    assert set(task.harbor.unsupported) == {"parser_name", "run_tests_in_same_shell"}
    assert [t.id for t in load_task_set(TB1) if not isinstance(t, TaskLoadFailure)] == ["hello-file"]
    # its build context is the task folder: `COPY . /app` takes the tests and solution.sh into the image
    folder = tmp_path / "hello-file"
    shutil.copytree(TB1 / "hello-file", folder)
    (folder / "Dockerfile").write_text((folder / "Dockerfile").read_text() + "COPY . /app\n")
    assert [leak.what for leak in baked_in(folder / "Dockerfile", folder)] == ["solution and tests"]
