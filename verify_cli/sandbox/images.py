"""Build the verify-cli Docker images: from Dockerfiles where a registry answers, else offline.

The images name an interface, not a distribution: ``verify-cli/python:3.11`` has ``python`` (3.11
or newer), ``pytest`` (7 or newer, with ``--junitxml``), ``tar`` and ``sleep``;
``verify-cli/node:20`` has Node.js 20 or newer with the ``junit`` test reporter. Both run as uid
1000 and have the empty mount points ``/workspace``, ``/results`` and ``/opt/verify-harness``.

Offline builds need root, ``debootstrap`` and a Debian package mirror: a minimal Debian root file
system is bootstrapped once per suite and cached as a tarball, then each image installs its
packages into a copy with ``chroot apt-get`` and is imported with ``docker import``.
Run ``python -m verify_cli.sandbox.images --help`` (or ``scripts/build_images.sh``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify_cli.errors import SandboxUnavailableError

Progress = Callable[[str], None]

#: Where bootstrapped root file systems are cached between builds.
DEFAULT_CACHE_DIR = Path(os.environ.get("VERIFY_CLI_CACHE_DIR", "/var/cache/verify-cli"))
#: Debian mirror for offline builds; empty means debootstrap's own default.
DEFAULT_MIRROR = os.environ.get("VERIFY_CLI_DEBIAN_MIRROR", "")
#: Folder of the Dockerfiles (present in a source checkout).
DOCKERFILE_ROOT = Path(__file__).resolve().parents[2] / "docker"

_RUNTIME_DIRS = "/workspace /results /opt/verify-harness"
_COMMON_SETUP = f"""
set -e
getent passwd 1000 >/dev/null || useradd --uid 1000 --user-group --create-home \
    --home-dir /home/sandbox --shell /bin/sh sandbox
mkdir -p {_RUNTIME_DIRS}
chown 1000:1000 /workspace /results
"""
_CLEANUP = """
set -e
apt-get clean
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/debconf/*-old /var/log/* \
    /usr/share/doc/* /usr/share/man/* /usr/share/info/* /tmp/* /var/tmp/*
: > /etc/resolv.conf
"""


@dataclass(frozen=True)
class ImageRecipe:
    """How to make one image: a Dockerfile folder, or a Debian suite plus packages."""

    key: str
    tag: str
    dockerfile_dir: str
    suite: str
    packages: tuple[str, ...]
    setup: str
    #: argv run in the finished image; it must exit 0 or the image is rejected.
    check: tuple[str, ...]
    #: Put this machine's Node.js in ``/usr/local/bin`` (ahead of Debian's on PATH) where it is a
    #: self-contained official build (:func:`host_node`), as the Dockerfile's ``node:20`` has.
    host_node: bool = False

    @property
    def fingerprint(self) -> str:
        text = "\n".join([self.suite, *self.packages, self.setup, _COMMON_SETUP, _CLEANUP,
                          *([host_node_identity()] if self.host_node else [])])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


_PYTHON_CHECK = (
    "set -e\n"
    "python -c 'import sys; assert sys.version_info >= (3, 11), sys.version'\n"
    "python -c 'import pytest; assert int(pytest.__version__.split(\".\")[0]) >= 7'\n"
    "cd /tmp && echo 'def test_ok(): pass' > test_check.py\n"
    "python -m pytest -q -p no:cacheprovider --junitxml=check.xml test_check.py >/dev/null\n"
    "grep -q '<testsuite' check.xml\n"
    "python --version && python -m pytest --version\n"
    "bwrap --version\n"
)
_NODE_CHECK = (
    "set -e\n"
    "node -e 'if (+process.versions.node.split(\".\")[0] < 20) process.exit(1)'\n"
    "cd /tmp && echo 'require(\"node:test\")(\"t\", () => {});' > check.test.js\n"
    "node --test --test-reporter=junit check.test.js | grep -q '<testsuites'\n"
    "node --version\n"
    "bwrap --version\n"
)

RECIPES: dict[str, ImageRecipe] = {
    "python": ImageRecipe(
        key="python",
        tag="verify-cli/python:3.11",
        dockerfile_dir="python",
        suite="bookworm",  # python3 3.11, pytest 7.2
        packages=("python3", "python3-pytest", "bubblewrap"),
        setup="ln -sf python3 /usr/bin/python\n",
        check=("sh", "-c", _PYTHON_CHECK),
    ),
    "node": ImageRecipe(
        key="node",
        tag="verify-cli/node:20",
        dockerfile_dir="node",
        suite="trixie",  # nodejs 20.19 (bookworm's is 18, without the junit reporter)
        packages=("nodejs", "bubblewrap"),
        setup="",
        check=("sh", "-c", _NODE_CHECK),
        # Debian's node is built against a shared libnode without V8's start-up snapshot: each
        # start costs about 3.5 times an official build's (106 ms against 30 ms a `node -e` here),
        # and `node --test` starts two. This machine's official build, where it has one, makes
        # the offline image start as fast as the Dockerfile's node:20 and as bwrap's runs.
        host_node=True,
    ),
}
IMAGE_TAGS = {r.tag: r for r in RECIPES.values()}
#: Node.js majors the node image accepts (its check asks for 20 or newer).
_NODE_MAJOR_MIN = 20


@functools.cache
def host_node() -> tuple[Path, str] | None:
    """(path, version) of this machine's ``node`` when it qualifies for the offline node image:
    20 or newer, self-contained (``ldd`` names no ``libnode``: an official build, not a
    distribution's shared-library one). None otherwise (the image keeps Debian's). Asked once a
    process (the fingerprint and the build both want it)."""
    found = shutil.which("node")
    if found is None:
        return None
    path = Path(found).resolve()
    try:
        version = subprocess.run([str(path), "--version"], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
        libs = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    major = version.lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < _NODE_MAJOR_MIN or "libnode" in libs:
        return None
    return path, version


def host_node_identity() -> str:
    """What the fingerprint records of the image's node (its version, or that Debian's is used):
    a machine whose node changes rebuilds nothing, but the image says it is from another recipe."""
    found = host_node()
    return f"node {found[1]} from the host" if found else "node from Debian"


@dataclass(frozen=True)
class BuildReport:
    """What happened to one image: ``skipped`` (present), ``dockerfile`` or ``offline``."""

    tag: str
    action: str
    seconds: float
    detail: str = ""


def recipe_for(name: str) -> ImageRecipe:
    """The recipe for a key (``python``) or a tag (``verify-cli/python:3.11``)."""
    if name in RECIPES:
        return RECIPES[name]
    if name in IMAGE_TAGS:
        return IMAGE_TAGS[name]
    raise SandboxUnavailableError(
        f"unknown image {name!r}",
        hint=f"choose from: {', '.join([*RECIPES, *IMAGE_TAGS])}")


def registry_reachable(timeout: float = 3.0) -> bool:
    """Whether the daemon's registry (its first mirror, else its index server) accepts a TCP connection."""
    from urllib.parse import urlsplit

    try:
        from docker.client import DockerClient

        info = DockerClient.from_env(timeout=10).info()
        mirrors = info.get("RegistryConfig", {}).get("Mirrors") or []
        parts = urlsplit(mirrors[0] if mirrors else str(info.get("IndexServerAddress") or ""))
        host = parts.hostname
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except Exception:  # the probe is advisory; the build itself reports daemon problems
        return False
    if not host:
        return False
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def build_images(names: Sequence[str] | None = None, *, offline: bool | None = None,
                 force: bool = False, cache_dir: Path = DEFAULT_CACHE_DIR,
                 mirror: str = DEFAULT_MIRROR, progress: Progress | None = None,
                 client: Any = None) -> list[BuildReport]:
    """Make sure the named images (default: all) exist; build the missing ones (all with ``force``).

    ``offline=None`` builds from the Dockerfiles when a registry answers and falls back to the
    offline build when that fails; ``True`` always builds offline, ``False`` never does.
    Images are built concurrently. Raises SandboxUnavailableError when an image cannot be made.
    """
    from docker.client import DockerClient
    from docker.errors import APIError

    say: Progress = progress or (lambda _msg: None)
    recipes = [recipe_for(n) for n in (names or list(RECIPES))]
    try:
        client = client or DockerClient.from_env(timeout=600)
        client.ping()
    except Exception as e:
        raise SandboxUnavailableError(f"the Docker daemon does not answer: {e}",
                                      hint="run scripts/setup_docker.sh") from e

    todo: list[ImageRecipe] = []
    reports: dict[str, BuildReport] = {}
    replaced: list[str] = []
    for recipe in recipes:
        old_id = _image_id(client, recipe.tag)
        if old_id is not None and not force:
            labels = client.images.get(old_id).labels or {}
            stale = labels.get("verify-cli.recipe") not in (None, recipe.fingerprint)
            say(f"{recipe.tag}: present{' but built from an older recipe' if stale else ''}, "
                f"skipped (use --force to rebuild)")
            reports[recipe.tag] = BuildReport(recipe.tag, "skipped", 0.0)
            continue
        todo.append(recipe)
        if old_id is not None:
            replaced.append(old_id)
    if todo:
        use_dockerfile = (not offline) if offline is not None else registry_reachable()
        if offline is None and not use_dockerfile:
            say("no registry reachable: building offline with debootstrap")
        bases = _BaseCache(cache_dir, mirror, say)
        with ThreadPoolExecutor(max_workers=len(todo)) as pool:
            futures = [pool.submit(_build_one, client, r, use_dockerfile, offline is None,
                                   bases, say) for r in todo]
            errors: list[BaseException] = []
            for f in futures:
                try:
                    rep = f.result()
                    reports[rep.tag] = rep
                except BaseException as e:  # report every failure, not only the first
                    errors.append(e)
        if errors:
            raise errors[0]
        for old_id in replaced:  # drop the untagged predecessors; in-use ones stay
            with contextlib.suppress(APIError):
                client.images.remove(old_id)
    return [reports[r.tag] for r in recipes]


def _image_id(client: Any, tag: str) -> str | None:
    from docker.errors import ImageNotFound

    try:
        return str(client.images.get(tag).id)
    except ImageNotFound:
        return None


def _build_one(client: Any, recipe: ImageRecipe, use_dockerfile: bool, may_fall_back: bool,
               bases: _BaseCache, say: Progress) -> BuildReport:
    t0 = time.monotonic()
    if use_dockerfile:
        folder = DOCKERFILE_ROOT / recipe.dockerfile_dir
        try:
            say(f"{recipe.tag}: docker build {folder}")
            client.images.build(path=str(folder), tag=recipe.tag, rm=True, pull=True,
                                labels={"verify-cli.recipe": recipe.fingerprint})
            _check_image(client, recipe)
            secs = time.monotonic() - t0
            say(f"{recipe.tag}: built from {folder} in {secs:.1f} s")
            return BuildReport(recipe.tag, "dockerfile", secs, str(folder))
        except Exception as e:
            if not may_fall_back:
                raise SandboxUnavailableError(f"docker build of {recipe.tag} failed: {e}") from e
            say(f"{recipe.tag}: docker build failed ({e}); building offline")
    _build_offline(client, recipe, bases, say)
    say(f"{recipe.tag}: checking the image")
    _check_image(client, recipe)
    secs = time.monotonic() - t0
    say(f"{recipe.tag}: built offline from Debian {recipe.suite} in {secs:.1f} s")
    return BuildReport(recipe.tag, "offline", secs, f"debian {recipe.suite}")


def _check_image(client: Any, recipe: ImageRecipe) -> None:
    """Run the recipe's check in the image; remove the image and raise if it fails."""
    from docker.errors import ContainerError

    try:
        out = client.containers.run(recipe.tag, list(recipe.check), remove=True,
                                    network_mode="none", user="1000:1000", stderr=True)
    except ContainerError as e:
        client.images.remove(recipe.tag, force=True)
        raise SandboxUnavailableError(
            f"{recipe.tag} was built but fails its check: {e.stderr!r}") from e
    del out


class _BaseCache:
    """Minimal Debian root file systems, bootstrapped once per suite, cached as tarballs."""

    def __init__(self, cache_dir: Path, mirror: str, say: Progress) -> None:
        self.cache_dir = cache_dir
        self.mirror = mirror
        self.say = say
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def tarball(self, suite: str) -> Path:
        """The cached tarball of ``suite``'s minbase root file system; bootstraps it once."""
        with self._guard:
            lock = self._locks.setdefault(suite, threading.Lock())
        with lock:
            path = self.cache_dir / f"debian-{suite}-minbase.tar"
            if path.exists():
                self.say(f"debian {suite}: using cached root file system {path}")
                return path
            _require_offline_tools()
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            t0 = time.monotonic()
            prefix = f"bootstrap-{suite}-"
            with tempfile.TemporaryDirectory(dir=self.cache_dir, prefix=prefix) as tmp:
                root = Path(tmp) / "rootfs"
                self.say(f"debian {suite}: debootstrap --variant=minbase from "
                         f"{self.mirror or 'the default mirror'}")
                _run(["debootstrap", "--variant=minbase", suite, str(root),
                      *([self.mirror] if self.mirror else [])],
                     what=f"debootstrap {suite}")
                partial = path.with_suffix(".tar.partial")
                _run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."],
                     what="tar of the root file system")
                partial.rename(path)
            self.say(f"debian {suite}: bootstrapped and cached in {time.monotonic() - t0:.1f} s")
            return path


def _require_offline_tools() -> None:
    if os.geteuid() != 0:
        raise SandboxUnavailableError(
            "building the images offline needs root (debootstrap and chroot)",
            hint="run scripts/build_images.sh as root, or pull-build from docker/ where a "
                 "registry is reachable")
    if shutil.which("debootstrap") is None:
        raise SandboxUnavailableError("building the images offline needs debootstrap",
                                      hint="apt-get install -y debootstrap")


def _build_offline(client: Any, recipe: ImageRecipe, bases: _BaseCache, say: Progress) -> None:
    _require_offline_tools()
    base = bases.tarball(recipe.suite)
    with tempfile.TemporaryDirectory(dir=bases.cache_dir, prefix=f"image-{recipe.key}-") as tmp:
        root = Path(tmp) / "rootfs"
        root.mkdir()
        _run(["tar", "-C", str(root), "--numeric-owner", "-xf", str(base)], what="unpack base")
        shutil.copyfile("/etc/resolv.conf", root / "etc/resolv.conf")
        say(f"{recipe.tag}: apt-get install {' '.join(recipe.packages)}")
        install = ["chroot", str(root), "apt-get", "install", "-y", "-q", "--no-install-recommends",
                   "-o", "Dpkg::Options::=--force-unsafe-io", *recipe.packages]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
        first = subprocess.run(install, capture_output=True, text=True, env=env)
        if first.returncode != 0:
            # The cached package lists are stale (or absent): refresh them once and retry.
            say(f"{recipe.tag}: refreshing package lists")
            _run(["chroot", str(root), "apt-get", "update", "-q"], what="apt-get update", env=env)
            _run(install, what=f"apt-get install {' '.join(recipe.packages)}", env=env)
        _run(["chroot", str(root), "sh", "-c", _COMMON_SETUP + recipe.setup + _CLEANUP],
             what="image setup", env=env)
        if recipe.host_node:
            _add_host_node(root, recipe, say)
        say(f"{recipe.tag}: docker import")
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-cf", "-", "."],
                               stdout=subprocess.PIPE)
        assert tar.stdout is not None
        try:
            repository, tag = recipe.tag.rsplit(":", 1)
            client.api.import_image_from_stream(
                _chunks(tar.stdout), repository=repository, tag=tag,
                changes=["USER 1000:1000", "WORKDIR /workspace",
                         "ENV PATH=/usr/local/bin:/usr/bin:/bin", "ENV LANG=C.UTF-8",
                         'CMD ["/bin/sh"]', f"LABEL verify-cli.recipe={recipe.fingerprint}"])
        finally:
            tar.stdout.close()
            if tar.wait() != 0:
                raise SandboxUnavailableError(f"tar of the {recipe.tag} root file system failed")


def _add_host_node(root: Path, recipe: ImageRecipe, say: Progress) -> None:
    """This machine's ``node`` into the root file system's ``/usr/local/bin``, kept only if it
    runs there (its libraries are the image's); Debian's stays as it was either way."""
    found = host_node()
    if found is None:
        say(f"{recipe.tag}: node from Debian")
        return
    path, version = found
    target = root / "usr/local/bin" / "node"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target)
    target.chmod(0o755)
    probe = subprocess.run(["chroot", str(root), "/usr/local/bin/node", "--version"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() != version:
        target.unlink()
        say(f"{recipe.tag}: this machine's node {version} does not run in the image; Debian's is kept")
        return
    say(f"{recipe.tag}: node {version} (this machine's official build)")


def _chunks(stream: Any, size: int = 1 << 20) -> Iterator[bytes]:
    while data := stream.read(size):
        yield data


def _run(argv: Sequence[str], *, what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise SandboxUnavailableError(
            f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))


def main(argv: Sequence[str] | None = None) -> int:
    """Command line of ``scripts/build_images.sh``; prints progress to stderr."""
    parser = argparse.ArgumentParser(prog="build_images.sh", description=__doc__.split("\n")[0])
    parser.add_argument("images", nargs="*", help=f"keys or tags (default: {' '.join(RECIPES)})")
    parser.add_argument("--force", action="store_true", help="rebuild images that exist")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--offline", dest="offline", action="store_true", default=None,
                      help="always build with debootstrap, never pull")
    mode.add_argument("--pull", dest="offline", action="store_false",
                      help="always build from the Dockerfiles (needs a registry)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    parser.add_argument("--mirror", default=DEFAULT_MIRROR, help="Debian mirror for offline builds")
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    try:
        reports = build_images(args.images or None, offline=args.offline, force=args.force,
                               cache_dir=args.cache_dir, mirror=args.mirror,
                               progress=lambda m: print(f"[{time.monotonic() - t0:6.1f}s] {m}",
                                                        file=sys.stderr, flush=True))
    except SandboxUnavailableError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    for rep in reports:
        detail = f" {rep.detail}" if rep.detail else ""
        print(f"{rep.tag}: {rep.action} ({rep.seconds:.1f} s){detail}", file=sys.stderr)
    print(f"total {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
