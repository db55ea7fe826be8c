"""The ``swebench`` preset: SWE-bench-format rows and local clones of their repositories become
repository tasks.

A row (SWE-bench, SWE-bench Lite/Verified, SWE-Gym, SWE-smith all share the layout) holds
``instance_id``, ``repo`` (``owner/name``), ``base_commit``, ``patch`` (the gold patch),
``test_patch`` (the tests that judge it), ``FAIL_TO_PASS`` and ``PASS_TO_PASS`` (JSON text or
lists of test ids) and, where present, ``environment_setup_commit``, ``problem_statement`` and
``version``. Nothing is fetched: the repository must be a local clone under ``--repos DIR``
(``DIR/<owner>__<name>``, as SWE-bench names its instances, or ``DIR/<name>``) holding the
commit. Each row becomes a task folder:

- ``starter/``: the tree at ``base_commit`` (``git archive``; regular files only),
- ``solution.patch``: the gold patch (checked to apply, or the row fails),
- ``hidden_tests/<path>``: the files the test patch writes, laid out at their repository paths
  (``[repository] test_layout = "repository"``), and never taken from a candidate,
- ``[test] fail_to_pass`` / ``pass_to_pass``: the row's lists, scored by ``policy = "swebench"``.

The test command runs pytest over the test patch's files. Rows whose test ids are not pytest
node ids (Django's ``test_x (module.Class)``, SymPy's bare names) fail with the loader's reason,
as do rows whose repository or commit is missing: each is reported with its id, the rest import.
Imported tasks declare ``isolation = "in-process"``: a whole project's tests import its
package's internals, which two-process grading has not been proven to carry.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from verify_cli.errors import TaskFormatError
from verify_cli.importers.model import RowError, TaskDraft, task_id
from verify_cli.importers.sources import Row
from verify_cli.importers.writer import PYTHON_IMAGE, dumps_toml
from verify_cli.tasks.file_states import stated_executable
from verify_cli.tasks.loader import validate_document
from verify_cli.tasks.model import TaskKind
from verify_cli.tasks.repository import PatchError, apply_patch, patch_files

COLUMNS: Mapping[str, str] = {
    "id": "instance_id", "repo": "repo", "base_commit": "base_commit", "patch": "patch",
    "test_patch": "test_patch", "fail_to_pass": "FAIL_TO_PASS", "pass_to_pass": "PASS_TO_PASS",
    "environment_setup_commit": "environment_setup_commit", "prompt": "problem_statement",
    "version": "version", "image": "image_name", "install_config": "install_config",
    "requirements": "requirements",
}
#: The project's own test files in an imported repository: always from the task.
TEST_FILE_GLOBS = ("**/tests/**", "**/test/**", "**/testing/**", "**/test_*.py", "**/*_test.py", "**/conftest.py")
WALL_SECONDS = 900.0


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False,
                          env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
                               "GIT_TERMINAL_PROMPT": "0"})


def diff_of_fix(base: Mapping[str, bytes], written: Mapping[str, bytes], removed: Sequence[str],
                executable: set[str]) -> bytes:
    """A fix as ``git diff --binary`` against ``base`` (the starter's files): ``written`` written,
    ``removed`` deleted. What ``solution.patch`` holds where a ``solution/`` folder cannot say a
    deletion."""
    with tempfile.TemporaryDirectory(prefix="verify-fix-") as tmp:
        root = Path(tmp)
        for rel in (*written, *removed):
            if rel in base:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_bytes(base[rel])
                if rel in executable:
                    (root / rel).chmod(0o755)
        _git(root, "init", "-q")
        _git(root, "add", "-A")
        tree = _git(root, "write-tree").stdout.decode().strip()
        for rel, data in written.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        for rel in removed:
            (root / rel).unlink(missing_ok=True)
        _git(root, "add", "-A")
        diff = _git(root, "diff", "--cached", "--binary", "--no-renames", tree)
        if diff.returncode != 0 or not diff.stdout.strip():
            raise RowError("the fix could not be written as a patch: "
                           + diff.stderr.decode("utf-8", "replace").strip()[:300])
        return diff.stdout


def find_clone(repos: Path, repo: str) -> Path:
    """The local clone of ``owner/name`` under ``repos``, or RowError saying where it looked."""
    owner, _, name = repo.strip().partition("/")
    candidates = [repos / f"{owner}__{name}", repos / name] if name else [repos / owner]
    for path in candidates:
        if path.is_dir() and _git(path, "rev-parse", "--git-dir").returncode == 0:
            return path
    looked = ", ".join(str(p) for p in candidates)
    raise RowError(f"repository {repo!r} has no local clone (looked for {looked}); clone it there, "
                   "this import uses no network")


def _tree_files(clone: Path, commit: str, executable: set[str] | None = None) -> dict[str, bytes]:
    """The regular files of ``commit``'s tree (symlinks and submodules are left out); the paths
    of its executable ones (mode ``100755``) are added to ``executable``."""
    if _git(clone, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        raise RowError(f"base_commit {commit!r} is not in {clone} (fetch it into the clone)")
    archived = _git(clone, "archive", "--format=tar", commit)
    if archived.returncode != 0:
        raise RowError(f"git archive {commit} failed: {archived.stderr.decode('utf-8', 'replace').strip()[:200]}")
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
        for member in tar:
            if member.isfile():
                fh = tar.extractfile(member)
                if fh is not None:
                    files[member.name] = fh.read()
                    if executable is not None and member.mode & 0o111:
                        executable.add(member.name)
    return files


def _django_directives(files: list[str]) -> list[str]:
    """Django's runner takes test modules (``tests/admin_views/tests.py`` -> ``admin_views.tests``)."""
    return [shlex.quote(f.removeprefix("tests/").removesuffix(".py").replace("/", ".")) for f in files
            if f.endswith(".py")]


def _path_directives(files: list[str]) -> list[str]:
    return [shlex.quote(f) for f in files if f.endswith(".py")]


#: Projects whose own test runner grades them (kind = "log"), as SWE-bench runs them: the log
#: parser, the command (the install spec's ``test_cmd`` where it names one), and how the test
#: patch's files become the runner's arguments.
LOG_RUNNERS: dict[str, tuple[str, str, Callable[[list[str]], list[str]]]] = {
    "django/django": ("django", "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
                      _django_directives),
    "sympy/sympy": ("sympy", "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose",
                    _path_directives),
}


def install_spec(fields: Mapping[str, Any], repo: str) -> Mapping[str, Any] | None:
    """How the row's repository version is installed, as SWE-bench's specs say it: the row's own
    ``install_config`` (SWE-rebench, SWE-Gym), else the installed swebench package's
    ``MAP_REPO_VERSION_TO_SPECS[repo][version]`` (swebench < 5 ships them), else None."""
    config = fields.get("install_config")
    if isinstance(config, str) and config.strip():
        try:
            config = json.loads(config)
        except ValueError:
            raise RowError("column 'install_config' is not JSON (an object of python, install, "
                           "pip_packages, pre_install)") from None
    if isinstance(config, Mapping):
        return config
    version = fields.get("version")
    if not version:
        return None
    try:
        from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
    except Exception:  # not installed, or a version without the specs (5.x): no spec known
        return None
    spec = MAP_REPO_VERSION_TO_SPECS.get(repo, {}).get(str(version))
    return spec if isinstance(spec, Mapping) else None


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9._,-]*\])?==[A-Za-z0-9.+!_-]+$")


def frozen_pins(text: Any, repo: str) -> list[str]:
    """The ``name==version`` pins of a row's frozen environment (SWE-rebench's ``requirements``
    column: ``pip freeze`` output, space- or line-separated), leaving out what is not a pin
    (``-e git+...``, ``name @ file://...``) and the project itself (a pin of it would install a
    released copy over the checkout under test)."""
    if not isinstance(text, str):
        return []
    own = re.sub(r"[-_.]+", "-", repo.rpartition("/")[2]).lower()
    out = []
    for token in text.split():
        match = _PIN.match(token)
        if match and re.sub(r"[-_.]+", "-", match.group(1)).lower() != own:
            out.append(token)
    return out


def environment_of(spec: Mapping[str, Any] | None, pins: Sequence[str] = ()) -> dict[str, Any]:
    """The task's ``[environment]`` for an install spec: its Python version, its pip packages
    (and conda package names, most of which are pip's too) as requirements, its pre-install and
    install commands as set-up run in the starter (the project's own pytest where it pins one).
    ``pins`` (a row's frozen environment: :func:`frozen_pins`) come first, so the versions the row
    was validated with are the ones installed; the requirement files the spec names
    (``reqs_path``, SWE-rebench's; else ``requirements.txt``) are installed at set-up."""
    env: dict[str, Any] = {"image": PYTHON_IMAGE, "runtime": "python"}
    if not spec and not pins:
        return env
    spec = spec or {}
    requirements = [*pins, *(str(p) for p in spec.get("pip_packages") or [])]
    packages = spec.get("packages")
    setup = [str(c) for c in spec.get("pre_install") or []]
    if packages == "requirements.txt" and not pins:  # the pins are those files' resolution
        files = [str(f) for f in spec.get("reqs_path") or [] if str(f).strip()] or ["requirements.txt"]
        setup.extend(f"python -m pip install -r {shlex.quote(f)}" for f in files)
    elif isinstance(packages, str) and packages.strip() and packages not in ("environment.yml", "requirements.txt"):
        requirements = [*packages.split(), *requirements]
    if spec.get("install"):
        setup.append(str(spec["install"]))
    if spec.get("python"):
        env["python"] = str(spec["python"])
    if requirements:
        env["requirements"] = list(dict.fromkeys(requirements))
    if setup:
        env["setup"] = setup
    return env


def _id_list(fields: Mapping[str, Any], name: str, column: str) -> list[str]:
    value = fields.get(name, [])
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            raise RowError(f"column {column!r} ({name}) is not a JSON list of test ids") from None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RowError(f"column {column!r} ({name}) is not a list of test ids")
    return list(dict.fromkeys(value))


def _text(fields: Mapping[str, Any], name: str, columns: Mapping[str, str]) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value.strip():
        raise RowError(f"column {columns[name]!r} ({name}) is missing or empty; map another with --map {name}=COLUMN")
    return value


def convert_swebench(row: Row, columns: Mapping[str, str], prefix: str, repos: Path) -> TaskDraft:
    """One SWE-bench-format row as a repository task draft (see the module's docstring): the
    repository at ``base_commit`` is the starter, ``patch`` the fix. A row without a
    ``test_patch`` (a synthetic bug: its tests are already in the repository) is graded by the
    listed tests' own files."""
    return _convert(row, columns, prefix, repos, patch_is_bug=False)


def convert_swesmith(row: Row, columns: Mapping[str, str], prefix: str, repos: Path) -> TaskDraft:
    """One SWE-smith row as a repository task draft: ``patch`` is the bug, applied to the clean
    repository (``base_commit`` where the row names one, else the clone's ``HEAD``: SWE-smith's
    mirror of the repository); the starter is the buggy tree and the reference the clean files.
    The tests are the repository's own (SWE-smith rows have no ``test_patch``)."""
    return _convert(row, columns, prefix, repos, patch_is_bug=True)


def _convert(row: Row, columns: Mapping[str, str], prefix: str, repos: Path, *, patch_is_bug: bool) -> TaskDraft:
    from verify_cli.importers.presets import _fields  # the presets' shared row reading

    fields = _fields(row, columns)
    instance = _text(fields, "id", columns)
    repo = _text(fields, "repo", columns)
    clone = find_clone(repos, repo)
    if patch_is_bug and not str(fields.get("base_commit") or "").strip():
        commit = _git(clone, "rev-parse", "HEAD").stdout.decode().strip()
    else:
        commit = _text(fields, "base_commit", columns).strip()
    patch = _text(fields, "patch", columns)
    tests_patch = str(fields.get("test_patch") or "")
    f2p = _id_list(fields, "fail_to_pass", columns["fail_to_pass"])
    p2p = _id_list(fields, "pass_to_pass", columns["pass_to_pass"])
    if not f2p:
        raise RowError(f"column {columns['fail_to_pass']!r} lists no test: nothing would judge the patch")
    touched = patch_files(patch)
    if touched.opaque_binaries:
        raise RowError(f"the patch changes the binary file {touched.opaque_binaries[0]!r} without its contents, "
                       "which nothing can apply; regenerate it with git diff --binary")
    modes: set[str] = set()
    tree = _tree_files(clone, commit, modes)
    try:
        hidden = (apply_patch(tests_patch.encode(), {rel: tree[rel] for rel in patch_files(tests_patch).reads
                                                     if rel in tree}) if tests_patch.strip() else {})
        changed = apply_patch(patch.encode(), {rel: tree[rel] for rel in patch_files(patch).reads if rel in tree})
    except PatchError as e:
        raise RowError(f"a patch does not apply at {commit[:12]}: {e}") from None
    fix_removes: tuple[str, ...] = touched.removes  # what the reference removes from the starter
    fix_patch = b""
    if patch_is_bug:
        # The starter is the clean tree with the bug applied, the fix the clean files: those the bug
        # changed or removed (a mirrored PR's reverted additions) written back, those it added
        # removed (then the fix is a gold patch: a solution/ folder only writes files).
        bug_removes = [rel for rel in touched.removes if rel in tree]
        fix_removes = tuple(sorted(set(changed) - set(tree)))
        solution = {rel: tree[rel] for rel in (*changed, *bug_removes) if rel in tree}
        modes.update(rel for rel in fix_removes if stated_executable(changed[rel]))
        tree = {**{rel: data for rel, data in tree.items() if rel not in bug_removes}, **changed}
        if fix_removes:
            fix_patch = diff_of_fix(tree, solution, fix_removes, modes)
    else:
        solution = changed
    runner = LOG_RUNNERS.get(repo.strip().lower())
    listed = [] if runner else sorted({t.split("::", 1)[0] for t in (*f2p, *p2p)})
    if not hidden and not runner:
        missing = [p for p in listed if p not in tree]
        if missing:
            raise RowError(f"the row has no test_patch and its listed test file {missing[0]!r} is not in the "
                           f"repository at {commit[:12]}; give the test patch with --map test_patch=COLUMN")
    overlap = sorted(set(hidden) & set(solution))
    if overlap:
        raise RowError(f"the gold patch edits {overlap[0]!r}, which the test patch also writes")
    tid = task_id(instance, prefix)
    files: dict[str, str | bytes] = {f"starter/{rel}": data for rel, data in tree.items()}
    files.update({f"hidden_tests/{rel}": data for rel, data in hidden.items()})
    if fix_patch:
        files["solution.patch"] = fix_patch
    elif patch_is_bug:
        files.update({f"solution/{rel}": data for rel, data in solution.items()})
    else:
        files["solution.patch"] = patch if patch.endswith("\n") else patch + "\n"
    # The files the gold patch writes or removes (a deletion, a rename's old side) are editable.
    editable = ["**/*.py", *sorted(rel for rel in {*solution, *fix_removes} if not rel.endswith(".py"))]
    test_paths = " ".join(shlex.quote(p) for p in (sorted(hidden) if hidden else listed) if p.endswith(".py"))
    pytest = 'python -m pytest -p no:cacheprovider -rA --junitxml="$VERIFY_RESULTS_DIR/junit.xml" '
    test: dict[str, Any] = {"command": pytest + (test_paths or "."), "results": "junit.xml"}
    if runner is not None:  # the project's own runner, its log read as SWE-bench reads it
        parser, command, directives = runner
        spec = install_spec(fields, repo) or {}
        test = {"command": " ".join([str(spec.get("test_cmd") or command), *directives(sorted(hidden))]),
                "log_parser": parser, "results": "junit.xml"}
    doc: dict[str, Any] = {
        "schema_version": 1, "id": tid, "title": f"{repo} {instance}", "domain": "coding", "language": "python",
        "tags": ["repository", "swesmith" if patch_is_bug else "swebench", repo.replace("/", "__").lower()],
        "kind": (TaskKind.LOG if runner else TaskKind.PYTEST).value,
        "editable": editable, "isolation": "in-process",
        "environment": environment_of(install_spec(fields, repo), frozen_pins(fields.get("requirements"), repo)),
        "test": {**test, "fail_to_pass": f2p, "pass_to_pass": p2p},
        "scoring": {"policy": "swebench"},
        "limits": {"wall_seconds": WALL_SECONDS, "memory_mb": 4096, "processes": 256},
        "repository": {"test_files": [*TEST_FILE_GLOBS, *sorted(hidden or listed)], "test_layout": "repository"},
    }
    try:
        validate_document(Path(tid) / "task.toml", doc)
    except TaskFormatError as e:
        raise RowError(f"{e.pointer}: {e.detail}") from None
    for key, ids in (("fail_to_pass", f2p), ("pass_to_pass", p2p)):
        for tid_ in ids:
            path = tid_.split("::", 1)[0]
            if runner is None and ("::" not in tid_ or not path.endswith(".py")):
                raise RowError(f"/test/{key}: test id {tid_!r} is not a pytest node id (this importer "
                               f"writes pytest tasks, and log tasks for {', '.join(sorted(LOG_RUNNERS))})")
    prompt = str(fields.get("prompt") or f"Resolve {instance} in {repo}.")
    source: dict[str, Any] = {"data_source": "swesmith" if patch_is_bug else "swebench", "index": row.index,
                              "original_id": instance,
                              "repo": repo, "base_commit": commit}
    for name in ("environment_setup_commit", "version", "image"):
        if fields.get(name):
            source[name] = fields[name]
    return TaskDraft(id=tid, prompt=prompt if prompt.endswith("\n") else prompt + "\n",
                     kind=TaskKind.LOG if runner else TaskKind.PYTEST,
                     files=files, editable=editable, title=doc["title"], tags=doc["tags"], source=source,
                     executable=frozenset(f"starter/{rel}" for rel in modes),
                     task_toml=dumps_toml(_nested_first(doc)))


def _nested_first(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with its tables after its scalars (dumps_toml writes them in that order)."""
    return {k: v for k, v in doc.items() if not isinstance(v, dict)} | {
        k: v for k, v in doc.items() if isinstance(v, dict)}
