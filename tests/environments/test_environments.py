"""Task environments, end to end: tasks that need what verify-cli does not ship are built an
environment once, graded inside it (two-process where the kind allows) on bwrap and docker, and
a declaration that cannot build is one honest verdict that names its cause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_task
from verify_cli.checks.report import TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.environments import Environments, EnvironmentStore, spec_of
from verify_cli.environments.prefix import cause_of
from verify_cli.environments.spec import requirement_lines
from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task, load_task_set

pytestmark = pytest.mark.slow

LXML_FILES = {
    "starter/solution.py": "def count_items(xml):\n    raise NotImplementedError\n",
    "solution/solution.py": ("from lxml import etree\n\n\n"
                             "def count_items(xml):\n"
                             "    return len(etree.fromstring(xml.encode()).findall('.//item'))\n"),
    "tests/test_solution.py": ("from lxml import etree\n\nfrom solution import count_items\n\n\n"
                               "def test_count():\n    assert count_items('<a><item/><b><item/></b></a>') == 2\n\n\n"
                               "def test_tests_side_imports_lxml_too():\n"
                               "    assert etree.fromstring(b'<x/>').tag == 'x'\n"),
}


def env_task(dest: Path, env: dict[str, Any], files: dict[str, str | None] | None = None,
             task_id: str | None = None) -> Path:
    def mutate(doc: dict[str, Any]) -> None:
        doc["environment"].update(env)
        doc["id"] = task_id or dest.name

    return write_task(dest, mutate=mutate, files={**LXML_FILES, **(files or {})})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> EnvironmentStore:
    return EnvironmentStore(tmp_path_factory.mktemp("env-store"))


def _sandbox(name: str) -> Any:
    box = create_sandbox(name)
    box.start()
    return box


def _check(path: Path, sandbox: Any, store: EnvironmentStore, repeats: int = 2) -> dict[str, Any]:
    grader = Grader(sandbox, environments=Environments(sandbox, store))
    reports = check_tasks(load_task_set(path), grader, CheckOptions(repeats=repeats))
    return {r.task_id: r for r in reports}


BACKENDS = [pytest.param("bwrap", marks=pytest.mark.bwrap), pytest.param("docker", marks=pytest.mark.docker)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_task_needing_lxml_is_sound_in_its_environment_and_defective_without(
        backend: str, tmp_path: Path, store: EnvironmentStore) -> None:
    """lxml is not in verify-cli's interpreter: declared, the task is sound two-process (the
    tests and the candidate both import it); undeclared, the table names the missing module."""
    env_task(tmp_path / "set" / "with-lxml", {"requirements": ["lxml>=5"]})
    env_task(tmp_path / "set" / "without", {})
    box = _sandbox(backend)
    try:
        reports = _check(tmp_path / "set", box, store)
    finally:
        box.close()
    good, bad = reports["with-lxml"], reports["without"]
    assert good.verdict is TaskVerdict.SOUND, [c.to_dict() for c in good.checks]
    assert good.isolation == "two-process"
    assert all(run.get("environment") for run in good.runs)
    assert bad.verdict is TaskVerdict.DEFECTIVE
    assert "ModuleNotFoundError: No module named 'lxml'" in " ".join(c.message for c in bad.defects)


@pytest.mark.bwrap
def test_an_environment_never_sees_verify_clis_own_packages_and_pins_an_older_version(
        tmp_path: Path, store: EnvironmentStore) -> None:
    """A task pinning an older rich than verify-cli's gets that version, and none of verify-cli's
    own packages (typer, jsonschema) is importable in it."""
    files = {
        "starter/solution.py": "def total(values):\n    raise NotImplementedError\n",
        "solution/solution.py": "def total(values):\n    return sum(values)\n",
        "tests/test_solution.py": (
            "import importlib.util\nfrom importlib.metadata import version\n\nfrom solution import total\n\n\n"
            "def test_total():\n    assert total([1, 2]) == 3\n\n\n"
            "def test_pinned_rich():\n    assert version('rich') == '13.7.1'\n\n\n"
            "def test_no_verify_cli_packages():\n"
            "    assert importlib.util.find_spec('typer') is None\n"
            "    assert importlib.util.find_spec('jsonschema') is None\n"),
    }
    path = env_task(tmp_path / "pinned", {"requirements": ["rich==13.7.1"]}, files)
    box = _sandbox("bwrap")
    try:
        reports = _check(path, box, store)
    finally:
        box.close()
    assert reports["pinned"].verdict is TaskVerdict.SOUND, [c.to_dict() for c in reports["pinned"].checks]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_requirement_that_does_not_exist_is_an_environment_error_naming_it(
        backend: str, tmp_path: Path, store: EnvironmentStore) -> None:
    env_task(tmp_path / "set" / "broken", {"requirements": ["verify-cli-no-such-package-zz==1.0"]})
    env_task(tmp_path / "set" / "fine", {"requirements": ["lxml>=5"]})
    box = _sandbox(backend)
    try:
        reports = _check(tmp_path / "set", box, store)
    finally:
        box.close()
    broken = reports["broken"]
    assert broken.verdict is TaskVerdict.ENVIRONMENT_ERROR
    (check,) = broken.defects
    assert check.name == "environment"
    assert "verify-cli-no-such-package-zz" in check.message
    assert "build log:" in check.message
    assert reports["fine"].verdict is TaskVerdict.SOUND  # nothing else affected


@pytest.mark.docker
def test_a_dockerfile_that_does_not_parse_is_an_environment_error(tmp_path: Path, store: EnvironmentStore) -> None:
    path = env_task(tmp_path / "badfile", {"dockerfile": "environment/Dockerfile"},
                    {"environment/Dockerfile": "FROM verify-cli/python:3.11\nTHIS IS NOT AN INSTRUCTION\n"})
    task = load_task(path)
    box = _sandbox("docker")
    try:
        result = Grader(box, environments=Environments(box, store)).grade(GradeRequest(task, Phase.REFERENCE))
    finally:
        box.close()
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None
    assert result.problems[0].startswith("environment-error:")
    assert "unknown instruction" in result.problems[0].lower()


@pytest.mark.docker
def test_a_dockerfile_environment_with_a_system_program(tmp_path: Path, store: EnvironmentStore) -> None:
    """A Dockerfile task (Harbor's layout) whose tests call a program a Debian package brings."""
    files = {
        "environment/Dockerfile": ("FROM verify-cli/python:3.11\nUSER root\n"
                                   "RUN apt-get update -q && apt-get install -y -q --no-install-recommends "
                                   "libxml2-utils && rm -rf /var/lib/apt/lists/*\nUSER 1000:1000\n"),
        "starter/solution.py": "def well_formed(path):\n    raise NotImplementedError\n",
        "solution/solution.py": ("import subprocess\n\n\ndef well_formed(path):\n"
                                 "    return subprocess.run(['xmllint', '--noout', path]).returncode == 0\n"),
        "tests/test_solution.py": (
            "from solution import well_formed\n\n\n"
            "def test_good(tmp_path):\n    p = tmp_path / 'a.xml'\n    p.write_text('<a/>')\n"
            "    assert well_formed(str(p))\n\n\n"
            "def test_bad(tmp_path):\n    p = tmp_path / 'b.xml'\n    p.write_text('<a>')\n"
            "    assert not well_formed(str(p))\n"),
    }
    path = env_task(tmp_path / "xmllint", {"dockerfile": "environment/Dockerfile"}, files)
    box = _sandbox("docker")
    try:
        reports = _check(path, box, store)
    finally:
        box.close()
    assert reports["xmllint"].verdict is TaskVerdict.SOUND, [c.to_dict() for c in reports["xmllint"].checks]


REPO_FILES = {
    "starter/pyproject.toml": ('[build-system]\nrequires = ["setuptools>=61"]\n'
                               'build-backend = "setuptools.build_meta"\n\n'
                               '[project]\nname = "shapes"\nversion = "0.1"\n\n'
                               '[tool.setuptools]\npackages = ["shapes"]\n'),
    "starter/shapes/__init__.py": "def area(w, h):\n    return w + h\n",
    "solution/shapes/__init__.py": "def area(w, h):\n    return w * h\n",
    "tests/test_solution.py": ("import importlib.metadata\n\nimport shapes\n\n\n"
                               "def test_area():\n    assert shapes.area(2, 3) == 6\n\n\n"
                               "def test_installed():\n    assert importlib.metadata.version('shapes') == '0.1'\n"),
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_repository_installed_by_its_own_setup_command(backend: str, tmp_path: Path,
                                                         store: EnvironmentStore) -> None:
    """``setup = ["pip install -e ."]`` runs once at build time over the starter in /workspace:
    the project is installed (its metadata found), and every run imports the work folder's code."""
    def mutate(doc: dict[str, Any]) -> None:
        doc["id"] = "shapes"
        doc["editable"] = ["shapes/*.py"]
        doc["environment"].update(setup=["pip install -q --no-build-isolation -e ."],
                                  requirements=["setuptools>=61"])

    path = write_task(tmp_path / "shapes", mutate=mutate,
                      files={**REPO_FILES, "starter/solution.py": None, "solution/solution.py": None})
    box = _sandbox(backend)
    try:
        reports = _check(path, box, store)
    finally:
        box.close()
    assert reports["shapes"].verdict is TaskVerdict.SOUND, [c.to_dict() for c in reports["shapes"].checks]


@pytest.mark.bwrap
def test_tasks_sharing_a_declaration_share_one_build(tmp_path: Path) -> None:
    """Six tasks, two declarations: two builds; the others are found in the store."""
    store = EnvironmentStore(tmp_path / "store")
    for i in range(6):
        env_task(tmp_path / "set" / f"t{i}", {"requirements": ["lxml>=5"] if i % 2 else ["lxml>=5", "rich"]})
    box = _sandbox("bwrap")
    try:
        envs = Environments(box, store)
        realised = [envs.realise(t) for t in load_task_set(tmp_path / "set")]  # type: ignore[arg-type]
    finally:
        box.close()
    assert sum(r is not None and r.built for r in realised) == 2
    assert len({r.identity for r in realised if r}) == 2
    assert len(store.entries()) == 2


@pytest.mark.bwrap
def test_an_environment_built_twice_from_a_clean_store_has_the_same_identity_and_packages(tmp_path: Path) -> None:
    path = env_task(tmp_path / "twice", {"requirements": ["lxml>=5"]})
    task = load_task(path)
    box = _sandbox("bwrap")
    manifests = []
    try:
        for n in range(2):
            store = EnvironmentStore(tmp_path / f"store{n}")
            realised = Environments(box, store).realise(task)
            assert realised is not None and realised.built
            manifests.append(store.manifest(realised.identity))
    finally:
        box.close()
    a, b = manifests
    assert a is not None and b is not None
    assert a["identity"] == b["identity"]
    assert a["packages"] == b["packages"] and any(p.startswith("lxml==") for p in a["packages"])


def test_the_identity_follows_what_the_declaration_names(tmp_path: Path) -> None:
    """A changed requirements file changes the identity; a changed prompt does not."""
    path = env_task(tmp_path / "t", {"requirements_file": "requirements.txt"},
                    {"requirements.txt": "lxml>=5  # parsing\n\n# comment\n"})
    first = spec_of(load_task(path))
    (path / "prompt.md").write_text("another prompt\n")
    same = spec_of(load_task(path))
    (path / "requirements.txt").write_text("lxml>=5.1\n")
    changed = spec_of(load_task(path))
    assert first is not None and same is not None and changed is not None
    assert first.digest == same.digest != changed.digest
    assert first.requirements[0] == "lxml>=5"
    assert spec_of(load_task(write_task(tmp_path / "plain"))) is None  # declares nothing


def test_a_missing_requirements_file_is_a_task_format_error(tmp_path: Path) -> None:
    from verify_cli.errors import TaskFormatError

    path = env_task(tmp_path / "t", {"requirements_file": "nope.txt"})
    with pytest.raises(TaskFormatError, match=r"/environment/requirements_file.*no such file"):
        load_task(path)


def test_requirement_lines_and_build_causes() -> None:
    assert requirement_lines("a==1 \\\n  --hash=sha256:ab\n# c\nb>=2 # why\n\n") == ["a==1 --hash=sha256:ab", "b>=2"]
    tail = ("Resolved 3 packages\n  \u00d7 No solution found when resolving dependencies:\n"
            "  \u2570\u2500\u25b6 Because zz was not found in the package registry, unsatisfiable.\n")
    assert cause_of(tail).startswith("Because zz was not found")


def test_env_build_and_list_commands(tmp_path: Path) -> None:
    """``env build`` builds each declaration once and says which failed (exit 1); ``env list``
    shows what is stored."""
    import subprocess
    import sys

    env_task(tmp_path / "set" / "ok", {"requirements": ["lxml>=5"]})
    env_task(tmp_path / "set" / "broken", {"requirements": ["verify-cli-no-such-package-zz==1.0"]})
    store = tmp_path / "store"
    cli = [sys.executable, "-m", "verify_cli"]
    built = subprocess.run([*cli, "env", "build", str(tmp_path / "set"), "--sandbox", "process",
                            "--store", str(store), "--json", "-"], capture_output=True, text=True)
    assert built.returncode == 1, built.stderr
    rows = {r["tasks"][0]: r for r in json.loads(built.stdout)["environments"]}
    assert rows["ok"]["status"] == "built" and rows["broken"]["status"] == "failed"
    assert "verify-cli-no-such-package-zz" in rows["broken"]["cause"]
    listed = subprocess.run([*cli, "env", "list", "--store", str(store), "--json", "-"],
                            capture_output=True, text=True, check=True)
    (entry,) = json.loads(listed.stdout)["environments"]
    assert entry["identity"] == rows["ok"]["identity"] and entry["form"] == "prefix"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_agent_episode_runs_in_the_tasks_environment(backend: str, tmp_path: Path,
                                                        store: EnvironmentStore) -> None:
    """An agent's session is the environment its grade runs in: a command that imports lxml
    works there, the visible tests run, and the reference written by the agent earns 1."""
    from tests.agents.conftest import PolicyServer, scripted
    from verify_cli.agents.episode import run_episode
    from verify_cli.agents.protocol import agent_model
    from verify_cli.models.registry import create_model_backend

    task = load_task(env_task(tmp_path / "agent-lxml", {"requirements": ["lxml>=5"]}))
    steps = [[("bash", {"command": "python -c 'import lxml; print(\"lxml\", lxml.__version__)'"})],
             [("write_file", {"path": rel, "content": p.read_text()}) for rel, p in task.solution_files().items()],
             [("run_tests", {})], [("submit", {})]]
    server = PolicyServer()
    box = _sandbox(backend)
    try:
        server.policies["solver"] = scripted(steps)
        model = agent_model(create_model_backend("openai", model="solver", base_url=server.base_url, max_retries=0))
        with Grader(box, environments=Environments(box, store)) as grader:
            episode = run_episode(task, model, box, grader)
    finally:
        box.close()
        server.close()
    assert episode.end_reason == "submit", episode.to_dict()
    first = episode.turns[0].observations[0]["text"]
    assert "lxml " in first and "ModuleNotFoundError" not in first, first
    assert " passed, 0 failed" in episode.turns[2].observations[0]["text"]
    assert (episode.status, episode.score) == ("passed", 1.0), episode.to_dict()
