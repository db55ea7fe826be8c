"""The hostile-program conformance suite: what every backend must contain, and the checks.

:data:`CASES` is the one table of hostile programs (in :mod:`verify_cli.sandbox.kit.hostile`), their
limits, the verdicts a contained run may end with, the host-side check that looks for evidence of
an escape, and the backends where an escape is a documented limitation. The test suite and
``verify-cli sandbox doctor`` both run it through :func:`run_case` / :func:`run_conformance`.

Every run is judged from the host: the verdict, the time it took, no surviving process carrying
the run's token (in argv or environment), no leftover container, the case's own check, and a
trivial run on the same sandbox afterwards. A check that fails to run counts as not contained.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Sandbox, Verdict
from verify_cli.sandbox.plumbing.cgroup import cgroup_manager

HOSTILE_PACKAGE = "verify_cli.sandbox.kit.hostile"
TOKEN_ENV = "VERIFY_CONFORMANCE_TOKEN"
#: How long past its wall-clock limit a run may take to end, start and cleanup included.
GRACE_SECONDS = 5.0
#: Small limits keep the suite fast; a backend must honour them, not its defaults.
SMALL_LIMITS = Limits(wall_seconds=5.0, memory_mb=256, processes=64, output_bytes=1024 * 1024,
                      file_bytes=16 * 1024 * 1024)
#: For the programs that only end at the wall limit (each of their runs waits it out).
SHORT_LIMITS = Limits(wall_seconds=2.0, memory_mb=256, processes=64, output_bytes=1024 * 1024,
                      file_bytes=16 * 1024 * 1024)
_V = Verdict


@dataclass(frozen=True)
class ConformanceCase:
    """One hostile program and what a backend that contains it must show."""

    name: str
    summary: str
    expected_verdicts: frozenset[Verdict]
    #: Name of the host-side check in :data:`HOST_CHECKS`.
    host_check: str
    limits: Limits = SMALL_LIMITS
    #: Backends documented not to contain this program: the suite asserts the escape is real.
    expected_uncontained_on: frozenset[str] = frozenset()
    #: Backends that contain it only with a writable cgroup (they fall back to rlimits otherwise).
    uncontained_without_cgroups_on: frozenset[str] = frozenset()
    #: Why the backends above do not contain it.
    limitation: str = ""
    #: Part of the quick subset (``fast=True``): does not wait out a wall-clock limit or fill disks.
    fast: bool = True

    @property
    def program(self) -> str:
        """File name of the hostile program (run as ``python <program> <token>``)."""
        return f"{self.name}.py"

    @property
    def source(self) -> str:
        return resources.files(HOSTILE_PACKAGE).joinpath(self.program).read_text(encoding="utf-8")

    def expects_containment(self, backend: str) -> bool:
        if backend in self.expected_uncontained_on:
            return False
        needs_cgroup = backend in self.uncontained_without_cgroups_on
        return not (needs_cgroup and not cgroup_manager().available)


CASES: tuple[ConformanceCase, ...] = (
    ConformanceCase(
        "fork_bomb", "forks without end; the process limit holds and nothing survives",
        frozenset({_V.MEMORY_LIMIT, _V.SIGNAL, _V.NONZERO_EXIT, _V.TIMEOUT}), "no_survivors",
        limits=SHORT_LIMITS, fast=False),
    ConformanceCase(
        "memory_bomb", "allocates ten times the memory limit",
        frozenset({_V.MEMORY_LIMIT}), "no_survivors"),
    ConformanceCase(
        "disk_fill", "fills the work, temp and results folders until ENOSPC/EFBIG",
        frozenset({_V.NONZERO_EXIT, _V.OUTPUT_LIMIT}), "host_disk_free",
        expected_uncontained_on=frozenset({"process"}),
        limitation="process: no disk quota; the command writes to the host's file system",
        fast=False),
    ConformanceCase(
        "stdout_flood", "writes 1 GB to stdout",
        frozenset({_V.OUTPUT_LIMIT}), "bounded_capture"),
    ConformanceCase(
        "sleep_forever", "sleeps until killed",
        frozenset({_V.TIMEOUT}), "no_survivors", limits=SHORT_LIMITS, fast=False),
    ConformanceCase(
        "daemon", "double-forks a setsid() grandchild with its fds closed, then exits 0",
        frozenset({_V.OK}), "no_survivors",
        uncontained_without_cgroups_on=frozenset({"process"}),
        limitation="process without a writable cgroup: a setsid() grandchild leaves the "
                   "process group, so nothing finds it"),
    ConformanceCase(
        "network_egress", "connects to TEST-NET 192.0.2.1 and to a loopback server on the host",
        frozenset({_V.OK}), "no_network",
        expected_uncontained_on=frozenset({"process"}),
        limitation="process: no network isolation"),
    ConformanceCase(
        "write_outside", "creates files in /etc, /usr, /tmp and the host's checkout",
        frozenset({_V.OK}), "host_files_unchanged",
        expected_uncontained_on=frozenset({"process"}),
        limitation="process: no file system isolation; it writes wherever the user may"),
    ConformanceCase(
        "read_host_files", "reads a secret in the host user's home and the project checkout",
        frozenset({_V.OK}), "secret_files",
        expected_uncontained_on=frozenset({"process"}),
        limitation="process: no file system isolation; it reads whatever the user may"),
    ConformanceCase(
        "read_host_env", "looks for secrets in its environment and every /proc/<pid>/environ",
        frozenset({_V.OK}), "env_secret",
        expected_uncontained_on=frozenset({"process"}),
        limitation="process: no pid namespace; the environment of the user's other processes "
                   "is readable in /proc"),
    ConformanceCase(
        "kill_harness", "sends SIGTERM/SIGKILL to the harness's pid",
        frozenset({_V.OK}), "harness_alive",
        expected_uncontained_on=frozenset({"process"}),
        limitation="process: runs as the same user, with no pid namespace; it can signal the "
                   "user's processes, verify-cli included"),
    ConformanceCase(
        "zombie_farm", "leaves unreaped zombies and running orphans behind, then exits",
        frozenset({_V.OK, _V.TIMEOUT}), "no_survivors"),
    ConformanceCase(
        "closed_stdio", "closes stdin, stdout and stderr and keeps running",
        frozenset({_V.TIMEOUT}), "no_survivors", limits=SHORT_LIMITS, fast=False),
)


def case_named(name: str) -> ConformanceCase:
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(name)


@dataclass(frozen=True)
class ConformanceResult:
    """How one backend fared against one hostile program."""

    case: str
    backend: str
    #: True when every check found the program contained.
    contained: bool
    #: What the table says: False for a documented limitation of this backend.
    expected_contained: bool
    verdict: Verdict | None
    elapsed_seconds: float
    #: Each piece of evidence that the program was not contained (empty when contained).
    findings: tuple[str, ...] = ()
    #: A check that could not run; the case then counts as not contained.
    error: str = ""
    limitation: str = ""
    run: RunResult | None = field(default=None, repr=False, compare=False)

    @property
    def conforms(self) -> bool:
        """The backend behaved as documented: contained it, or showed its documented limitation."""
        return not self.error and self.contained == self.expected_contained

    def describe(self) -> str:
        state = "contained" if self.contained else "NOT contained"
        want = "expected" if self.expected_contained else f"known limitation: {self.limitation}"
        lines = [f"{self.backend}/{self.case}: {state} ({want}); verdict "
                 f"{self.verdict.value if self.verdict else '-'} in {self.elapsed_seconds:.1f}s"]
        lines += [f"  - {f}" for f in self.findings]
        if self.error:
            lines.append(f"  - check error: {self.error}")
        if self.run is not None and not self.conforms:
            lines.append(f"  - message: {self.run.message!r}")
            lines.append(f"  - stdout: {self.run.stdout.text[:400]!r}")
            lines.append(f"  - stderr: {self.run.stderr.text[-400:]!r}")
        return "\n".join(lines)


# --- host-side checks -----------------------------------------------------------------------


@dataclass
class _Context:
    case: ConformanceCase
    backend: str
    token: str
    workdir: Path


class HostCheck:
    """Host-side evidence for one run: set up before it, judged after it, cleaned up always."""

    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx

    def env(self) -> dict[str, str]:
        """Variables the hostile program is given (where to look, what to attack)."""
        return {}

    def findings(self, result: RunResult, elapsed: float) -> list[str]:
        return []

    def close(self) -> None:
        """Undo what the check set up on the host; must not raise."""


class _NoSurvivors(HostCheck):
    """Nothing beyond the common checks (surviving processes, timing, verdict)."""


class _HostDiskFree(HostCheck):
    """Samples the host's free space during the run: it may not drop by more than the limit.

    One such measurement at a time on a host (a lock file), so that two disk-filling runs (say,
    two test workers) do not see each other's writes.
    """

    def __init__(self, ctx: _Context) -> None:
        super().__init__(ctx)
        lock_path = Path(tempfile.gettempdir()) / "verify-cli-conformance-disk.lock"
        folders = {tempfile.gettempdir(), str(ctx.workdir), "/var/lib/docker"}
        self._folders = [f for f in folders if os.path.isdir(f)]
        self._worst = 0
        self._lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            self._start = {f: shutil.disk_usage(f).free for f in self._folders}
        except BaseException:
            os.close(self._lock_fd)
            raise
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="conformance-disk")
        self._thread.start()

    def _sample(self) -> None:
        while True:
            for f in self._folders:
                with contextlib.suppress(OSError):
                    self._worst = max(self._worst, self._start[f] - shutil.disk_usage(f).free)
            if self._stop.wait(0.02):
                return

    def env(self) -> dict[str, str]:
        return {"VERIFY_CONFORMANCE_FILE_BYTES": str(self.ctx.case.limits.file_bytes)}

    def findings(self, result: RunResult, elapsed: float) -> list[str]:
        self._stop.set()
        self._thread.join()
        allowed = 2 * self.ctx.case.limits.file_bytes + 32 * 1024 * 1024
        if self._worst > allowed:
            return [f"host free space dropped by {self._worst >> 20} MiB during the run "
                    f"(allowed {allowed >> 20} MiB)"]
        return []

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # releases the lock
            self._lock_fd = -1


class _BoundedCapture(HostCheck):
    """The flood was cut off, a head and a tail kept, and the harness's memory stayed bounded."""

    def __init__(self, ctx: _Context) -> None:
        super().__init__(ctx)
        self._rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def findings(self, result: RunResult, elapsed: float) -> list[str]:
        out: list[str] = []
        limit = self.ctx.case.limits.output_bytes
        cap = result.stdout
        if not cap.truncated or cap.total_bytes <= limit:
            out.append(f"stdout not cut off at the limit (total {cap.total_bytes} bytes)")
        if not cap.head.startswith(b"flood ") or not cap.tail:
            out.append("stdout's head and tail were not both kept")
        if len(cap.head) + len(cap.tail) > limit:
            kept = len(cap.head) + len(cap.tail)
            out.append(f"kept {kept} bytes of stdout, over the limit {limit}")
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - self._rss_kib) * 1024
        if grown > 64 * 1024 * 1024 + 8 * limit:
            out.append(f"the harness's peak memory grew by {grown >> 20} MiB")
        return out


_UNREACHABLE = {"ENETUNREACH", "EHOSTUNREACH", "EACCES", "EPERM", "EADDRNOTAVAIL", "EAFNOSUPPORT"}


class _NoNetwork(HostCheck):
    """A loopback server on the host sees no connection; TEST-NET is unreachable, not slow."""

    def __init__(self, ctx: _Context) -> None:
        super().__init__(ctx)
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.05)
        self.port = self._server.getsockname()[1]
        self.accepted: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="conformance-net")
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(0.5)
                try:
                    self.accepted.append(conn.recv(256))
                except OSError:
                    self.accepted.append(b"")

    def env(self) -> dict[str, str]:
        return {"VERIFY_CONFORMANCE_LOOPBACK_PORT": str(self.port)}

    def findings(self, result: RunResult, elapsed: float) -> list[str]:
        time.sleep(0.1)  # let the server thread record a connection made just before exit
        self.close()
        out = [f"connected to the host's loopback server ({len(self.accepted)} connection(s))"
               for _ in self.accepted[:1]]
        report = _json_report(result)
        testnet = report.get("testnet") if report else None
        if testnet is None:
            out.append("the program did not report its TEST-NET attempt; cannot rule out egress")
        elif testnet not in _UNREACHABLE:
            out.append(f"a connection to 192.0.2.1 left the sandbox ({testnet}, not unreachable)")
        return out

    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._server.close()
        self._thread.join(timeout=2)


def _checkout_root() -> Path:
    """The folder holding the ``verify_cli`` package: the project checkout when run from one."""
    return Path(__file__).resolve().parents[3]


class _HostFilesUnchanged(HostCheck):
    """No file appears in system folders, /tmp, or the checkout."""

    def __init__(self, ctx: _Context) -> None:
        super().__init__(ctx)
        folders = ["/etc", "/usr", "/usr/local/bin", "/tmp", "/var/tmp", "/root", "/home", "/",
                   tempfile.gettempdir(), str(_checkout_root()), str(ctx.workdir.parent)]
        self.folders = list(dict.fromkeys(folders))

    def _targets(self) -> list[Path]:
        return [Path(f) / f"verify-cli-escape-{self.ctx.token}" for f in self.folders]

    def env(self) -> dict[str, str]:
        return {"VERIFY_CONFORMANCE_HOST_PATHS": ":".join(self.folders)}

    def findings(self, result: RunResult, elapsed: float) -> list[str]:
        return [f"created {p} on the host" for p in self._targets() if os.path.lexists(p)]

    def close(self) -> None:
        for p in self._targets():
            with contextlib.suppress(OSError):
                p.unlink()


def _visible_output(result: RunResult) -> tuple[str, list[str]]:
    """Everything the run handed back, and findings when part of it was cut (fail closed)."""
    parts = [result.stdout.text, result.stderr.text, result.message]
    parts += [data.decode("utf-8", "replace") for data in result.results.values()]
    cut = [f"{name} was truncated; cannot rule out a leak"
           for name, cap in (("stdout", result.stdout), ("stderr", result.stderr)) if cap.truncated]
    return "\n".join(parts), cut


class _SecretFiles(HostCheck):
    """A secret planted in the host user's home and the checkout's files stay out of the output."""

    def __init__(self, ctx: _Context) -> None:
        super().__init__(ctx)
        self.home = Path.home()
        self.secret = f"secret-{secrets.token_hex(16)}"
        self.secret_path = self.home / f".verify-cli-conformance-secret-{ctx.token}"
        self.read_paths = [str(self.secret_path)]
        self.digests: dict[str, str] = {}
        for name in ("pyproject.toml", "README.md", ".git/config"):
            p = _checkout_root() / name
            if p.is_file():
                self.read_paths.append(str(p))
                self.digests[str(p)] = hashlib.sha256(p.read_bytes()[: 1 << 16]).hexdigest()
        fd = os.open(self.secret_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.secret + "\n")

    def env(self) -> dict[str, str]:
        return {"VERIFY_CONFORMANCE_HOST_HOME": str(self.home),
                "VERIFY_CONFORMANCE_READ_PATHS": ":".join(self.read_paths)}

    def findings(self, result: RunResult, elapsed: float) -> list[str]:
        text, out = _visible_output(result)
        if self.secret in text:
            out.append(f"read the secret in {self.secret_path}")
        out += [f"read the checkout's {p}" for p, digest in self.digests.items() if digest in text]
        return out

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.secret_path.unlink()


_SACRIFICE = "import time; time.sleep(300)"


def _spawn_stand_in(env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """A process of the user running verify-cli, for a hostile program to attack instead of it."""
    return subprocess.Popen([sys.executable, "-c", _SACRIFICE], env=dict(env),
                            start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)


def _end(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


class _EnvSecret(HostCheck):
    """A secret in the harness's environment (and in a process started with it) never leaks."""

    VAR = "VERIFY_CONFORMANCE_HOST_SECRET"

    def __init__(self, ctx: _Context) -> None:
        super().__init__(ctx)
        self.secret = f"envsecret-{secrets.token_hex(16)}"
        # /proc/<pid>/environ shows a process's environment as it was at exec time, so the
        # secret must also live in a process started with it, as an API key would.
        self._stand_in = _spawn_stand_in({**os.environ, self.VAR: self.secret})
        self._previous = os.environ.get(self.VAR)
        os.environ[self.VAR] = self.secret

    def findings(self, result: RunResult, elapsed: float) -> list[str]:
        text, out = _visible_output(result)
        if self.secret in text:
            out.append("read a secret from the host's environment")
        return out

    def close(self) -> None:
        if self._previous is None:
            os.environ.pop(self.VAR, None)
        else:
            os.environ[self.VAR] = self._previous
        _end(self._stand_in)


class _HarnessAlive(HostCheck):
    """The process named as the harness survives (a stand-in: the real one is never at risk)."""

    def __init__(self, ctx: _Context) -> None:
        super().__init__(ctx)
        self._stand_in = _spawn_stand_in({"PATH": os.environ.get("PATH", "/usr/bin:/bin")})

    def env(self) -> dict[str, str]:
        return {"VERIFY_HARNESS_PID": str(self._stand_in.pid)}

    def findings(self, result: RunResult, elapsed: float) -> list[str]:
        if '"sent"' in result.stdout.text:  # a signal went out: its death is seen a moment later
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._stand_in.wait(timeout=2.0)
        if self._stand_in.poll() is not None:
            return [f"killed the harness (stand-in pid {self._stand_in.pid}, "
                    f"status {self._stand_in.returncode})"]
        return []

    def close(self) -> None:
        _end(self._stand_in)


HOST_CHECKS: dict[str, type[HostCheck]] = {
    "no_survivors": _NoSurvivors,
    "host_disk_free": _HostDiskFree,
    "bounded_capture": _BoundedCapture,
    "no_network": _NoNetwork,
    "host_files_unchanged": _HostFilesUnchanged,
    "secret_files": _SecretFiles,
    "env_secret": _EnvSecret,
    "harness_alive": _HarnessAlive,
}


def _json_report(result: RunResult) -> dict[str, object] | None:
    for line in reversed(result.stdout.text.splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return None


# --- common checks --------------------------------------------------------------------------


def processes_with_token(token: str) -> list[int]:
    """Host pids (not zombies, not this process) whose argv or environment carries ``token``."""
    needle = token.encode()
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        base = f"/proc/{entry}"
        try:
            with open(f"{base}/stat", "rb") as fh:
                if fh.read().rpartition(b")")[2].split()[:1] == [b"Z"]:
                    continue
            with open(f"{base}/cmdline", "rb") as fh:
                if needle in fh.read():
                    found.append(int(entry))
                    continue
        except OSError:
            continue
        with contextlib.suppress(OSError), open(f"{base}/environ", "rb") as fh:
            if needle in fh.read():
                found.append(int(entry))
    return found


def _survivors(token: str, patience: float = 1.0) -> list[int]:
    """Processes of the run still alive after ``patience`` seconds; they are then killed."""
    deadline = time.monotonic() + patience
    while True:
        pids = processes_with_token(token)
        if not pids or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return pids


def _leftover_containers(token: str, *, required: bool) -> list[str]:
    """Containers labelled ``verify-cli=1`` that carry the run's token; removed once found.

    Where Docker cannot be asked: an empty list, or (``required``, for the docker backend) an
    error, so the case fails closed.
    """
    try:
        docker = importlib.import_module("docker")
        client = docker.from_env(timeout=10)
        containers = client.containers.list(all=True, filters={"label": "verify-cli=1"}, ignore_removed=True)
    except Exception:
        if required:
            raise
        return []
    found = []
    for c in containers:
        config = c.attrs.get("Config") or {}
        blob = json.dumps([config.get("Cmd"), config.get("Env"), config.get("Labels")])
        if token in blob:
            found.append(c.name)
            with contextlib.suppress(Exception):
                c.remove(force=True)
    return found


def _next_run_findings(sandbox: Sandbox, image: str | None) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="verify-conformance-next-") as d:
        result = sandbox.run(RunSpec(command=["python", "-c", "print('ok')"], workdir=Path(d),
                                     limits=SMALL_LIMITS, image=image))
    if result.verdict is Verdict.OK and result.stdout.text.strip() == "ok":
        return []
    return [f"the next run on the same sandbox failed: {result.verdict.value} {result.message!r} "
            f"{result.stderr.text[-200:]!r}"]


@contextlib.contextmanager
def _workdir(case: ConformanceCase) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix=f"verify-conformance-{case.name}-"))
    try:
        (folder / case.program).write_text(case.source, encoding="utf-8")
        folder.chmod(0o755)
        (folder / case.program).chmod(0o644)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_case(sandbox: Sandbox, case: ConformanceCase, *,
             image: str | None = None) -> ConformanceResult:
    """Run one hostile program in ``sandbox`` and judge, from the host, whether it was contained.

    Never raises for a failing check: it comes back as ``error`` and the case as not contained.
    """
    backend = sandbox.name
    expected = case.expects_containment(backend)
    token = f"vccf{secrets.token_hex(10)}"
    findings: list[str] = []
    result: RunResult | None = None
    elapsed = 0.0
    check: HostCheck | None = None
    try:
        with _workdir(case) as workdir:
            check = HOST_CHECKS[case.host_check](_Context(case, backend, token, workdir))
            env = {TOKEN_ENV: token, "VERIFY_CONFORMANCE_MEMORY_MB": str(case.limits.memory_mb),
                   **check.env()}
            spec = RunSpec(command=["python", case.program, token], workdir=workdir,
                           limits=case.limits, env=env, image=image,
                           labels={"verify-cli-conformance": token})
            started = time.monotonic()
            result = sandbox.run(spec)
            elapsed = time.monotonic() - started
            if result.verdict not in case.expected_verdicts:
                want = ", ".join(sorted(v.value for v in case.expected_verdicts))
                findings.append(f"verdict {result.verdict.value} ({result.message}); "
                                f"expected {want}")
            if elapsed > case.limits.wall_seconds + GRACE_SECONDS:
                findings.append(f"took {elapsed:.1f}s, over the {case.limits.wall_seconds:.0f}s "
                                f"limit plus {GRACE_SECONDS:.0f}s")
            findings += check.findings(result, elapsed)
            findings += [f"process {pid} survived the run" for pid in _survivors(token)]
            findings += [f"container {name} left behind" for name in
                         _leftover_containers(token, required=sandbox.runs_in_image)]
            findings += _next_run_findings(sandbox, image)
    except Exception as e:  # fail closed: an unjudged run is not a contained one
        return ConformanceResult(case.name, backend, False, expected,
                                 result.verdict if result else None, elapsed, tuple(findings),
                                 error=f"{type(e).__name__}: {e}", limitation=case.limitation,
                                 run=result)
    finally:
        if check is not None:
            with contextlib.suppress(Exception):
                check.close()
        with contextlib.suppress(Exception):
            _survivors(token, patience=0.0)
    return ConformanceResult(case.name, backend, not findings, expected, result.verdict, elapsed,
                             tuple(findings), limitation=case.limitation, run=result)


def run_conformance(sandbox: Sandbox, *, fast: bool, image: str | None,
                    cases: Sequence[ConformanceCase] = CASES,
                    progress: Callable[[ConformanceResult], None] | None = None,
                    ) -> list[ConformanceResult]:
    """Run the hostile programs (only the quick ones when ``fast``) against ``sandbox``.

    ``image`` is handed to every run (the docker backend's image). ``progress`` is called with
    each result as it comes.
    """
    out = []
    for case in cases:
        if fast and not case.fast:
            continue
        res = run_case(sandbox, case, image=image)
        out.append(res)
        if progress is not None:
            progress(res)
    return out
