"""Environments that need an image (system packages, a Dockerfile) on bwrap: the image is built
once (Docker at build time only), its root file system exported once into the environment's store
folder, and every bwrap run sees that root as its system, two-process where the kind allows. The
same tasks grade the same on docker, with the same environment identity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.environments.test_environments import BACKENDS, _check, _sandbox, env_task
from verify_cli.checks.report import TaskVerdict
from verify_cli.environments import Environments, EnvironmentStore
from verify_cli.errors import EnvironmentBuildError
from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.tasks.loader import load_task

pytestmark = [pytest.mark.slow, pytest.mark.docker]

#: A program (xmllint: not on the host) and a C extension (PyYAML with libyaml, Debian's build
#: for the image's own interpreter), both from Debian packages; used by the candidate's code and
#: by the tests.
PACKAGES_FILES = {
    "starter/solution.py": "def check(xml, doc):\n    raise NotImplementedError\n",
    "solution/solution.py": (
        "import subprocess\n\nimport yaml\n\n\n"
        "def check(xml, doc):\n"
        "    ok = subprocess.run(['xmllint', '--noout', '-'], input=xml, capture_output=True, text=True)\n"
        "    return ok.returncode == 0, yaml.load(doc, Loader=yaml.CLoader)\n"),
    "tests/test_solution.py": (
        "import shutil\n\nimport yaml\n\nfrom solution import check\n\n\n"
        "def test_well_formed_and_parsed():\n    assert check('<a/>', 'k: [1, 2]') == (True, {'k': [1, 2]})\n\n\n"
        "def test_malformed():\n    assert check('<a>', 'k: 1')[0] is False\n\n\n"
        "def test_the_tests_see_the_images_system():\n"
        "    assert shutil.which('xmllint') == '/usr/bin/xmllint'\n"
        "    assert yaml.__with_libyaml__ and yaml.__file__.startswith('/usr/lib/python3/dist-packages/')\n"),
}

#: A Dockerfile task (Harbor's layout): a tool the Dockerfile puts under /opt, called by the
#: candidate's code and checked by the tests.
DOCKERFILE = ("FROM verify-cli/python:3.11\nUSER root\n"
              "RUN mkdir -p /opt/tool && printf '#!/bin/sh\\necho \"$(( $1 * 2 ))\"\\n' > /opt/tool/double "
              "&& chmod 755 /opt/tool/double\nUSER 1000:1000\n")
DOCKERFILE_FILES = {
    "environment/Dockerfile": DOCKERFILE,
    "starter/solution.py": "def double(n):\n    raise NotImplementedError\n",
    "solution/solution.py": ("import subprocess\n\n\ndef double(n):\n"
                             "    return int(subprocess.run(['/opt/tool/double', str(n)], capture_output=True, "
                             "text=True, check=True).stdout)\n"),
    "tests/test_solution.py": ("from solution import double\n\n\n"
                               "def test_double():\n    assert double(21) == 42\n\n\n"
                               "def test_zero():\n    assert double(0) == 0\n"),
}

#: An image with no Python at all, of another Debian release than the host's (node's image: a
#: newer C library); a shell task (kind ``command``) and a node task (two-process) graded in it.
NO_PYTHON_DOCKERFILE = "FROM verify-cli/node:20\nUSER root\nRUN mkdir -p /opt/marker\nUSER 1000:1000\n"
NODE_FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "kinds" / "node" / "task"
SHELL_CHECK = (
    'out="$VERIFY_RESULTS_DIR/junit.xml"\n'
    'if command -v python3 >/dev/null; then echo "python3 is here" >&2; exit 3; fi\n'
    'case "$(sh answer.sh 4)" in 16) r="/>" ;; *) r="><failure message=\\"wrong\\"/></testcase>" ;; esac\n'
    'printf \'<testsuites><testsuite><testcase classname="check" name="square"%s</testsuite></testsuites>\' "$r" '
    '> "$out"\n'
    'case "$r" in "/>") exit 0 ;; *) exit 1 ;; esac\n')


def shell_task(dest: Path, task_id: str) -> Path:
    from tests.conftest import write_task

    def mutate(doc: dict[str, Any]) -> None:
        doc.update(id=task_id, kind="command", editable=["answer.sh"], language="shell")
        doc["environment"].update(dockerfile="environment/Dockerfile", runtime="node", image="verify-cli/node:20")
        doc["test"] = {"command": "sh tests/check.sh", "results": "junit.xml"}

    return write_task(dest, mutate=mutate, files={
        "environment/Dockerfile": NO_PYTHON_DOCKERFILE, "tests/check.sh": SHELL_CHECK,
        "starter/answer.sh": "echo 0\n", "solution/answer.sh": 'echo "$(( $1 * $1 ))"\n',
        "starter/solution.py": None, "solution/solution.py": None, "tests/test_solution.py": None})


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> EnvironmentStore:
    return EnvironmentStore(tmp_path_factory.mktemp("rootfs-store"))


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder of tasks: two images' worth of declarations (a package set, a Dockerfile) and
    a task whose reference is wrong in the Dockerfile's environment."""
    root = tmp_path_factory.mktemp("rootfs-tasks")
    env_task(root / "set" / "packages", {"system_packages": ["libxml2-utils", "python3-yaml"]}, PACKAGES_FILES)
    env_task(root / "set" / "dockerfile", {"dockerfile": "environment/Dockerfile"}, DOCKERFILE_FILES)
    env_task(root / "set" / "dockerfile-wrong", {"dockerfile": "environment/Dockerfile"},
             {**DOCKERFILE_FILES, "solution/solution.py": "def double(n):\n    return n + 2\n"})
    return root / "set"


@pytest.fixture(scope="module")
def by_backend(tasks: Path, store: EnvironmentStore) -> dict[str, dict[str, Any]]:
    """check-tasks over the set on bwrap, then on docker (the store shared: one build each)."""
    out = {}
    for backend in ("bwrap", "docker"):
        box = _sandbox(backend)
        try:
            out[backend] = _check(tasks, box, store)
        finally:
            box.close()
    return out


@pytest.mark.bwrap
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_task_with_system_packages_is_sound_on_bwrap_and_docker(
        backend: str, by_backend: dict[str, dict[str, Any]]) -> None:
    """A Debian program and a C extension from Debian packages: the tests and the candidate both
    run the image's interpreter and see its programs, on bwrap through the exported root."""
    report = by_backend[backend]["packages"]
    assert report.verdict is TaskVerdict.SOUND, [c.to_dict() for c in report.checks]
    assert report.isolation == "two-process"


@pytest.mark.bwrap
def test_a_dockerfile_task_grades_the_same_on_bwrap_as_on_docker(by_backend: dict[str, dict[str, Any]]) -> None:
    """The same verdicts, checks and environment identities on both backends."""
    bwrap, docker = by_backend["bwrap"], by_backend["docker"]
    assert bwrap["dockerfile"].verdict is TaskVerdict.SOUND, [c.to_dict() for c in bwrap["dockerfile"].checks]
    assert bwrap["dockerfile-wrong"].verdict is TaskVerdict.DEFECTIVE
    for task_id in bwrap:
        assert bwrap[task_id].verdict is docker[task_id].verdict, task_id
        assert ({c.name: c.status for c in bwrap[task_id].checks}
                == {c.name: c.status for c in docker[task_id].checks}), task_id
        identities = {r.get("environment") for b in (bwrap, docker) for r in b[task_id].runs}
        assert len(identities) == 1 and None not in identities, (task_id, identities)


@pytest.mark.bwrap
def test_the_root_is_exported_once_and_later_runs_need_no_docker(
        tasks: Path, store: EnvironmentStore, by_backend: dict[str, dict[str, Any]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment's store folder holds the exported root, recorded in its manifest; a new
    process (a fresh Environments) finds it (a cache hit), and grades with no Docker engine."""
    task = load_task(tasks / "dockerfile")
    box = _sandbox("bwrap")
    try:
        first = Environments(box, store).realise(task)
        assert first is not None and first.form == "rootfs" and not first.built
        assert first.layer is not None and first.layer.root is not None
        manifest = store.manifest(first.identity)
        assert manifest is not None and manifest["rootfs"] == first.layer.root
        assert manifest["rootfs_python"] and manifest["form"] == "image"
        stamp = Path(first.layer.root).stat().st_mtime_ns
        monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # no engine from here on
        envs = Environments(box, store)
        again = envs.realise(task)
        assert again is not None and again.identity == first.identity and not again.built
        result = Grader(box, environments=envs).grade(GradeRequest(task, Phase.REFERENCE))
    finally:
        box.close()
    assert result.status is GradeStatus.GRADED and result.passed, result.problems
    assert result.environment == first.identity
    assert Path(first.layer.root).stat().st_mtime_ns == stamp


@pytest.mark.bwrap
def test_a_warm_grader_runs_tasks_over_a_root_warm_and_grades_them_the_same(
        tasks: Path, store: EnvironmentStore, by_backend: dict[str, dict[str, Any]]) -> None:
    """Warm workers and warm candidate parents over an image's root (its interpreter, its
    programs, the host's bwrap bound in): the reference that needs the image's xmllint and
    libyaml passes two-process, the wrong reference fails, as cold; nothing falls back."""
    box = _sandbox("bwrap")
    try:
        with Grader(box, warm=True, environments=Environments(box, store)) as grader:
            good = [grader.grade(GradeRequest(load_task(tasks / "packages"), Phase.REFERENCE)) for _ in range(2)]
            wrong = grader.grade(GradeRequest(load_task(tasks / "dockerfile-wrong"), Phase.REFERENCE))
            stats = grader.warm_stats
    finally:
        box.close()
    for result in good:
        assert result.status is GradeStatus.GRADED and result.passed, result.problems
        assert result.isolation == "two-process"
    assert wrong.status is GradeStatus.GRADED and not wrong.passed and wrong.score == 0.0
    assert stats is not None and stats.warm_runs == 3 and stats.fallbacks == 0, stats
    assert stats.warm_candidates >= 2, stats


@pytest.mark.bwrap
def test_a_session_over_the_root_runs_the_images_programs_read_only(
        tasks: Path, store: EnvironmentStore, by_backend: dict[str, dict[str, Any]]) -> None:
    """An agent's session in such a task is its environment: the image's interpreter, packages
    and programs, its system read-only, the work folder the session's own."""
    box = _sandbox("bwrap")
    try:
        realised = Environments(box, store).realise(load_task(tasks / "packages"))
        assert realised is not None and realised.layer is not None
        session = box.open_session({"a.xml": b"<a/>"}, layer=realised.layer)
        try:
            ran = session.exec("xmllint --noout a.xml && python3 -c 'import yaml; print(yaml.__with_libyaml__)' "
                               "&& echo x > a.txt && cat a.txt; touch /usr/planted")
        finally:
            session.close()
    finally:
        box.close()
    out, err = ran.stdout.text, ran.stderr.text
    assert out.split() == ["True", "x"], (out, err)
    assert "Read-only file system" in err and ran.exit_code != 0


@pytest.mark.bwrap
def test_building_without_a_docker_engine_is_an_environment_error_saying_what_to_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = env_task(tmp_path / "needs-docker", {"system_packages": ["libxml2-utils"]})
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    box = _sandbox("bwrap")
    try:
        result = Grader(box, environments=Environments(box, EnvironmentStore(tmp_path / "store"))).grade(
            GradeRequest(load_task(path), Phase.REFERENCE))
    finally:
        box.close()
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None
    assert result.problems[0].startswith("environment-error:")
    assert "needs a Docker engine" in result.problems[0] and "verify-cli env build" in result.problems[0]


@pytest.mark.bwrap
def test_a_dockerfile_that_does_not_parse_is_a_one_line_environment_error_on_bwrap(
        tmp_path: Path, store: EnvironmentStore) -> None:
    path = env_task(tmp_path / "badfile", {"dockerfile": "environment/Dockerfile"},
                    {"environment/Dockerfile": "FROM verify-cli/python:3.11\nTHIS IS NOT AN INSTRUCTION\n"})
    box = _sandbox("bwrap")
    try:
        reports = _check(path, box, store)
    finally:
        box.close()
    report = reports["badfile"]
    assert report.verdict is TaskVerdict.ENVIRONMENT_ERROR
    (check,) = report.defects
    first_line = check.message.splitlines()[0]
    assert "unknown instruction" in first_line.lower(), check.message


def node_task(dest: Path) -> Path:
    import shutil

    shutil.copytree(NODE_FIXTURE, dest)
    (dest / "environment").mkdir()
    (dest / "environment" / "Dockerfile").write_text(NO_PYTHON_DOCKERFILE)
    toml = (dest / "task.toml").read_text().replace('id = "kinds/node"', 'id = "node"')
    (dest / "task.toml").write_text(toml.replace('runtime = "node"', 'runtime = "node"\n'
                                                 'dockerfile = "environment/Dockerfile"'))
    return dest


@pytest.mark.bwrap
def test_an_image_without_python_grades_shell_and_node_tasks_and_refuses_a_pytest_one(
        tmp_path: Path, store: EnvironmentStore) -> None:
    """No interpreter in the image (and a newer C library than the host's): a ``command`` task
    (sh) and a ``node`` task (two-process: the candidate-exec runner under node, the nested
    sandboxes from the host's bwrap) are graded sound over its root; a ``pytest`` task in it is
    an environment-error naming the missing interpreter, never a score."""
    shell = shell_task(tmp_path / "set" / "shell", "shell")
    node_task(tmp_path / "set" / "node")
    env_task(tmp_path / "set" / "pytest-no-python", {"dockerfile": "environment/Dockerfile"},
             {"environment/Dockerfile": NO_PYTHON_DOCKERFILE})
    assert (shell / "environment/Dockerfile").read_text() == NO_PYTHON_DOCKERFILE
    box = _sandbox("bwrap")
    try:
        reports = _check(tmp_path / "set", box, store)
    finally:
        box.close()
    assert reports["shell"].verdict is TaskVerdict.SOUND, [c.to_dict() for c in reports["shell"].checks]
    assert reports["node"].verdict is TaskVerdict.SOUND, [c.to_dict() for c in reports["node"].checks]
    assert reports["node"].isolation == "two-process"
    assert {r.get("environment") for r in reports["node"].runs} == {r.get("environment") for r in reports["shell"].runs}
    refused = reports["pytest-no-python"]
    assert refused.verdict is TaskVerdict.ENVIRONMENT_ERROR
    assert "no Python interpreter" in refused.defects[0].message
    docker = _sandbox("docker")  # the same verdict in the image itself, never "reference fails"
    try:
        on_docker = _check(tmp_path / "set" / "pytest-no-python", docker, store)["pytest-no-python"]
    finally:
        docker.close()
    assert on_docker.verdict is TaskVerdict.ENVIRONMENT_ERROR, [c.to_dict() for c in on_docker.checks]


@pytest.mark.bwrap
def test_env_build_for_bwrap_exports_the_root_and_prune_removes_it(tmp_path: Path, tasks: Path,
                                                                   store: EnvironmentStore) -> None:
    import json
    import subprocess
    import sys

    cli = [sys.executable, "-m", "verify_cli"]
    built = subprocess.run([*cli, "env", "build", str(tasks / "dockerfile"), "--sandbox", "bwrap",
                            "--store", str(store.root), "--json", "-"], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (row,) = json.loads(built.stdout)["environments"]
    assert row["form"] == "rootfs" and row["status"] == "cached"  # the module's checks built it
    listed = subprocess.run([*cli, "env", "list", "--store", str(store.root), "--json", "-"],
                            capture_output=True, text=True, check=True)
    forms = {e["identity"]: e["form"] for e in json.loads(listed.stdout)["environments"]}
    assert forms[row["identity"]] == "image+rootfs"
    root = Path(str(store.manifest(row["identity"])["rootfs"]))  # type: ignore[index]
    assert (root / "opt" / "tool" / "double").is_file()
    one = EnvironmentStore(tmp_path / "one")  # prune a copy's entry: the module's store stays whole
    one.root.mkdir()
    subprocess.run(["cp", "-al", str(store.folder(row["identity"])), str(one.root)], check=True)  # links: fast
    pruned = subprocess.run([*cli, "env", "prune", "--all", "--store", str(one.root)],
                            capture_output=True, text=True)
    assert pruned.returncode == 0, pruned.stderr
    assert not (one.root / row["identity"]).exists() and one.entries() == []


def test_a_failed_export_is_never_taken_for_a_root(tmp_path: Path) -> None:
    """Without the image there is nothing to export: an EnvironmentBuildError, no root left."""
    from verify_cli.environments.image import docker_client
    from verify_cli.environments.rootfs import export_rootfs

    try:
        client = docker_client()
    except Exception as e:  # no engine: the docker marker's skip
        pytest.skip(f"no Docker engine: {e}")
    log_path = tmp_path / "build.log"
    with open(log_path, "w") as log, pytest.raises(EnvironmentBuildError, match="exporting the root file system"):
        export_rootfs(client, "verify-cli/env:no-such-image-zz", tmp_path, log, log_path, "x")
    client.close()
    assert not (tmp_path / "rootfs").exists() and not (tmp_path / ".rootfs.partial").exists()
