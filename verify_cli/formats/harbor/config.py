"""Recognise a Harbor task folder and load it, as it is, as a verify-cli :class:`Task` of kind
``harbor`` (docs/harbor.md says how each field maps).

The mapping: the reference phase is the oracle (``solution/solve.sh`` run in the environment),
the starter phase is doing nothing, a candidate is the agent's changes to the working
directory; the verifier (``tests/test.sh``) writes ``/logs/verifier/reward.json`` or
``reward.txt``, read as per-key outcomes and a score (:mod:`~verify_cli.formats.harbor.reward`).
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Any

from verify_cli.errors import TaskFormatError
from verify_cli.formats.harbor.dockerfile import dockerfile_workdir
from verify_cli.formats.harbor.spec import (
    AGENT_SCRIPT,
    DEFAULT_WORKDIR,
    DOCKERFILE,
    INSTRUCTION_FILE,
    SOLVE_SCRIPT,
    TEST_SCRIPT,
    HarborSpec,
    Healthcheck,
    VerifierMode,
)
from verify_cli.tasks.model import (
    TASK_FILE,
    Environment,
    Scoring,
    ScoringPolicy,
    Task,
    TaskLimits,
    TestSpec,
)
from verify_cli.tasks.paths import escaping_symlinks

#: The kind every Harbor task is graded as (:mod:`verify_cli.kinds.harbor`).
HARBOR_KIND = "harbor"
#: What a Harbor task runs in when it names no image and has no Dockerfile.
DEFAULT_IMAGE = "verify-cli/python:3.11"
#: The results file the trial writes (the reward as JUnit, one case per key).
RESULTS_FILE = "harbor-junit.xml"
#: verify-cli's own table in a Harbor task.toml (Harbor ignores tables it does not know).
OWN_TABLE = "verify_cli"

_TABLES = {"version", "schema_version", "task", "metadata", "verifier", "agent", "environment", "solution",
           "source", OWN_TABLE}
_ENV_KNOWN = {"build_timeout_sec", "docker_image", "cpus", "memory_mb", "storage_mb", "memory", "storage",
              "workdir", "healthcheck", "allow_internet", "network_mode", "allowed_hosts", "gpus", "gpu_types",
              "env", "mcp_servers", "skills_dir"}
_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def is_harbor_folder(folder: Path) -> bool:
    """Whether ``folder`` is laid out as a Harbor task: ``task.toml`` beside ``instruction.md`` or
    ``tests/test.sh``, and no verify-cli ``prompt.md``/``id``."""
    folder = Path(folder)
    task_file = folder / TASK_FILE
    if not task_file.is_file():
        return False
    if (folder / INSTRUCTION_FILE).is_file() or (folder / TEST_SCRIPT).is_file():
        try:
            data = tomllib.loads(task_file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            return (folder / INSTRUCTION_FILE).is_file()
        return "id" not in data
    return False


def parse_size_mb(value: object, task_file: Path, pointer: str) -> int:
    """Harbor's legacy sizes (``"2G"``, ``"512M"``, ``"1024K"``) in MiB, as Harbor parses them."""
    text = str(value).strip().upper()
    try:
        if text.endswith("G"):
            return int(float(text[:-1]) * 1024)
        if text.endswith("M"):
            return int(float(text[:-1]))
        if text.endswith("K"):
            return int(float(text[:-1]) / 1024)
    except ValueError:
        pass
    raise TaskFormatError(str(task_file), f"size {value!r} is not like '2G', '512M' or '1024K'", pointer=pointer,
                          hint="or give memory_mb / storage_mb as a number of MiB")


def _number(d: dict[str, Any], key: str, task_file: Path, pointer: str, default: float | None) -> float | None:
    if key not in d:
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise TaskFormatError(str(task_file), f"{key} must be a positive number, not {v!r}", pointer=pointer)
    return float(v)


def _table(data: dict[str, Any], key: str, task_file: Path) -> dict[str, Any]:
    v = data.get(key, {})
    if not isinstance(v, dict):
        raise TaskFormatError(str(task_file), f"[{key}] must be a table", pointer=f"/{key}")
    return v


def _strings(d: dict[str, Any], key: str, task_file: Path, pointer: str) -> dict[str, str]:
    v = d.get(key, {})
    if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
        raise TaskFormatError(str(task_file), f"{key} must be a table of strings", pointer=pointer)
    return dict(v)


def read_spec(folder: Path, data: dict[str, Any]) -> HarborSpec:
    """The Harbor settings of ``task.toml`` (``data``), checked; TaskFormatError names the field."""
    task_file = folder / TASK_FILE
    unknown = sorted(set(data) - _TABLES)
    if unknown:
        raise TaskFormatError(str(task_file), f"unknown top-level field {unknown[0]!r} in a Harbor task.toml",
                              pointer=f"/{unknown[0]}",
                              hint=f"Harbor's task.toml has: {', '.join(sorted(_TABLES - {OWN_TABLE}))}")
    version = str(data.get("schema_version", data.get("version", "1.0")))
    meta = _table(data, "metadata", task_file)
    verifier = _table(data, "verifier", task_file)
    agent = _table(data, "agent", task_file)
    env = _table(data, "environment", task_file)
    solution = _table(data, "solution", task_file)
    own = _table(data, OWN_TABLE, task_file)
    package = _table(data, "task", task_file)
    unsupported: dict[str, str] = {}
    memory_mb = int(_number(env, "memory_mb", task_file, "/environment/memory_mb", 2048) or 2048)
    if "memory" in env:
        memory_mb = parse_size_mb(env["memory"], task_file, "/environment/memory")
    storage_mb = int(_number(env, "storage_mb", task_file, "/environment/storage_mb", 10240) or 10240)
    if "storage" in env:
        storage_mb = parse_size_mb(env["storage"], task_file, "/environment/storage")
    for key in ("storage_mb", "storage"):
        if key in env:
            unsupported[f"environment.{key}"] = "not enforced (docker's overlay storage has no quota per container)"
    if env.get("allow_internet") is True or env.get("network_mode") not in (None, "no-network"):
        unsupported["environment.allow_internet"] = "runs never have a network in verify-cli (no-network)"
    for key in ("gpus", "gpu_types", "mcp_servers", "skills_dir", "allowed_hosts"):
        if env.get(key):
            unsupported[f"environment.{key}"] = "not supported by verify-cli's docker runs"
    for key in sorted(set(env) - _ENV_KNOWN):
        unsupported[f"environment.{key}"] = "unknown to verify-cli (Harbor schema 1.1)"
    for key in ("network_mode", "allowed_hosts"):
        if key in agent or key in verifier:
            unsupported[f"agent/verifier.{key}"] = "runs never have a network in verify-cli"
    if env.get("env"):
        unsupported["environment.env"] = "host variables are not passed into runs"
    health = env.get("healthcheck")
    healthcheck = None
    if isinstance(health, dict) and isinstance(health.get("command"), str):
        healthcheck = Healthcheck(command=health["command"],
                                  interval_sec=float(health.get("interval_sec", 5.0)),
                                  timeout_sec=float(health.get("timeout_sec", 30.0)),
                                  start_period_sec=float(health.get("start_period_sec", 0.0)),
                                  retries=int(health.get("retries", 3)))
    elif health is not None:
        raise TaskFormatError(str(task_file), "healthcheck needs a command", pointer="/environment/healthcheck")
    dockerfile = DOCKERFILE if (folder / DOCKERFILE).is_file() else None
    default_workdir = DEFAULT_WORKDIR
    if dockerfile is not None:
        default_workdir = dockerfile_workdir((folder / DOCKERFILE).read_text(encoding="utf-8", errors="replace"),
                                             DEFAULT_WORKDIR)
        if default_workdir in ("/", ""):
            default_workdir = DEFAULT_WORKDIR
    workdir = str(env.get("workdir") or default_workdir)
    if not workdir.startswith("/") or workdir.rstrip("/") in ("", "/tests", "/logs", "/solution"):
        raise TaskFormatError(str(task_file), f"workdir {workdir!r} must be an absolute folder of the agent's own",
                              pointer="/environment/workdir")
    mode = own.get("verifier", VerifierMode.ISOLATED.value)
    if mode not in {m.value for m in VerifierMode}:
        raise TaskFormatError(str(task_file), f"verifier {mode!r} is not 'isolated' or 'shared'",
                              pointer=f"/{OWN_TABLE}/verifier",
                              hint="'shared' runs the verifier where the agent ran (for tasks that need the "
                                   "agent's running services): weaker, and reported so")
    return HarborSpec(
        schema_version=version, name=str(package.get("name", "")), metadata=dict(meta),
        agent_timeout_sec=_number(agent, "timeout_sec", task_file, "/agent/timeout_sec", None),
        verifier_timeout_sec=float(_number(verifier, "timeout_sec", task_file, "/verifier/timeout_sec", 600.0) or 600),
        build_timeout_sec=float(_number(env, "build_timeout_sec", task_file, "/environment/build_timeout_sec", 600.0)
                                or 600),
        cpus=int(_number(env, "cpus", task_file, "/environment/cpus", 1) or 1),
        memory_mb=memory_mb, storage_mb=storage_mb,
        docker_image=str(env["docker_image"]) if env.get("docker_image") else None,
        workdir=workdir.rstrip("/") or DEFAULT_WORKDIR,
        verifier_env=_strings(verifier, "env", task_file, "/verifier/env"),
        solution_env=_strings(solution, "env", task_file, "/solution/env"),
        agent_user=_user(agent.get("user")), verifier_user=_user(verifier.get("user")),
        healthcheck=healthcheck, mode=VerifierMode(mode), unsupported=unsupported, dockerfile=dockerfile)


def _user(value: object) -> str | None:
    return None if value is None else str(value)


def task_id_of(folder: Path, spec: HarborSpec) -> str:
    """Harbor names a task by its folder (or ``[task] name``'s short name)."""
    name = spec.name.rsplit("/", 1)[-1] if spec.name else Path(folder).resolve().name
    return _ID_CHARS.sub("-", name).strip("-") or "harbor-task"


def load_harbor_task(folder: Path) -> Task:
    """Load the Harbor task folder ``folder``, or raise TaskFormatError saying what and where."""
    folder = Path(folder)
    task_file = folder / TASK_FILE
    try:
        data = tomllib.loads(task_file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TaskFormatError(str(task_file), f"not valid TOML: {e}") from None
    for link, target in escaping_symlinks(folder):
        raise TaskFormatError(str(link), f"symlink points outside the task folder (to {target!r})",
                              hint="copy the file into the task folder instead of linking to it")
    if not (folder / INSTRUCTION_FILE).is_file():
        raise TaskFormatError(str(folder / INSTRUCTION_FILE), "missing instruction.md (the agent's instruction)")
    if not (folder / TEST_SCRIPT).is_file():
        raise TaskFormatError(str(folder / TEST_SCRIPT), "missing tests/test.sh (the verifier)",
                              hint="test.sh writes /logs/verifier/reward.txt or reward.json")
    if not (folder / SOLVE_SCRIPT).is_file():
        raise TaskFormatError(str(folder / SOLVE_SCRIPT), "missing solution/solve.sh (the oracle)",
                              hint="every task needs a reference solution that passes its verifier")
    spec = read_spec(folder, data)
    if spec.dockerfile is None and spec.docker_image is None:
        raise TaskFormatError(str(folder / DOCKERFILE), "no environment: neither environment/Dockerfile nor "
                              "[environment] docker_image", pointer="/environment/docker_image")
    meta = spec.metadata
    tags = meta.get("tags", [])
    limits_wall = spec.verifier_timeout_sec + (spec.agent_timeout_sec or 0.0)
    return Task(
        root=folder, schema_version=1, id=task_id_of(folder, spec),
        title=str(meta.get("title", "")) if isinstance(meta.get("title", ""), str) else "",
        domain=str(meta.get("category") or "terminal"), language="shell",
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        environment=Environment(image=spec.docker_image or DEFAULT_IMAGE, runtime="shell",
                                dockerfile=spec.dockerfile),
        test=TestSpec(command="bash /tests/test.sh", results=RESULTS_FILE),
        scoring=Scoring(policy=ScoringPolicy.FRACTION),
        limits=TaskLimits(wall_seconds=limits_wall, memory_mb=spec.memory_mb, processes=1024,
                          output_bytes=1048576),
        editable=(AGENT_SCRIPT, "**"), kind=HARBOR_KIND, harbor=spec,
    )


__all__ = ["DEFAULT_IMAGE", "HARBOR_KIND", "OWN_TABLE", "RESULTS_FILE", "is_harbor_folder", "load_harbor_task",
           "parse_size_mb", "read_spec", "task_id_of"]
