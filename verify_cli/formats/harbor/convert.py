"""Converted copies between verify-cli's task folders and Harbor's (and Terminal-Bench 1's).

- :func:`to_harbor`: any verify-cli task as a Harbor task folder that Harbor runs as it is: the
  starter baked into the image at the workdir (``/app``), ``solve.sh`` copying the reference's
  files there, ``test.sh`` laying the tests beside them, running the task's test command and
  turning its JUnit XML into ``/logs/verifier/reward.json`` by the task's scoring policy. The
  verify-cli folder travels whole (task.toml in ``[verify_cli] source``, the files in the Harbor
  folders they belong to), so :func:`from_harbor` gives it back byte for byte. What Harbor cannot
  express is reported per field (:class:`Conversion`), never dropped silently.
- :func:`from_harbor`: a Harbor folder exported here back to its verify-cli folder; any other
  Harbor folder as a normalised copy (read by verify-cli as it is, kind ``harbor``).
- :func:`from_terminal_bench`: a Terminal-Bench 1 folder (``task.yaml``, ``Dockerfile``,
  ``run-tests.sh``, ``solution.sh``) as a Harbor folder.
"""

from __future__ import annotations

import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify_cli.errors import TaskFormatError, UsageError
from verify_cli.formats.harbor.config import OWN_TABLE, is_harbor_folder
from verify_cli.formats.harbor.spec import HARBOR_SCHEMA_VERSION, TB1_TEST_SH
from verify_cli.formats.harbor.terminal_bench import instruction_of
from verify_cli.kinds.registry import kind_of
from verify_cli.kinds.runner import RunnerKind
from verify_cli.tasks.model import (
    HIDDEN_TESTS_DIR,
    PROMPT_FILE,
    SOLUTION_DIR,
    STARTER_DIR,
    TASK_FILE,
    TESTS_DIR,
    ScoringPolicy,
    Task,
)
from verify_cli.tasks.paths import list_files
from verify_cli.tasks.repository import SOLUTION_PATCH

#: Where a verify-cli task's own files go inside the Harbor folder.
STARTER_CONTEXT = "environment/starter"
SOLUTION_FILES = "solution/files"
#: The task folder's other files (list files, a solution patch, bundles): beside the tests, which
#: the agent never sees.
EXTRA_FILES = "tests/verify_cli_extra"
WORKDIR = "/app"
#: Base images by language where the task names none that suits Harbor.
_LANGUAGE_IMAGES = {"python": "verify-cli/python:3.11", "javascript": "verify-cli/node:20"}


@dataclass
class Conversion:
    """One task converted: where it went, and what the target format cannot express (field:
    why), said per field."""

    task_id: str
    out: Path
    unsupported: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"task_id": self.task_id, "out": str(self.out), "unsupported": dict(self.unsupported)}


def _toml_string(text: str) -> str:
    """``text`` as a TOML literal string when it can be one, else a basic string."""
    if "'''" not in text and "\r" not in text:
        return "'''\n" + text + "'''" if "\n" in text else f"'{text}'" if "'" not in text else _basic(text)
    return _basic(text)


def _basic(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _copy_tree(src: Path, dest: Path) -> None:
    for rel, p in list_files(src).items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)


#: test.sh's tail: JUnit XML under $VERIFY_RESULTS_DIR to reward.json (POSIX tools only: the
#: image may have no Python). all-or-nothing: one key; fraction: the share of passing cases.
_REWARD = r"""
cases=$(cat "$VERIFY_RESULTS_DIR"/{results} 2>/dev/null | grep -o '<testcase' | wc -l)
failed=$(cat "$VERIFY_RESULTS_DIR"/{results} 2>/dev/null | grep -oE '<(failure|error)[ >/]' | wc -l)
mkdir -p /logs/verifier
if [ "$cases" -eq 0 ]; then
  echo '{{"reward": 0}}' > /logs/verifier/reward.json
elif [ "{policy}" = "fraction" ]; then
  awk -v c="$cases" -v f="$failed" 'BEGIN {{ printf "{{\"reward\": %.6f}}\n", (c - f) / c }}' \
    > /logs/verifier/reward.json
elif [ "$failed" -eq 0 ]; then
  echo '{{"reward": 1}}' > /logs/verifier/reward.json
else
  echo '{{"reward": 0}}' > /logs/verifier/reward.json
fi
"""


def _test_script(task: Task) -> str:
    policy = "fraction" if task.scoring.policy is ScoringPolicy.FRACTION else "all-or-nothing"
    results = task.test.results.rsplit("/", 1)[-1]  # a safe relative glob (the loader checked it)
    lines = ["#!/bin/bash",
             "# verify-cli's tests of this task, laid beside the agent's work, then its test command;",
             "# the JUnit XML it writes becomes /logs/verifier/reward.json.",
             "export VERIFY_RESULTS_DIR=$(mktemp -d) PYTHONHASHSEED=0 HOME=${HOME:-/tmp}",
             f"cd {WORKDIR}"]
    for folder in (TESTS_DIR, HIDDEN_TESTS_DIR):
        if (task.root / folder).is_dir():
            lines.append(f"rm -rf {folder} && cp -r /tests/{folder} {folder}")
    lines.append(f"( {task.test.command} ) > /logs/verifier/test-output.txt 2>&1 || true")
    lines.append(_REWARD.format(results=results, policy=policy).strip())
    return "\n".join(lines) + "\n"


def _solve_script(removed: tuple[str, ...] = ()) -> str:
    """The oracle: the reference's files over the starter, and the files its gold patch removes
    (a deletion, a rename's old side) removed."""
    script = ("#!/bin/bash\n# The reference's files, copied over the starter in the workdir.\n"
              f"cp -r /solution/files/. {WORKDIR}/\n")
    return script + "".join(f"rm -f -- {shlex.quote(f'{WORKDIR}/{rel}')}\n" for rel in removed)


def _dockerfile(image: str) -> str:
    return (f"FROM {image}\nUSER root\nWORKDIR {WORKDIR}\nCOPY starter/ {WORKDIR}/\n")


def _task_toml(task: Task, source: str, image: str, *, starter: bool) -> str:
    meta: list[str] = [f"category = {_basic(task.domain)}", f"tags = [{', '.join(_basic(t) for t in task.tags)}]",
                       f"language = {_basic(task.language)}"]
    if task.title:
        meta.append(f"title = {_basic(task.title)}")
    return "\n".join([
        f'schema_version = "{HARBOR_SCHEMA_VERSION}"', "",
        "[metadata]", *meta, "",
        "[verifier]", f"timeout_sec = {float(task.limits.wall_seconds)!r}", "",
        "[agent]", f"timeout_sec = {float(max(600.0, task.limits.wall_seconds))!r}", "",
        "[environment]", f"memory_mb = {task.limits.memory_mb}", "cpus = 1", f'workdir = "{WORKDIR}"',
        "allow_internet = false", "",
        f"# verify-cli's own task.toml: `verify-cli import --preset harbor` restores the task from it ({image}).",
        f"[{OWN_TABLE}]", f"starter_folder = {'true' if starter else 'false'}",
        f"source = {_toml_string(source)}", ""])


def to_harbor(task: Task, out: Path) -> Conversion:
    """Write ``task`` (verify-cli's format) as the Harbor task folder ``out`` (created)."""
    if task.harbor is not None:
        raise UsageError(f"{task.root}: already a Harbor task", hint="copy the folder as it is")
    conv = Conversion(task.id, out)
    out.mkdir(parents=True, exist_ok=False)
    image = task.environment.image if task.environment.image.startswith("verify-cli/") else \
        _LANGUAGE_IMAGES.get(task.language, task.environment.image)
    env = task.environment
    if env.dockerfile:
        conv.unsupported["environment.dockerfile"] = "kept in [verify_cli] source; the Harbor image is built " \
                                                     f"FROM {image} with the starter (its Dockerfile is not used)"
    if env.requirements or env.requirements_file or env.setup or env.system_packages:
        conv.unsupported["environment.requirements/setup/system_packages"] = (
            "not installed in the Harbor image (kept in [verify_cli] source)")
    kind = kind_of(task)
    if task.isolation.value == "two-process" and kind.two_process_runtime(task) is not None:
        conv.unsupported["isolation"] = ("Harbor's verifier runs the tests in one process with the agent's code "
                                         "(verify-cli's two-process grading is not expressed)")
    if isinstance(kind, RunnerKind):
        conv.unsupported["kind"] = f"the built-in {task.kind} runner is not in the Harbor image: test.sh fails"
    if task.scoring.policy not in (ScoringPolicy.ALL_OR_NOTHING, ScoringPolicy.FRACTION):
        conv.unsupported["scoring.policy"] = f"{task.scoring.policy.value} scored all-or-nothing in reward.json"
    (out / "instruction.md").write_bytes((task.root / PROMPT_FILE).read_bytes()
                                         if (task.root / PROMPT_FILE).is_file() else b"")
    (out / "environment").mkdir()
    (out / "environment" / "Dockerfile").write_text(_dockerfile(image))
    (out / STARTER_CONTEXT).mkdir()
    for rel, src in task.starter_files().items():  # a packed repository's too, unpacked
        (out / STARTER_CONTEXT / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out / STARTER_CONTEXT / rel)
    (out / "solution").mkdir()
    (out / "solution" / "solve.sh").write_text(_solve_script(task.solution_removals()))
    (out / SOLUTION_FILES).mkdir()
    for rel, src in task.solution_files().items():  # a solution.patch applied: the files it writes
        (out / SOLUTION_FILES / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out / SOLUTION_FILES / rel)
    (out / "tests").mkdir()
    for folder in (TESTS_DIR, HIDDEN_TESTS_DIR):
        if (task.root / folder).is_dir():
            (out / "tests" / folder).mkdir()
            _copy_tree(task.root / folder, out / "tests" / folder)
    (out / "tests" / "test.sh").write_text(_test_script(task))
    source = (task.root / TASK_FILE).read_text(encoding="utf-8")
    (out / TASK_FILE).write_text(_task_toml(task, source, image, starter=(task.root / STARTER_DIR).is_dir()))
    extra = sorted(set(list_files(task.root)) - {
        TASK_FILE, PROMPT_FILE, *(f"{d}/{r}" for d in (STARTER_DIR, SOLUTION_DIR, TESTS_DIR, HIDDEN_TESTS_DIR)
                                 for r in list_files(task.root / d))})
    for rel in extra:
        target = out / EXTRA_FILES / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(task.root / rel, target)
    if extra:
        conv.unsupported["files"] = (f"{', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}: carried in "
                                     f"{EXTRA_FILES}/ for the way back, unused by Harbor")
    return conv


def from_harbor(folder: Path, out: Path) -> Conversion:
    """A Harbor folder as a converted copy: the verify-cli task it was exported from (exactly),
    or, for any other Harbor task, the folder itself (verify-cli reads it as it is)."""
    data = tomllib.loads((folder / TASK_FILE).read_text(encoding="utf-8"))
    own = data.get(OWN_TABLE, {})
    source = own.get("source") if isinstance(own, dict) else None
    if not isinstance(source, str):
        shutil.copytree(folder, out)
        return Conversion(out.name, out)
    out.mkdir(parents=True, exist_ok=False)
    (out / TASK_FILE).write_text(source, encoding="utf-8")
    if (folder / "instruction.md").is_file():
        (out / PROMPT_FILE).write_bytes((folder / "instruction.md").read_bytes())
    if own.get("starter_folder", True):
        (out / STARTER_DIR).mkdir()
        _copy_tree(folder / STARTER_CONTEXT, out / STARTER_DIR)
    if not (folder / EXTRA_FILES / SOLUTION_PATCH).is_file():  # else the patch comes back as it was
        _copy_tree(folder / SOLUTION_FILES, out / SOLUTION_DIR)
    for name in (TESTS_DIR, HIDDEN_TESTS_DIR):
        if (folder / "tests" / name).is_dir():
            _copy_tree(folder / "tests" / name, out / name)
    if (folder / EXTRA_FILES).is_dir():
        _copy_tree(folder / EXTRA_FILES, out)
    return Conversion(str(tomllib.loads(source).get("id", out.name)), out)


def from_terminal_bench(folder: Path, out: Path) -> Conversion:
    """A Terminal-Bench 1 task (``task.yaml``, ``Dockerfile``, ``run-tests.sh``, ``solution.sh``,
    ``tests/``) as a Harbor folder: its exit status becomes reward.txt."""
    import yaml

    spec_file = folder / "task.yaml"
    try:
        spec: dict[str, Any] = yaml.safe_load(spec_file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise TaskFormatError(str(spec_file), f"not a Terminal-Bench task.yaml: {e}") from None
    conv = Conversion(folder.name, out)
    instruction = instruction_of(spec)
    if not instruction:
        raise TaskFormatError(str(spec_file), "no instruction", pointer="/instruction")
    for name in ("Dockerfile", "run-tests.sh"):
        if not (folder / name).is_file():
            raise TaskFormatError(str(folder / name), f"missing {name}")
    out.mkdir(parents=True, exist_ok=False)
    (out / "instruction.md").write_text(str(instruction).rstrip() + "\n")
    _copy_tree(folder, out / "environment")
    for name in ("task.yaml", "run-tests.sh", "solution.sh", "solution.yaml"):
        (out / "environment" / name).unlink(missing_ok=True)
    shutil.rmtree(out / "environment" / "tests", ignore_errors=True)
    (out / "tests").mkdir()
    if (folder / "tests").is_dir():
        _copy_tree(folder / "tests", out / "tests")
    shutil.copyfile(folder / "run-tests.sh", out / "tests" / "run-tests.sh")
    (out / "tests" / "test.sh").write_text(TB1_TEST_SH)
    (out / "solution").mkdir()
    if (folder / "solution.sh").is_file():
        shutil.copyfile(folder / "solution.sh", out / "solution" / "solve.sh")
    else:
        conv.unsupported["solution"] = "no solution.sh (solution.yaml command lists are not converted)"
    meta = [f"{k} = {_basic(str(spec[k]))}" for k in ("author_name", "author_email", "difficulty", "category")
            if k in spec]
    tags = spec.get("tags") or []
    meta.append(f"tags = [{', '.join(_basic(str(t)) for t in tags)}]")
    verifier = float(spec.get("max_test_timeout_sec", 180.0))
    agent = float(spec.get("max_agent_timeout_sec", 360.0))
    (out / TASK_FILE).write_text("\n".join([
        'version = "1.0"', "", "[metadata]", *meta, "", "[verifier]", f"timeout_sec = {verifier!r}", "",
        "[agent]", f"timeout_sec = {agent!r}", ""]))
    for key in ("parser_name", "run_tests_in_same_shell", "disable_asciinema"):
        if key in spec:
            conv.unsupported[key] = "Terminal-Bench 1 run option, not expressed in Harbor"
    return conv


def relative_place(folder: Path, source: Path) -> Path:
    """Where ``folder`` (under the set ``source``, or ``source`` itself) goes in the output."""
    try:
        rel = folder.resolve().relative_to(source.resolve())
    except ValueError:
        rel = Path(folder.name)
    return rel if str(rel) != "." else Path(folder.resolve().name)


def convert_folder(source: Path, out: Path, preset: str) -> list[Conversion]:
    """Every task under ``source`` converted by ``preset``: ``harbor`` (Harbor folders to
    verify-cli's format where they came from it, else normalised copies), ``terminal-bench``
    (Terminal-Bench 1 folders to Harbor's), ``to-harbor`` (verify-cli tasks to Harbor's)."""
    source, out = Path(source), Path(out)
    if preset == "terminal-bench":
        folders = sorted({p.parent for p in source.rglob("task.yaml")})
        return [from_terminal_bench(f, out / relative_place(f, source)) for f in folders]
    if preset == "harbor":
        folders = sorted({p.parent for p in source.rglob(TASK_FILE) if is_harbor_folder(p.parent)})
        if is_harbor_folder(source):
            folders = [source]
        if not folders:
            raise UsageError(f"{source}: no Harbor task folder (instruction.md, task.toml, tests/test.sh) here")
        return [from_harbor(f, out / relative_place(f, source)) for f in folders]
    raise UsageError(f"unknown folder preset {preset!r}", hint="harbor or terminal-bench")


#: The presets of ``verify-cli import`` that read folders rather than rows.
FOLDER_PRESETS = ("harbor", "terminal-bench")

__all__ = ["EXTRA_FILES", "FOLDER_PRESETS", "Conversion", "convert_folder", "from_harbor", "from_terminal_bench",
           "relative_place", "to_harbor"]
