"""Repository tasks: a whole project as the starter, a gold patch as the reference.

A repository task's starter is ``starter/`` (any number of files and packages) or, for large
projects, a git bundle or an archive in the task folder (``[repository] bundle`` with
``base_commit``, or ``archive``). A bundle or archive is unpacked once into a cache folder keyed by
the hash of its bytes (and the commit) and made read-only; every run copies from there.

The reference is ``solution/`` (the edited files) or ``solution.patch``, a unified diff applied
to a copy of the starter files it touches with ``git apply`` (its ``--check`` semantics: all
hunks apply, or nothing does). The patched files are cached the same way, keyed by the patch and
the starter files it touches.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

from verify_cli.errors import TaskFormatError
from verify_cli.tasks.file_states import ModedFile, stated_executable
from verify_cli.tasks.paths import list_files, unsafe_relative_path

#: The gold patch's file name in a task folder (instead of ``solution/``).
SOLUTION_PATCH = "solution.patch"
#: Where unpacked bundles and applied patches are kept (overridable for tests and CI).
CACHE_ENV = "VERIFY_REPO_CACHE"

_lock = threading.Lock()


@dataclass(frozen=True)
class RepositorySpec:
    """The ``[repository]`` table of task.toml."""

    bundle: str = ""
    archive: str = ""
    base_commit: str = ""
    #: Globs of the project's test files: always laid out from the task, never from a candidate.
    test_files: tuple[str, ...] = ()
    #: "task": tests/ and hidden_tests/ sit at those paths in the work folder (the default);
    #: "repository": their files are laid out at their paths inside those folders
    #: (``hidden_tests/pkg/tests/test_x.py`` runs as ``pkg/tests/test_x.py``), for projects
    #: whose tests live beside their modules.
    test_layout: str = "task"

    @property
    def packed(self) -> bool:
        return bool(self.bundle or self.archive)


def cache_root() -> Path:
    """The folder holding unpacked starters and applied gold patches."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "verify-cli" / "repos"


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:32]


def _make_read_only(folder: Path) -> None:
    """Read-only for everyone; an executable file (a project's ``./runtests.py``) stays executable."""
    for dirpath, _dirnames, filenames in os.walk(folder):
        for name in filenames:
            path = os.path.join(dirpath, name)
            os.chmod(path, 0o555 if os.lstat(path).st_mode & 0o100 else 0o444)
        os.chmod(dirpath, 0o555)


def _publish(build: Path, final: Path) -> None:
    """Move a finished build into place (another process may have won the race: keep theirs)."""
    _make_read_only(build)
    try:
        os.rename(build, final)
    except OSError:
        if not final.is_dir():
            raise
        _make_writable(build)
        shutil.rmtree(build, ignore_errors=True)


def _make_writable(folder: Path) -> None:
    for dirpath, _dirnames, _filenames in os.walk(folder):
        os.chmod(dirpath, 0o755)


def _extract_tar(data: bytes, dest: Path, source: str) -> None:
    import io

    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError) as e:
        raise TaskFormatError(source, f"cannot unpack the archive: {e}",
                              hint="give a .tar, .tar.gz or .zip of the project tree") from None


def _extract_zip(path: Path, dest: Path) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if unsafe_relative_path(info.filename.rstrip("/")) and not info.is_dir():
                    raise TaskFormatError(str(path), f"archive member {info.filename!r} would escape the folder")
            zf.extractall(dest)
    except zipfile.BadZipFile as e:
        raise TaskFormatError(str(path), f"cannot unpack the archive: {e}") from None


def _git(args: list[str], cwd: Path | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    if cwd is not None:
        # git apply inside some repository's folder would take paths from that repository's top.
        env["GIT_CEILING_DIRECTORIES"] = str(Path(cwd).resolve().parent)
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, env=env, check=False)


def unpacked_starter(task_root: Path, spec: RepositorySpec) -> Path:
    """The folder holding the starter tree of a bundle or archive (unpacked once, read-only)."""
    task_file = str(task_root / "task.toml")
    name = spec.bundle or spec.archive
    source = task_root / name
    if not source.is_file():
        field = "bundle" if spec.bundle else "archive"
        raise TaskFormatError(task_file, f"{name!r} is not a file of the task folder",
                              pointer=f"/repository/{field}")
    data = source.read_bytes()
    key = _digest(data, spec.base_commit.encode(), b"bundle" if spec.bundle else b"archive")
    final = cache_root() / "starters" / key
    if final.is_dir():
        return final
    with _lock:
        if final.is_dir():
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
        try:
            if spec.bundle:
                _unbundle(source, spec.base_commit, build, task_file)
            elif source.name.endswith(".zip"):
                _extract_zip(source, build)
            else:
                _extract_tar(data, build, str(source))
            _publish(build, final)
        except BaseException:
            _make_writable(build)
            shutil.rmtree(build, ignore_errors=True)
            raise
    return final


def _unbundle(bundle: Path, commit: str, dest: Path, task_file: str) -> None:
    with tempfile.TemporaryDirectory(prefix="verify-bundle-") as tmp:
        git_dir = Path(tmp) / "repo.git"
        cloned = _git(["clone", "--bare", "--quiet", str(bundle.resolve()), str(git_dir)])
        if cloned.returncode != 0:
            raise TaskFormatError(str(bundle), "not a git bundle git can clone: "
                                  + cloned.stderr.decode("utf-8", "replace").strip()[:300])
        archived = _git(["--git-dir", str(git_dir), "archive", "--format=tar", f"{commit}^{{tree}}"])
        if archived.returncode != 0:
            raise TaskFormatError(task_file, f"base_commit {commit!r} is not in the bundle {bundle.name}",
                                  pointer="/repository/base_commit",
                                  hint="bundle the branch holding the commit: git bundle create repo.bundle --all")
        _extract_tar(archived.stdout, dest, str(bundle))


# --------------------------------------------------------------------------------------------
# The gold patch

_DIFF_GIT = re.compile(r"^diff --git a/(\S+) b/(\S+)$")
_PLUS = re.compile(r"^\+\+\+ (?:b/)?(\S+)")
_MINUS = re.compile(r"^--- (?:a/)?(\S+)")


@dataclass(frozen=True)
class PatchFiles:
    """The paths a unified diff touches: those it reads (old side) and writes (new side)."""

    reads: tuple[str, ...]
    writes: tuple[str, ...]
    deletes: tuple[str, ...]
    #: (old, new) of each file git's headers rename (``rename from`` / ``rename to``).
    renames: tuple[tuple[str, str], ...] = ()
    #: Binary files changed without their contents (``Binary files a/x and b/x differ``: git
    #: diff without ``--binary``): nothing can apply them.
    opaque_binaries: tuple[str, ...] = ()
    #: Binary files changed with their contents (``GIT binary patch``), which git apply applies.
    binaries: tuple[str, ...] = ()

    @property
    def removes(self) -> tuple[str, ...]:
        """The files the diff leaves absent: those it deletes and the old side of each rename
        (unless the diff writes that path again)."""
        written = set(self.writes)
        return tuple(dict.fromkeys(rel for rel in (*self.deletes, *(old for old, _new in self.renames))
                                   if rel not in written))


@dataclass
class _GitBlock:
    """One ``diff --git`` file's extended headers (git's rename, copy, binary and mode lines)."""

    a: str
    b: str
    rename_from: str = ""
    rename_to: str = ""
    copy_from: str = ""
    copy_to: str = ""
    deleted: bool = False
    new: bool = False
    binary: bool = False
    opaque: bool = False
    had_hunks: bool = False


def patch_files(patch: str) -> PatchFiles:
    """The files a unified diff (``git diff`` or ``diff -u`` output) reads, writes and deletes,
    with git's extended headers read too: renames and copies (which may carry no hunk at all),
    deletions of empty files, binary files with (``GIT binary patch``) or without their contents."""
    reads: list[str] = []
    writes: list[str] = []
    deletes: list[str] = []
    renames: list[tuple[str, str]] = []
    opaque: list[str] = []
    binaries: list[str] = []
    old: str | None = None
    block: _GitBlock | None = None

    def flush(b: _GitBlock | None) -> None:
        if b is None:
            return
        source, target = b.rename_from or b.copy_from, b.rename_to or b.copy_to
        if source and target:
            reads.append(source)
            writes.append(target)
            if b.rename_from:
                renames.append((source, target))
        if b.opaque:
            opaque.append(b.b if not b.deleted else b.a)
        if b.binary:
            binaries.append(b.b if not b.deleted else b.a)
        if (b.binary or b.opaque or not b.had_hunks) and not (source and target):
            if b.deleted:
                deletes.append(b.a)
                reads.append(b.a)
            else:  # a binary file, a new empty file, or a mode change alone
                if not b.new:
                    reads.append(b.a)
                writes.append(b.b)

    for line in patch.splitlines():
        if m := _DIFF_GIT.match(line):
            flush(block)
            block, old = _GitBlock(m.group(1), m.group(2)), None
            continue
        if block is not None and not block.had_hunks:
            for prefix, name in (("rename from ", "rename_from"), ("rename to ", "rename_to"),
                                 ("copy from ", "copy_from"), ("copy to ", "copy_to")):
                if line.startswith(prefix):
                    setattr(block, name, line[len(prefix):].strip())
            if line.startswith("deleted file mode"):
                block.deleted = True
            elif line.startswith("new file mode"):
                block.new = True
            elif line == "GIT binary patch":
                block.binary = True
            elif line.startswith("Binary files ") and line.endswith(" differ"):
                block.opaque = True
        if (m := _MINUS.match(line)) and not line.startswith("--- /dev/null"):
            old = m.group(1)
        elif line.startswith("--- /dev/null"):
            old = None
        elif line.startswith("+++ "):
            if block is not None:
                block.had_hunks = True
            if line.startswith("+++ /dev/null"):
                if old is not None:
                    deletes.append(old)
                    reads.append(old)
            elif m := _PLUS.match(line):
                writes.append(m.group(1))
                if old is not None:
                    reads.append(old)
            old = None
    flush(block)

    def unique(items: list[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(items))

    return PatchFiles(unique(reads), unique(writes), unique(deletes), tuple(dict.fromkeys(renames)),
                      unique(opaque), unique(binaries))


class PatchError(ValueError):
    """A unified diff that does not apply; the message names the file and the hunk."""


#: How a diff is applied, strict first, then (``lenient``: a candidate's, as SWE-bench's harness
#: applies a model's patch) the permissive ones, in SWE-bench's order.
STRICT_APPLY = "git apply"
LENIENT_APPLY = ("git apply --reject", "patch --fuzz=5")


def apply_patch(patch: bytes, files: dict[str, bytes]) -> dict[str, bytes]:
    """The files ``patch`` writes, after applying it to ``files`` (path -> bytes; the starter
    files it reads, a :class:`~verify_cli.tasks.file_states.ModedFile` for an executable one).
    Each written file is a ModedFile with the executable bit the patch left it (a rename keeps
    its file's mode, ``new mode 100755`` sets it); the files the patch removes are not in the
    result (:attr:`PatchFiles.removes`). All hunks apply or PatchError names the first that does not."""
    return apply_patch_by(patch, files)[0]


def apply_patch_by(patch: bytes, files: dict[str, bytes], *, lenient: bool = False) -> tuple[dict[str, bytes], str]:
    """:func:`apply_patch`, and how it applied: ``git apply``, or with ``lenient`` the first of
    :data:`LENIENT_APPLY` that applies every hunk (``patch`` with fuzz where the context moved).
    Where none does, PatchError names the first hunk strict ``git apply`` refused."""
    touched = patch_files(patch.decode("utf-8", "replace"))
    for rel in (*touched.reads, *touched.writes):
        if why := unsafe_relative_path(rel):
            raise PatchError(f"the patch names {rel!r}, which {why}")
    strict_error = ""
    for method in (STRICT_APPLY, *(LENIENT_APPLY if lenient else ())):
        with tempfile.TemporaryDirectory(prefix="verify-patch-") as tmp:
            root = Path(tmp)
            for rel in touched.reads:
                if rel in files:
                    dest = root / rel
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(files[rel])
                    if stated_executable(files[rel]):
                        dest.chmod(0o755)
            (root / ".patch").write_bytes(patch)
            failed = _apply(method, root, patch)
            if failed is None:
                return ({rel: ModedFile((root / rel).read_bytes(), bool((root / rel).stat().st_mode & 0o100))
                         for rel in touched.writes if (root / rel).is_file()}, method)
            strict_error = strict_error or failed
    raise PatchError(strict_error)


def _apply(method: str, root: Path, patch: bytes) -> str | None:
    """Apply ``root/.patch`` in ``root`` by ``method``: None, or why it did not apply."""
    if method == STRICT_APPLY:
        # --check first: git apply would otherwise apply nothing yet say little about why.
        checked = _git(["apply", "--check", "--verbose", "--whitespace=nowarn", ".patch"], cwd=root)
        if checked.returncode != 0:
            return _patch_failure(checked.stderr.decode("utf-8", "replace"))
        applied = _git(["apply", "--whitespace=nowarn", ".patch"], cwd=root)
        return None if applied.returncode == 0 else _patch_failure(applied.stderr.decode("utf-8", "replace"))
    if method == "git apply --reject":
        applied = _git(["apply", "--reject", "--whitespace=fix", ".patch"], cwd=root)
        return None if applied.returncode == 0 else "hunks rejected"
    if shutil.which("patch") is None:
        return "patch is not installed"
    strip = "-p1" if re.search(rb"^(---|\+\+\+) [ab]/", patch, re.M) else "-p0"
    done = subprocess.run(["patch", "--batch", "--fuzz=5", "--forward", "--no-backup-if-mismatch", strip,
                           "-i", ".patch"], cwd=root, capture_output=True, timeout=120, check=False)
    return None if done.returncode == 0 else "patch refused a hunk"


def _patch_failure(stderr: str) -> str:
    """git apply's own words for the first hunk or file that failed."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    hunk = next((ln for ln in lines if ln.startswith("error: patch failed:")), None)
    other = next((ln for ln in lines if ln.startswith("error:") and ln != hunk), None)
    parts = [p.removeprefix("error: ") for p in (hunk, other) if p]
    detail = next((ln for ln in lines if ln.startswith("Checking patch")), "")
    return "; ".join(parts) or detail or stderr.strip()[:300] or "git apply refused the patch"


def starter_inputs(starter: dict[str, Path], paths: tuple[str, ...]) -> dict[str, bytes]:
    """The starter files of ``paths`` by value, each with its executable bit (what a diff reads)."""
    out: dict[str, bytes] = {}
    for rel in paths:
        if rel in starter:
            out[rel] = ModedFile(starter[rel].read_bytes(), bool(starter[rel].stat().st_mode & 0o100))
    return out


def solution_patch_removals(task_root: Path) -> tuple[str, ...]:
    """The starter files ``solution.patch`` removes (its deletions and the old side of its renames)."""
    patch = (task_root / SOLUTION_PATCH).read_bytes()
    return patch_files(patch.decode("utf-8", "replace")).removes


def applied_solution(task_root: Path, starter: dict[str, Path]) -> Path:
    """The folder of the files ``solution.patch`` writes, applied to ``starter`` (cached), each with
    the mode the patch leaves it; the files it removes are :func:`solution_patch_removals`."""
    patch_path = task_root / SOLUTION_PATCH
    patch = patch_path.read_bytes()
    touched = patch_files(patch.decode("utf-8", "replace"))
    if touched.opaque_binaries:
        raise TaskFormatError(str(patch_path), f"the gold patch changes the binary file {touched.opaque_binaries[0]!r} "
                              "without its contents", hint="write the diff with git diff --binary")
    inputs = starter_inputs(starter, touched.reads)
    key = _digest(patch, *(rel.encode() + b"\0" + (b"x" if stated_executable(data) else b"-") + data
                           for rel, data in sorted(inputs.items())))
    final = cache_root() / "solutions" / key
    if final.is_dir():
        return final
    try:
        out = apply_patch(patch, inputs)
    except PatchError as e:
        raise TaskFormatError(str(patch_path), f"the gold patch does not apply to the starter: {e}",
                              hint="regenerate it with 'git diff' against the starter's base tree") from None
    with _lock:
        if final.is_dir():
            return final
        final.parent.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
        for rel, data in out.items():
            dest = build / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            if stated_executable(data):
                dest.chmod(0o755)
        _publish(build, final)
    return final


def read_test_ids(path: Path) -> tuple[str, ...]:
    """Test ids from a list file: one per line; blank lines and ``#`` comments skipped."""
    ids = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            ids.append(line)
    return tuple(ids)


def repository_files(folder: Path) -> dict[str, Path]:
    """The files of an unpacked starter (``list_files`` without git's own folder)."""
    return {rel: p for rel, p in list_files(folder).items() if not rel.startswith(".git/")}
