"""Shared fixtures and marker-based skips.

Markers (registered in pyproject.toml under ``--strict-markers``):

- ``bwrap``: needs bubblewrap with working user namespaces; skipped with the reason otherwise.
- ``docker``: needs a running Docker engine and the docker backend; skipped with the reason
  otherwise.
- ``gpu``: needs a CUDA GPU; skipped otherwise.
- ``ray``: needs Ray (the ``distributed`` extra); skipped with the reason where it is not importable.
- ``slow``: takes more than a few seconds; never skipped here (deselect with ``-m "not slow"``).

CI installs bubblewrap and Docker, so in CI nothing that matters is skipped.
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from verify_cli.errors import VerifyError
from verify_cli.sandbox.base import Availability, RunResult, RunSpec, Sandbox, Verdict
from verify_cli.sandbox.kit.testing import FakeSandbox
from verify_cli.sandbox.registry import create_sandbox, sandbox_class, sandbox_names

#: The fixture tasks' own tests run inside sandboxes, never as part of this suite.
collect_ignore_glob = ["fixtures/*"]

REPO_ROOT = Path(__file__).resolve().parent.parent
SAMPLE_TASKS = REPO_ROOT / "sample_tasks"
DEFECTIVE_TASKS = REPO_ROOT / "tests" / "fixtures" / "defective"


def backend_availability(name: str) -> Availability:
    """Whether backend ``name`` can run here; a backend not (yet) registered is unavailable."""
    try:
        return sandbox_class(name).availability()
    except VerifyError as e:
        return Availability(False, e.message)


def _gpu_availability() -> Availability:
    try:
        import torch
    except ImportError:
        return Availability(False, "torch is not installed")
    if not torch.cuda.is_available():
        return Availability(False, "no CUDA GPU")
    return Availability(True)


def _ray_availability() -> Availability:
    try:
        import ray  # noqa: F401
    except ImportError as e:
        return Availability(False, f"ray is not importable ({e}); pip install 'verify-cli[distributed]'")
    return Availability(True)


_PREREQUISITES: dict[str, Callable[[], Availability]] = {
    "bwrap": lambda: backend_availability("bwrap"),
    "docker": lambda: backend_availability("docker"),
    "gpu": _gpu_availability,
    "ray": _ray_availability,
}


#: The slowest test modules, with rough seconds on CI (2 xdist workers on 2 cores), in the order
#: they start: slowest first, docker-heavy and bwrap-heavy ones alternating (so that the two
#: workers do not both wait on the one Docker engine). Under xdist (``scripts/test.sh``:
#: ``--dist loadfile --no-loadscope-reorder``) modules are handed out in collection order, and
#: this puts these first: the long ones start at once and the many short ones balance the two
#: workers at the end. (xdist's own order, most tests first, starts the suite's longest modules,
#: which have few tests, last.) Only the order changes; the other modules follow in their usual
#: order. The seconds are for whoever updates the list (`--durations` of a CI run).
SLOW_MODULES: dict[str, float] = {  # worker-seconds of the last full run (--junitxml), 2 cores
    "grading/test_docker_two_process.py": 340,  # 463 before its warm matrix took one task of each shape
    "grading/test_hack_suite.py": 270,
    "grading/test_trusted_processes.py": 260,  # 223, plus the link and daemon fixtures
    "grading/test_two_process_parity.py": 201,
    "grading/test_warm.py": 189,
    "executors/test_ray_executor.py": 175,  # 162, plus train --agent on Ray
    "checks/test_backend_parity.py": 159,
    "sandbox/test_sessions.py": 136,
    "grading/test_warm_docker.py": 128,
    "rollout/test_loop.py": 116,
    "checks/test_probes.py": 116,
    "environments/test_environments.py": 110,  # estimate: environment builds (docker images too)
    "environments/test_rootfs.py": 90,  # 53-78 s alone: image builds and root exports, docker and bwrap
    "kinds/test_contract.py": 91,
    "formats/harbor/test_harbor_docker.py": 90,  # estimate: Harbor images, isolated verifiers
    "formats/harbor/test_harbor_bwrap.py": 55,  # 26-55 s alone (load): 9 images exported, ~80 trials
    "sandbox/test_conformance.py": 89,
    "adapters/test_verifiers_framework.py": 84,  # vf-eval twice (scripts/extras/verifiers.txt)
    "sandbox/test_session_cases.py": 80,  # estimate: the hostile-agent cases on every backend
    "agents/test_agent_train.py": 79,
    "service/test_serve.py": 79,
    "adapters/test_verl_framework.py": 76,  # verl beside the venv (scripts/extras/verl.txt), on Ray
    "checks/test_audit.py": 74,
    "difficulty/test_scale.py": 60,
    "service/test_run_code_load.py": 60,  # estimate: verl's client at 32 and 128 requests
    "service/test_run_code_languages.py": 140,  # 12-37 s with its image stored; its first build ~100 s
    "sandbox/test_docker_backend.py": 55,
    "checks/test_solvability.py": 53,
    "service/test_faults.py": 51,
    "agents/test_agent_toy_training.py": 50,
    "rollout/test_toy_training.py": 49,
    "difficulty/test_hf_end_to_end.py": 46,
    "grading/test_docker_warm_two_process.py": 42,
    "test_readme_walkthrough.py": 44,  # the README's walk-through: new-task to an agent episode
}
_START_RANK = {name: rank for rank, name in enumerate(SLOW_MODULES)}

#: The extended tier: run by ``scripts/test.sh --full`` (VERIFY_TESTS_FULL=1), skipped with this
#: reason by the default command (``.ci/run``), which must stay under 15 minutes on 2 cores. Each
#: entry is a module or one test, with what in the default tier covers the same ground.
FULL_ENV = "VERIFY_TESTS_FULL"
EXTENDED: dict[str, str] = {
    "executors/test_ray_executor.py": "a local Ray cluster per test; test_ray_autostart.py starts one",
    "grading/test_warm_docker.py": "every task warm and cold on docker; test_docker_warm_two_process.py "
                                   "compares warm docker with warm bwrap",
    "checks/test_backend_parity.py": "check-tasks on docker and bwrap over every task; the docker "
                                     "two-process and warm parity tests cover the grades",
    "difficulty/test_scale.py::test_hundreds_of_samples_leave_no_file_in_the_scratch_space[process]":
        "the same on the process backend; the bwrap case stays",
    "grading/test_hack_suite.py::test_in_process_misses_what_two_process_catches":
        "the in-process mode's known weakness shown hack by hack; the two-process hack suite stays",
    "grading/test_docker_two_process.py::test_identical_verdicts_docker_and_bwrap":
        "cold docker against cold bwrap; test_docker_warm_two_process.py compares them warm",
    "service/test_run_code_load.py::test_verls_client_reaches_a_service_with_a_token_through_its_url":
        "verl's client with the token in the URL; test_run_code.py checks the URL token",
    "service/test_run_code_load.py::test_verls_sandbox_fusion_reward_gets_every_case_right[128-at-once]":
        "the same at 128 requests; the 32-at-once case stays",
    "rollout/test_toy_training.py": "GRPO raising a tiny model's reward over 10 steps; test_loop.py "
                                    "runs the loop, its updates and its shards",
    "agents/test_agent_toy_training.py": "GRPO over agent episodes over 10 steps; test_agent_train.py "
                                         "runs the agent loop and its rows",
    "formats/harbor/test_harbor_docker.py::test_every_planted_defect_is_caught_for_its_own_reason":
        "the same planted defects on docker; test_harbor_bwrap.py catches each for its reason, and "
        "the docker trials' soundness, hacks and agents stay",
    "formats/harbor/test_harbor_docker.py::test_audit_finds_the_fix_in_the_images_git_history_and_nothing_on_a_sound_task":
        "the same audit on docker; test_harbor_bwrap.py runs it on bwrap",
    "grading/test_two_process_parity.py::test_identical_verdicts_on_every_python_task_bwrap":
        "in-process against two-process verdicts on every Python task; the parity corpus's "
        "in-process soundness, the process backend's interface tasks in both modes and warm "
        "against cold two-process on every Python task stay",
    "grading/test_docker_two_process.py::test_hacks_earn_nothing_warm_on_docker":
        "the hack suite on warm docker nodes; the cold docker hacks and the trusted-process rule on "
        "warm docker nodes (test_trusted_processes.py) stay",
}

#: Parametrized cases in the extended tier: (module, a part of the case's id) -> what in the
#: default tier covers the same ground.
EXTENDED_CASES: dict[tuple[str, str], str] = {
    ("grading/test_trusted_processes.py", "on_docker_nodes[cold]"):
        "the trusted-process rule on cold docker node runs (nested bubblewraps); the same cases on "
        "cold and warm bwrap and on warm docker nodes stay, and the cold docker hacks "
        "(test_docker_two_process.py)",
    ("sandbox/test_conformance.py", "docker-single-use"):
        "the hostile programs in single-use containers; the same programs on docker's default node "
        "mode, bwrap and process stay, and single-use's own lifecycle (test_docker_backend.py)",
    ("sandbox/test_verdicts.py", "docker-single-use"):
        "the verdicts in single-use containers; the same on docker's node mode, bwrap and process stay",
    ("rollout/test_loop.py", "[between_shards]"):
        "a train run killed between two shards and resumed; the kill before a commit stays",
}


#: Tests that use one of these fixtures are in the extended tier too.
EXTENDED_FIXTURES: dict[str, str] = {
    "toolchain_service": "builds the C++/Go toolchain image (about 100 s); serving the languages on "
                         "bwrap, and refusing the unknown ones, stay",
}


def _extended_reason(rel: str, item: pytest.Item) -> str | None:
    why = EXTENDED.get(rel) or EXTENDED.get(f"{rel}::{item.name}") or next(
        (reason for (module, part), reason in EXTENDED_CASES.items() if module == rel and part in item.name), None)
    fixtures = [EXTENDED_FIXTURES[f] for f in getattr(item, "fixturenames", ()) if f in EXTENDED_FIXTURES]
    return why or (fixtures[0] if fixtures else None)


def _slowest_modules_first(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.path
        rel = path.relative_to(REPO_ROOT / "tests").as_posix() if path.is_relative_to(REPO_ROOT / "tests") else ""
        return _START_RANK.get(rel, len(_START_RANK))

    items.sort(key=rank)  # stable: each module's tests keep their order


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _slowest_modules_first(items)
    if os.environ.get(FULL_ENV) != "1":
        for item in items:
            path = item.path
            rel = path.relative_to(REPO_ROOT / "tests").as_posix() if path.is_relative_to(REPO_ROOT / "tests") else ""
            why = _extended_reason(rel, item)
            if why:
                item.add_marker(pytest.mark.skip(reason=f"extended tier ({FULL_ENV}=1 or scripts/test.sh "
                                                        f"--full): {why}"))
    checked: dict[str, Availability] = {}
    for item in items:
        for marker, probe in _PREREQUISITES.items():
            if item.get_closest_marker(marker) is None:
                continue
            if marker not in checked:
                checked[marker] = probe()
            avail = checked[marker]
            if not avail.available:
                item.add_marker(pytest.mark.skip(reason=f"{marker} unavailable: {avail.reason}"))


# --- the Docker engine during the run -----------------------------------------------------

#: Set by scripts/test.sh: a Docker engine that stops answering mid-run is started again (by the
#: same script that started it) before the next docker test, and the loss is reported as a warning
#: with the daemon's last words. One lost daemon then fails the tests that were using it, not
#: every docker test after it with "Connection refused" (a CI run lost it so, with no trace).
RESTART_DOCKER_ENV = "VERIFY_TESTS_RESTART_DOCKER"


def _docker_answers() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=10)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _docker_last_words() -> str:
    log = Path(os.environ.get("DOCKERD_LOG", "/var/log/verify-cli-dockerd.log"))
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if "level=info" not in line]
    except OSError as e:
        lines = [f"(no daemon log: {e})"]
    kernel = subprocess.run(["dmesg"], capture_output=True, text=True, check=False).stdout.splitlines()
    # the sandboxes' own OOM kills (the memory tests) are many and beside the point
    oom = [line for line in kernel if "killed process" in line.lower()
           and ("(dockerd)" in line or "(containerd)" in line)]
    return "\n".join(["daemon log:", *lines[-15:], "kernel (OOM kills of the daemon):", *(oom[-5:] or ["none"])])


def _restart_docker(nodeid: str, when: str) -> None:
    """Start the engine again, remove what the dead one left (its containers all ended with it:
    a count of containers in a test would see them), and warn with the daemon's last words."""
    words = _docker_last_words()
    started = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "setup_docker.sh")],
                             capture_output=True, text=True, check=False)
    removed = 0
    try:
        import docker

        client = docker.from_env(timeout=30)
        try:
            for c in client.containers.list(all=True, filters={"label": "verify-cli=1", "status": ["exited", "dead"]}):
                with contextlib.suppress(Exception):
                    c.remove(force=True)
                    removed += 1
        finally:
            client.close()
    except Exception as e:  # the warning below says the engine's state
        words += f"\n(could not remove the dead engine's containers: {e})"
    warnings.warn(pytest.PytestWarning(
        f"the Docker engine stopped answering {when} {nodeid}; scripts/setup_docker.sh exited "
        f"{started.returncode}: {started.stderr.strip()[-300:]}; {removed} containers of the dead "
        f"engine removed\n{words}"), stacklevel=1)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if (os.environ.get(RESTART_DOCKER_ENV) != "1" or item.get_closest_marker("docker") is None
            or item.get_closest_marker("skip") is not None or _docker_answers()):
        return
    _restart_docker(item.nodeid, "before")


def _daemon_pid() -> str:
    try:
        return Path("/var/run/docker.pid").read_text().strip()
    except OSError:
        return ""


#: Set by scripts/test.sh where the kernel can trace (scripts/daemon_trace.py): the test each
#: worker starts is written to that trace, to name what ran when something signalled the daemon.
TRACE_MARKER_ENV = "VERIFY_TESTS_TRACE_MARKER"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Marks the test in the daemon trace; and a docker test that failed while the engine went
    down is run once more after it is started again (the loss is warned about): one lost
    daemon then costs no test that was using it when it died."""
    if marker := os.environ.get(TRACE_MARKER_ENV):
        with contextlib.suppress(OSError), open(marker, "w") as fh:
            fh.write(f"TEST START {os.environ.get('PYTEST_XDIST_WORKER', 'main')} {item.nodeid}\n")
    if os.environ.get(RESTART_DOCKER_ENV) != "1" or item.get_closest_marker("docker") is None:
        return None
    from _pytest.runner import runtestprotocol

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    daemon = _daemon_pid()
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    # (the other worker may have started the engine again already: a new daemon pid says so)
    # one ping (10 s when the engine is down), not one to decide and another to act
    failed = any(r.failed for r in reports)
    answers = _docker_answers() if failed else True
    if failed and (_daemon_pid() != daemon or not answers):
        if not answers:
            _restart_docker(item.nodeid, "during")
        else:
            warnings.warn(pytest.PytestWarning(f"the Docker engine was started again during "
                                               f"{item.nodeid}: it runs once more"), stacklevel=1)
        if isinstance(item, pytest.Function):
            item._initrequest()  # fresh fixture values for the second run
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


@pytest.fixture
def bwrap_available() -> None:
    """Depend on this to skip (with the reason) where bubblewrap cannot run; or mark ``bwrap``."""
    avail = backend_availability("bwrap")
    if not avail.available:
        pytest.skip(f"bwrap unavailable: {avail.reason}")


# --- task folders -------------------------------------------------------------------------

PYTEST_COMMAND = (
    'python -m pytest -q -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests'
)

BASE_TOML: dict[str, Any] = {
    "schema_version": 1,
    "id": "demo/total",
    "title": "Sum a list",
    "domain": "coding",
    "language": "python",
    "tags": ["demo"],
    "kind": "pytest",
    "editable": ["solution.py"],
    "environment": {"image": "verify-cli/python:3.11", "runtime": "python"},
    "test": {"command": PYTEST_COMMAND, "results": "junit.xml"},
    "scoring": {"policy": "all-or-nothing"},
    "limits": {"wall_seconds": 30, "memory_mb": 512, "processes": 64},
}

BASE_FILES: dict[str, str] = {
    "prompt.md": "# Sum\n\nImplement `total(values)`.\n",
    "starter/solution.py": "def total(values):\n    raise NotImplementedError\n",
    "solution/solution.py": "def total(values):\n    return sum(values)\n",
    "tests/test_solution.py": (
        "from solution import total\n\n\n"
        "def test_empty():\n    assert total([]) == 0\n\n\n"
        "def test_several():\n    assert total([1, 2, 3]) == 6\n"
    ),
}

#: A test runner that starts in milliseconds (no pytest start-up): for tests about everything
#: around the runner (cache, ordering, streaming), where pytest's start-up would only cost time.
FAST_CHECK = """\
import os
import sys

sys.path.insert(0, os.getcwd())
from solution import total

CASES = {"test_empty": lambda: total([]) == 0, "test_several": lambda: total([1, 2, 3]) == 6}
cases, ok = [], True
for name, case in CASES.items():
    try:
        passed = bool(case())
    except Exception:
        passed = False
    ok = ok and passed
    cases.append(f'<testcase classname="check" name="{name}"'
                 + ("/>" if passed else '><failure message="wrong"/></testcase>'))
with open(os.path.join(os.environ["VERIFY_RESULTS_DIR"], "junit.xml"), "w") as fh:
    fh.write("<testsuites>" + "".join(cases) + "</testsuites>")
sys.exit(0 if ok else 1)
"""


def fast_runner(doc: dict[str, Any]) -> None:
    doc["kind"] = "command"
    doc["test"] = {"command": "python tests/check.py", "results": "junit.xml"}


TaskFactory = Callable[..., Path]


def write_task(
    dest: Path,
    *,
    mutate: Callable[[dict[str, Any]], None] | None = None,
    files: dict[str, str | None] | None = None,
    toml_text: str | None = None,
    fast: bool = False,
) -> Path:
    """Write a minimal valid Python task at ``dest``, then apply the changes asked for.

    ``fast`` swaps pytest for FAST_CHECK (test ids ``check::test_empty``, ``check::test_several``).
    ``mutate`` edits the task.toml document (a deep copy of BASE_TOML) before it is written;
    ``files`` adds or replaces files (text) or removes them (None); ``toml_text`` replaces
    task.toml verbatim.
    """
    doc = copy.deepcopy(BASE_TOML)
    base_files = dict(BASE_FILES)
    if fast:
        fast_runner(doc)
        base_files = {**base_files, "tests/test_solution.py": None, "tests/check.py": FAST_CHECK}
    if mutate is not None:
        mutate(doc)
    all_files: dict[str, str | None] = {**base_files, **(files or {})}
    for rel, text in all_files.items():
        p = dest / rel
        if text is None:
            if p.exists():
                p.unlink()
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    (dest / "task.toml").write_text(
        toml_text if toml_text is not None else tomli_w.dumps(doc), encoding="utf-8"
    )
    return dest


@pytest.fixture
def make_task(tmp_path: Path) -> TaskFactory:
    """``make_task(name, mutate=..., files=..., toml_text=..., fast=...)``: a task in tmp_path."""

    def factory(name: str = "task", **kwargs: Any) -> Path:
        return write_task(tmp_path / name, **kwargs)

    return factory


@pytest.fixture
def copy_task(tmp_path: Path) -> Callable[[Path, str | None], Path]:
    """Copy a shared task folder into tmp_path (shared fixtures are never edited in place)."""

    def copier(src: Path, name: str | None = None) -> Path:
        dest = tmp_path / (name or src.name)
        shutil.copytree(src, dest, symlinks=True)
        return dest

    return copier


@pytest.fixture
def sample_tasks_dir() -> Path:
    return SAMPLE_TASKS


@pytest.fixture
def defective_tasks_dir() -> Path:
    return DEFECTIVE_TASKS


# --- sandboxes ----------------------------------------------------------------------------


@pytest.fixture
def process_sandbox() -> Iterator[Sandbox]:
    with create_sandbox("process") as box:
        yield box


@pytest.fixture
def counting_sandbox(process_sandbox: Sandbox) -> FakeSandbox:
    """The process backend behind a counter of how many runs reached it (``.runs``)."""
    return FakeSandbox(inner=process_sandbox)


# --- every registered backend ------------------------------------------------------------

#: The image a backend that runs in containers uses for the functional sandbox tests (the local
#: backends ignore a RunSpec's image).
PYTHON_IMAGE = "verify-cli/python:3.11"
#: Modes of a backend tested as backends in their own right: test id -> (backend, options).
BACKEND_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "docker-single-use": ("docker", {"mode": "single-use"}),
}
#: The backend every machine has: it fails, never skips, when it cannot run a trivial command.
BASELINE_BACKEND = "process"


def backend_ids() -> list[str]:
    """Every registered backend, then the variants of those registered."""
    names = sandbox_names()
    return names + [v for v, (name, _) in BACKEND_VARIANTS.items() if name in names]


def backend_marks(test_id: str) -> list[pytest.MarkDecorator]:
    """The prerequisite marker of a backend (``bwrap``, ``docker``), so it skips with the reason."""
    name = BACKEND_VARIANTS.get(test_id, (test_id, {}))[0]
    return [getattr(pytest.mark, name)] if name in _PREREQUISITES else []


#: Parametrise a test with ``backend`` over :func:`backend_ids` and use ``sandbox_for(backend)``.
BACKEND_PARAMS = [pytest.param(b, marks=backend_marks(b), id=b) for b in backend_ids()]

SandboxFor = Callable[[str], Sandbox]


@pytest.fixture(scope="session")
def sandbox_for() -> Iterator[SandboxFor]:
    """One started sandbox per backend id for the session; skips a backend that cannot run here
    (with the reason), except the baseline, which fails."""
    opened: dict[str, Sandbox] = {}
    refused: dict[str, str] = {}

    def get(test_id: str) -> Sandbox:
        if test_id in refused:
            pytest.skip(refused[test_id])
        if test_id not in opened:
            name, options = BACKEND_VARIANTS.get(test_id, (test_id, {}))
            try:
                box = create_sandbox(name, **options)
                box.start()
            except (VerifyError, ImportError) as e:
                refused[test_id] = f"{test_id} backend unavailable: {e}"
                pytest.skip(refused[test_id])
            probe = _trivial_run(box)
            if probe.verdict is not Verdict.OK:
                box.close()
                why = (f"{test_id} cannot run a trivial command ({probe.verdict.value}: "
                       f"{probe.message}); if it runs in containers, is {PYTHON_IMAGE!r} built?")
                if name == BASELINE_BACKEND:
                    pytest.fail(why)
                refused[test_id] = why
                pytest.skip(why)
            opened[test_id] = box
        return opened[test_id]

    yield get
    for box in opened.values():
        box.close()


def _trivial_run(box: Sandbox) -> RunResult:
    with tempfile.TemporaryDirectory() as d:
        return box.run(RunSpec(["python", "-c", "print('ok')"], Path(d), image=PYTHON_IMAGE))


@pytest.fixture(params=BACKEND_PARAMS)
def any_sandbox(request: pytest.FixtureRequest, sandbox_for: SandboxFor) -> Sandbox:
    """Each registered backend in turn (and each variant), started once for the session."""
    return sandbox_for(request.param)
