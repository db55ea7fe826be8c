"""The languages ``/run_code`` runs, as SandboxFusion runs them (``sandbox/runners/major.py``),
and where their toolchains come from.

Interpreted languages (python, pytest, nodejs, bash) run in verify-cli's own images (docker) or
the host's runtime (bwrap, process). Compiled ones (cpp, go, java, rust, typescript) are compiled
then run in one sandbox run, and need a toolchain:

- on docker, one image of Debian packages over ``verify-cli/python:3.11`` holding the toolchains
  of the languages the service is started with (``serve --run-code-languages cpp,go``), built
  once through :mod:`verify_cli.environments` (content-addressed, cached in its store);
- on bwrap and process, the host's toolchain (``g++``, ``go``, ... on the sandbox's PATH).

A language whose toolchain is missing is answered with SandboxFusion's ``SandboxError`` saying
what to do (never a wrong answer).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from verify_cli.errors import UsageError
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.environment import DEFAULT_PATH

#: The image interpreted languages run in, and the base of the toolchain image.
PYTHON_IMAGE = "verify-cli/python:3.11"
NODE_IMAGE = "verify-cli/node:20"

#: Where Debian's libjavatuples-java puts its jar (on java's class path, as SandboxFusion's).
JAVATUPLES_JAR = "/usr/share/java/javatuples.jar"

#: Go's build cache and module folder must be writable: the run's own temporary folder.
_GO_ENV = 'GOCACHE="${TMPDIR:-/tmp}/go-build" GOPATH="${TMPDIR:-/tmp}/go" HOME="${TMPDIR:-/tmp}" GO111MODULE=auto'


@dataclass(frozen=True)
class Language:
    """How SandboxFusion runs one language: the code's file, the compile step (None: none),
    the run step, and what its toolchain is."""

    name: str
    file: str
    run: str
    runtime: str
    #: The image an interpreted language runs in; None: the service's toolchain image.
    image: str | None
    compile: str | None = None
    #: Debian packages of the toolchain (the toolchain image's), and the programs a local
    #: backend needs on the sandbox's PATH.
    packages: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    #: The local backends whose sandbox shows the host toolchain whole (bwrap shows only part
    #: of /etc: the JDK cannot read its java.security there).
    local_backends: tuple[str, ...] = ("bwrap", "process")

    @property
    def needs_toolchain(self) -> bool:
        return self.image is None


LANGUAGES: dict[str, Language] = {lang.name: lang for lang in (
    Language("python", "verify_run_code.py", "python verify_run_code.py", "python", PYTHON_IMAGE),
    Language("pytest", "verify_run_code.py", "python -m pytest -q -p no:cacheprovider verify_run_code.py",
             "python", PYTHON_IMAGE),
    Language("nodejs", "verify_run_code.js", "node verify_run_code.js", "node", NODE_IMAGE),
    Language("bash", "verify_run_code.sh", "/bin/bash verify_run_code.sh", "shell", PYTHON_IMAGE),
    Language("cpp", "verify_run_code.cpp", "./test", "shell", None,
             compile="g++ -std=c++17 verify_run_code.cpp -o test -lpthread", packages=("g++",), tools=("g++",)),
    Language("go", "verify_run_code.go", "./out", "shell", None,
             compile=f"{_GO_ENV} go build -o out verify_run_code.go", packages=("golang-go",), tools=("go",)),
    # SandboxFusion's class path: the work folder, javatuples, and the request's own .jar files
    Language("java", "Main.java", "java -cp {classpath} -ea Main", "shell", None,
             compile="javac -cp {classpath} Main.java", packages=("default-jdk-headless", "libjavatuples-java"),
             tools=("javac", "java"), local_backends=("process",)),
    Language("rust", "verify_run_code.rs", "./test", "shell", None,
             compile="rustc verify_run_code.rs -o test", packages=("rustc",), tools=("rustc",)),
    # SandboxFusion runs TypeScript with tsx: types are stripped, never checked. tsc emits
    # JavaScript despite type errors, so its step always succeeds (its diagnostics stay in
    # compile_result) and node runs what it wrote, with the whole run_timeout.
    Language("typescript", "verify_run_code.ts", "node verify_run_code.js", "shell", None,
             compile="tsc --target es2020 --module commonjs --esModuleInterop --skipLibCheck verify_run_code.ts; true",
             packages=("nodejs", "node-typescript", "node-lodash"), tools=("tsc", "node")),
)}

#: The languages whose toolchain an image can hold (``serve --run-code-languages``).
TOOLCHAIN_LANGUAGES = tuple(name for name, lang in LANGUAGES.items() if lang.needs_toolchain)


def parse_languages(text: str | Sequence[str]) -> tuple[str, ...]:
    """``cpp,go`` as a checked tuple; UsageError naming the unknown ones."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    unknown = [n for n in names if n not in TOOLCHAIN_LANGUAGES]
    if unknown:
        raise UsageError(f"--run-code-languages: {', '.join(unknown)} cannot be given a toolchain",
                         hint=f"choose from {', '.join(TOOLCHAIN_LANGUAGES)}")
    return tuple(dict.fromkeys(names))


def toolchain_packages(languages: Sequence[str]) -> tuple[str, ...]:
    """The Debian packages of ``languages``' toolchains."""
    return tuple(sorted({p for name in languages for p in LANGUAGES[name].packages}))


class Toolchains:
    """Where each /run_code language's toolchain is for one service's sandbox: the toolchain
    image (docker: built by :meth:`prepare`) or the host's programs (local backends)."""

    def __init__(self, sandbox: Sandbox, languages: Sequence[str] = ()) -> None:
        self.in_image = sandbox.runs_in_image
        self.backend = sandbox.name
        self.languages = tuple(languages)
        self.image: str | None = None
        self.identity: str | None = None
        self._available: list[str] | None = None

    def prepare(self, say: Callable[[str], None] | None = None) -> None:
        """Build (or find in the environment store) the image of the requested toolchains;
        EnvironmentBuildError when it does not build. Nothing to do on a local backend."""
        if not (self.in_image and self.languages):
            return
        from verify_cli.environments import Environments
        from verify_cli.environments.spec import packages_spec
        from verify_cli.sandbox.registry import sandbox_class

        envs = Environments(sandbox_class("docker"))
        try:
            realised = envs.realise_spec(packages_spec(PYTHON_IMAGE, "python", toolchain_packages(self.languages)),
                                         say=say)
        finally:
            envs.close()
        self.image, self.identity = realised.image, realised.identity
        self._available = None

    def unavailable(self, language: str) -> str | None:
        """Why ``language`` cannot run here (what to do), or None when it can."""
        lang = LANGUAGES[language]
        if not lang.needs_toolchain:
            return None
        if self.in_image:
            if language in self.languages and self.image is not None:
                return None
            return (f"language {language!r} needs its toolchain, which this service has not built: serve "
                    f"with --run-code-languages {language} (an image of the Debian packages "
                    f"{', '.join(lang.packages)}, built once)")
        if self.backend not in lang.local_backends:
            return (f"language {language!r} does not run on --sandbox {self.backend}: serve with --sandbox docker "
                    f"--run-code-languages {language}")
        missing = [t for t in lang.tools if shutil.which(t, path=DEFAULT_PATH) is None]
        if not missing:
            return None
        return (f"language {language!r} needs {', '.join(missing)}, not installed on this machine for "
                f"--sandbox {self.backend}: install it ({', '.join(lang.packages)}), or serve with "
                f"--sandbox docker --run-code-languages {language}")

    def available(self) -> list[str]:
        """The languages that can run here (looked up once)."""
        if self._available is None:
            self._available = [name for name in LANGUAGES if self.unavailable(name) is None]
        return list(self._available)

    def image_for(self, language: str) -> str | None:
        lang = LANGUAGES[language]
        return lang.image if lang.image is not None else self.image


__all__ = ["LANGUAGES", "TOOLCHAIN_LANGUAGES", "Language", "Toolchains", "parse_languages", "toolchain_packages"]
