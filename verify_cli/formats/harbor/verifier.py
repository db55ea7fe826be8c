"""One Harbor trial on docker: an agent phase (the oracle's ``solve.sh``, a scripted agent, or a
candidate's files) and the verifier (``tests/test.sh``), isolated or shared.

**Isolated** (verify-cli's rule, the default): after the agent phase its container is stopped
(every process it started dies with it) and only *its work* leaves it: the regular files under
the working directory that docker's own record of the container (``docker diff``, kept by the
daemon, not by anything in the container) shows added or changed, and the paths it shows
deleted. They are carried into a fresh container of the same image, where ``tests/`` is bound
read-only at ``/tests`` and ``/logs/verifier`` is a folder of the host's that only this container
sees; ``test.sh`` runs there as the verifier's PID 1. Files that configure Python or pytest
(``conftest.py``, ``sitecustomize.py``, ``*.pth``, ``pytest.ini``) and links are not carried. What
the agent left on ``PATH`` outside the workdir, in site-packages, in ``/tests``, in
``/logs/verifier`` or running in the background is not there.

**Shared** (Harbor's own, an explicit option): ``test.sh`` runs in the agent's container, after
the agent, with ``tests/`` copied into ``/tests``; the reward is read from that container's
``/logs/verifier``. Whatever the agent left there runs too.

Infrastructure is never scored: a docker failure, a container lost mid-run or a healthcheck
that never passes is ``infra_error``; a verifier that runs and writes no reward is the task's.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify_cli.formats.harbor.config import RESULTS_FILE
from verify_cli.formats.harbor.reward import Reward, read_reward, reward_junit
from verify_cli.formats.harbor.spec import (
    SOLUTION_MOUNT,
    TB1_SOLUTION,
    TB1_TEST_SH,
    TB1_TESTS,
    TERMINAL_BENCH,
    TESTS_MOUNT,
    VERIFIER_LOGS,
    HarborSpec,
    VerifierMode,
)
from verify_cli.grading.workspace import HARNESS_FILES, HARNESS_SUFFIXES
from verify_cli.sandbox.base import RunResult, Verdict
from verify_cli.sandbox.docker.containers import LABEL, OWNER_LABEL, owner
from verify_cli.sandbox.plumbing.captured import CapturedOutput
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import list_files, unsafe_relative_path

#: The reward as read, beside the JUnit file (per-key values for the score and the report).
REWARD_RESULT = "harbor-reward.json"
#: How much of the workdir an agent may hand over (beyond it: the agent's failure, said so).
MAX_WORK_BYTES = 256 << 20
_KEEP = 64 << 10
_BACKEND = "docker"


class TrialInfraError(Exception):
    """The machinery failed (docker, a lost container, a healthcheck): never scored."""


@dataclass(frozen=True)
class AgentPhase:
    """What happens before the verifier: a script run in the environment's workdir (the oracle's
    ``solve.sh`` or a scripted agent), and/or files laid into the workdir (a candidate)."""

    script: str | None = None
    files: Mapping[str, bytes] = field(default_factory=dict)
    #: Run the task's ``solution/solve.sh`` (mounted at /solution) as the script.
    oracle: bool = False

    @property
    def empty(self) -> bool:
        return self.script is None and not self.files and not self.oracle


@dataclass(frozen=True)
class Trial:
    """One trial's evidence: the verifier's run (results hold the JUnit and the reward), the
    reward as read, and what of the agent's work was carried, refused and deleted."""

    run: RunResult
    reward: Reward | None
    mode: VerifierMode
    carried: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    agent_seconds: float = 0.0
    verifier_seconds: float = 0.0
    #: How the trial's environment was made, where a backend says (bwrap: its writable roots).
    notes: tuple[str, ...] = ()


def captured(data: bytes) -> CapturedOutput:
    if len(data) <= 2 * _KEEP:
        return CapturedOutput(head=data, total_bytes=len(data))
    return CapturedOutput(head=data[:_KEEP], tail=data[-_KEEP:], total_bytes=len(data), truncated=True)


def output_tail(output: bytes, chars: int = 240) -> str:
    """The last non-blank lines of the verifier's output, on one line, at most ``chars`` long."""
    lines = [line.strip() for line in output.decode("utf-8", "replace").splitlines() if line.strip()]
    text = " | ".join(lines[-4:])
    return text if len(text) <= chars else "..." + text[-chars:]


def _tar(files: Mapping[str, bytes], mode: int = 0o644) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for rel, data in sorted(files.items()):
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _folder_files(folder: Path) -> dict[str, bytes]:
    return {rel: p.read_bytes() for rel, p in list_files(folder).items()}


#: Top-level names in the workdir that would shadow the test runner for a verifier that runs
#: ``python -m pytest`` there (the working folder is first on its ``sys.path``).
SHADOWING = ("pytest.py", "pytest", "_pytest", "pluggy", "py.py")


def verifier_files(task: Task) -> dict[str, bytes]:
    """What ``/tests`` holds for the verifier: ``tests/`` (Terminal-Bench 1: with run-tests.sh and
    the test.sh that turns its exit status into the reward)."""
    files = _folder_files(task.root / "tests")
    if task.harbor is not None and task.harbor.layout == TERMINAL_BENCH:
        files[TB1_TESTS] = (task.root / TB1_TESTS).read_bytes()
        files["test.sh"] = TB1_TEST_SH.encode()
    return files


def oracle_files(task: Task) -> dict[str, bytes]:
    """What ``/solution`` holds for the oracle (``solve.sh`` and its files)."""
    if task.harbor is not None and task.harbor.layout == TERMINAL_BENCH:
        return {"solve.sh": (task.root / TB1_SOLUTION).read_bytes()}
    return _folder_files(task.root / "solution")


def _harness_file(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return (name in HARNESS_FILES or name.endswith(HARNESS_SUFFIXES) or "__pycache__" in rel.split("/")
            or rel.split("/", 1)[0] in SHADOWING)


def admit(files: Mapping[str, bytes]) -> tuple[dict[str, bytes], list[str]]:
    """The files of the agent's work the verifier sees, and those refused (unsafe paths, files
    that configure Python or pytest)."""
    taken: dict[str, bytes] = {}
    ignored: list[str] = []
    for rel, data in sorted(files.items()):
        rel = rel.replace("\\", "/").lstrip("/")
        while rel.startswith("./"):
            rel = rel[2:]
        if not rel or unsafe_relative_path(rel) or _harness_file(rel):
            ignored.append(rel)
        else:
            taken[rel] = data
    return taken, ignored


def judge_verifier(verdict: Verdict, exit_code: int | None, logs: Mapping[str, bytes], output: bytes, wall: float,
                   message: str, *, backend: str, digest: str | None = None) -> tuple[RunResult, Reward]:
    """The verifier's run as evidence (on any backend): the reward read from ``logs`` (the files of
    ``/logs/verifier``: reward.json first) as JUnit and as :data:`REWARD_RESULT`; the verdict is
    the reward's (test.sh's exit status is not), a timeout with no reward says so."""
    reward = read_reward(logs)
    if verdict is Verdict.TIMEOUT and not reward.values:
        reward = Reward({}, "", f"the verifier ran past its timeout_sec ({message})")
    results = {RESULTS_FILE: reward_junit(reward, output_tail(output)),
               REWARD_RESULT: json.dumps(reward.to_dict(), sort_keys=True).encode()}
    if verdict is Verdict.OK:
        # test.sh's exit status is not the verdict (the reward file is): keep the two consistent
        verdict, exit_code = (Verdict.OK, 0) if reward.passed else (Verdict.NONZERO_EXIT, 1)
    run = RunResult(verdict, backend, exit_code=exit_code, wall_seconds=wall, stdout=captured(output),
                    results=results, message=message, image_digest=digest)
    return run, reward


def read_logs(folder: Path) -> dict[str, bytes]:
    """The regular files (not links) of a host folder that was the verifier's ``/logs/verifier``."""
    if not folder.is_dir() or folder.is_symlink():
        return {}
    return {p.name: p.read_bytes()[:1 << 20] for p in folder.iterdir() if p.is_file() and not p.is_symlink()}


def agent_timeout_run(message: str, output: bytes, backend: str) -> RunResult:
    """The run of a trial whose agent phase ran past its timeout (no verifier ran)."""
    return RunResult(Verdict.TIMEOUT, backend, message=message, stdout=captured(output),
                     results={RESULTS_FILE: reward_junit(Reward({}, "", message))})


class _Exec:
    """An exec in a running container, waited for with a deadline (docker has none of its own)."""

    def __init__(self, api: Any, container_id: str, argv: list[str], *, user: str | None, workdir: str,
                 env: Mapping[str, str]) -> None:
        self.api = api
        self.id = api.exec_create(container_id, argv, user=user or "", workdir=workdir, environment=dict(env),
                                  stdout=True, stderr=True)["Id"]
        self.output = b""
        self.error: BaseException | None = None

    def run(self, timeout: float) -> tuple[int | None, bool]:
        """(exit code, finished in time)."""
        def target() -> None:
            try:
                self.output = self.api.exec_start(self.id, stream=False, demux=False) or b""
            except BaseException as e:  # reported by the caller
                self.error = e
        t = threading.Thread(target=target, daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            return None, False
        if self.error is not None:
            raise TrialInfraError(f"docker exec failed: {self.error}")
        return self.api.exec_inspect(self.id).get("ExitCode"), True


class HarborTrials:
    """Runs Harbor trials on the local Docker engine (thread-safe: each trial its own containers)."""

    def __init__(self, client: Any | None = None) -> None:
        self._client = client
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                from verify_cli.environments.image import docker_client

                self._client = docker_client()
            return self._client

    # -- containers ---------------------------------------------------------------------------

    def _create(self, image: str, spec: HarborSpec, argv: list[str], *, user: str | None,
                binds: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None,
                phase: str) -> str:
        api = self.client.api
        host_config = api.create_host_config(
            mem_limit=f"{spec.memory_mb}m", memswap_limit=f"{spec.memory_mb}m", nano_cpus=int(spec.cpus * 1e9),
            pids_limit=4096, network_mode="none", binds=[f"{h}:{c}" for h, c in (binds or {}).items()],
            init=False)
        created = api.create_container(image, entrypoint=argv[:1], command=argv[1:], user=user or "",
                                       working_dir=spec.workdir, environment=dict(env or {}),
                                       network_disabled=True, host_config=host_config,
                                       labels={LABEL: "1", OWNER_LABEL: owner(), "verify-cli.harbor": phase})
        return str(created["Id"])

    @contextmanager
    def _container(self, *args: Any, **kwargs: Any) -> Iterator[str]:
        cid = self._create(*args, **kwargs)
        try:
            yield cid
        finally:
            with suppress(Exception):
                self.client.api.remove_container(cid, force=True)

    def _mkdir_root(self, cid: str, path: str) -> None:
        ex = _Exec(self.client.api, cid, ["mkdir", "-p", "-m", "0777", path], user="0", workdir="/", env={})
        code, done = ex.run(60)
        if not done or code != 0:
            raise TrialInfraError(f"could not make {path} in the environment: {ex.output[-300:]!r}")

    def _healthy(self, cid: str, spec: HarborSpec) -> None:
        check = spec.healthcheck
        if check is None:
            return
        deadline = time.monotonic() + check.start_period_sec + check.retries * (check.interval_sec + check.timeout_sec)
        failures = 0
        started = time.monotonic()
        while time.monotonic() < deadline:
            ex = _Exec(self.client.api, cid, ["/bin/sh", "-c", check.command], user=spec.agent_user,
                       workdir=spec.workdir, env={})
            code, done = ex.run(check.timeout_sec)
            if done and code == 0:
                return
            if time.monotonic() - started >= check.start_period_sec:
                failures += 1
                if failures >= check.retries:
                    break
            time.sleep(check.interval_sec)
        raise TrialInfraError(f"the healthcheck {check.command!r} never passed ({failures} failures)")

    def _workdir_changes(self, cid: str, workdir: str) -> tuple[dict[str, bytes], list[str], list[str]]:
        """(changed regular files, refused paths, deleted paths) under ``workdir``, by docker's record."""
        api = self.client.api
        prefix = workdir.rstrip("/") + "/"
        changed: set[str] = set()
        deleted: list[str] = []
        for entry in api.diff(cid) or ():
            path = str(entry.get("Path", ""))
            if not path.startswith(prefix):
                continue
            rel = path[len(prefix):]
            if entry.get("Kind") == 2:
                deleted.append(rel)
            else:
                changed.add(rel)
        if not changed:
            return {}, [], sorted(deleted)
        stream, _ = api.get_archive(cid, workdir)
        buf = io.BytesIO()
        for chunk in stream:
            buf.write(chunk)
            if buf.tell() > MAX_WORK_BYTES:
                raise TrialInfraError(f"the agent's workdir holds more than {MAX_WORK_BYTES >> 20} MiB")
        buf.seek(0)
        files: dict[str, bytes] = {}
        refused: list[str] = []
        top = os.path.basename(workdir.rstrip("/"))
        with tarfile.open(fileobj=buf, mode="r") as tar:
            for member in tar:
                name = member.name
                rel = name[len(top) + 1:] if name.startswith(top + "/") else ""
                if rel not in changed:
                    continue
                if member.isfile():
                    fh = tar.extractfile(member)
                    files[rel] = fh.read() if fh is not None else b""
                elif not member.isdir():
                    refused.append(rel)  # links and devices are not the agent's work
        taken, ignored = admit(files)
        return taken, sorted(refused + ignored), sorted(deleted)

    def _logs_of(self, cid: str) -> dict[str, bytes]:
        """The files of ``/logs/verifier`` in a container (shared mode)."""
        try:
            stream, _ = self.client.api.get_archive(cid, VERIFIER_LOGS)
        except Exception:
            return {}
        buf = io.BytesIO(b"".join(stream))
        out: dict[str, bytes] = {}
        with tarfile.open(fileobj=buf, mode="r") as tar:
            for member in tar:
                if member.isfile() and member.name.count("/") == 1:
                    fh = tar.extractfile(member)
                    out[member.name.split("/", 1)[1]] = (fh.read(1 << 20) if fh is not None else b"")
        return out

    # -- a trial ------------------------------------------------------------------------------

    def trial(self, task: Task, image: str, agent: AgentPhase, *, mode: VerifierMode | None = None) -> Trial:
        """Run ``agent`` then the verifier in ``image`` (the task's built environment)."""
        spec = task.harbor
        if spec is None:
            raise ValueError(f"{task.id} is not a Harbor task")
        mode = mode or spec.mode
        try:
            if mode is VerifierMode.SHARED:
                return self._shared(task, spec, image, agent)
            return self._isolated(task, spec, image, agent)
        except TrialInfraError as e:
            return Trial(RunResult(Verdict.INFRA_ERROR, _BACKEND, message=str(e)), None, mode)
        except Exception as e:  # docker API errors, a container gone: the machinery's, never a score
            return Trial(RunResult(Verdict.INFRA_ERROR, _BACKEND, message=f"{type(e).__name__}: {e}"), None, mode)

    def _agent_phase(self, task: Task, spec: HarborSpec, cid: str, agent: AgentPhase) -> tuple[Verdict, str, bytes]:
        """Run the agent phase in the running container ``cid``: (verdict, message, output)."""
        api = self.client.api
        if agent.files:
            api.put_archive(cid, spec.workdir, _tar(agent.files))
        script = agent.script
        env: dict[str, str] = {}
        if agent.oracle:
            self._mkdir_root(cid, SOLUTION_MOUNT)
            api.put_archive(cid, SOLUTION_MOUNT, _tar(oracle_files(task), 0o755))
            script, env = f"bash {SOLUTION_MOUNT}/solve.sh", dict(spec.solution_env)
        if script is None:
            return Verdict.OK, "", b""
        ex = _Exec(api, cid, ["bash", "-c", script], user=spec.agent_user, workdir=spec.workdir, env=env)
        code, done = ex.run(spec.agent_timeout_sec or 600.0)
        if not done:
            return Verdict.TIMEOUT, f"the agent phase ran past {spec.agent_timeout_sec or 600.0:g}s", ex.output
        return Verdict.OK, f"agent phase exited {code}", ex.output

    def _judge(self, verdict: Verdict, exit_code: int | None, logs: Mapping[str, bytes], output: bytes,
               wall: float, message: str, image: str) -> tuple[RunResult, Reward]:
        digest = None
        with suppress(Exception):
            digest = str(self.client.images.get(image).id)
        return judge_verifier(verdict, exit_code, logs, output, wall, message, backend=_BACKEND, digest=digest)

    def _isolated(self, task: Task, spec: HarborSpec, image: str, agent: AgentPhase) -> Trial:
        api = self.client.api
        carried: dict[str, bytes] = {}
        ignored: list[str] = []
        deleted: list[str] = []
        agent_seconds = 0.0
        if agent.script is not None or agent.oracle or spec.healthcheck is not None:
            t0 = time.monotonic()
            with self._container(image, spec, ["/bin/sh", "-c", "exec sleep infinity"], user=spec.agent_user,
                                 phase="agent") as cid:
                api.start(cid)
                self._healthy(cid, spec)
                files, refused = admit(agent.files)
                ignored += refused
                verdict, message, output = self._agent_phase(task, spec, cid, AgentPhase(agent.script, files,
                                                                                          agent.oracle))
                api.kill(cid)  # every process the agent started ends here
                carried, refused, deleted = self._workdir_changes(cid, spec.workdir)
                ignored += refused
            agent_seconds = time.monotonic() - t0
            if verdict is Verdict.TIMEOUT:
                run = RunResult(Verdict.TIMEOUT, _BACKEND, message=message, stdout=captured(output),
                                results={RESULTS_FILE: reward_junit(Reward({}, "", message))})
                return Trial(run, None, VerifierMode.ISOLATED, tuple(sorted(carried)), tuple(ignored),
                             tuple(deleted), agent_seconds)
        else:
            carried, ignored = admit(agent.files)
        t1 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="verify-harbor-") as tmp:
            logs = Path(tmp) / "verifier"
            logs.mkdir()
            os.chmod(logs, 0o777)  # the verifier runs as the image's user, unknown here
            tests = Path(tmp) / "tests"
            for rel, data in verifier_files(task).items():
                (tests / rel).parent.mkdir(parents=True, exist_ok=True)
                (tests / rel).write_bytes(data)
            tests.mkdir(exist_ok=True)
            argv = ["/bin/sh", "-c", 'rm -rf -- "$@"; exec bash /tests/test.sh', "verifier",
                    *(f"{spec.workdir}/{d}" for d in deleted)]
            with self._container(image, spec, argv, user=spec.verifier_user, env=spec.verifier_env,
                                 binds={str(tests): f"{TESTS_MOUNT}:ro", str(logs): f"{VERIFIER_LOGS}:rw"},
                                 phase="verifier") as cid:
                if carried:
                    api.put_archive(cid, spec.workdir, _tar(carried))
                api.start(cid)
                verdict, exit_code, message = Verdict.OK, None, ""
                try:
                    status = api.wait(cid, timeout=spec.verifier_timeout_sec)
                    exit_code = int(status.get("StatusCode", -1))
                except Exception:
                    if api.inspect_container(cid)["State"].get("Running"):
                        with suppress(Exception):
                            api.kill(cid)
                        verdict, message = Verdict.TIMEOUT, f"test.sh ran past {spec.verifier_timeout_sec:g}s"
                    else:
                        raise
                state = api.inspect_container(cid)["State"]
                if state.get("OOMKilled"):
                    verdict, message = Verdict.MEMORY_LIMIT, f"test.sh ran out of {spec.memory_mb} MiB"
                output = api.logs(cid, stdout=True, stderr=True) or b""
            files = read_logs(logs)
        wall = time.monotonic() - t1
        run, reward = self._judge(verdict, exit_code, files, output, wall,
                                  message or f"test.sh exited {exit_code}", image)
        return Trial(run, reward, VerifierMode.ISOLATED, tuple(sorted(carried)), tuple(ignored), tuple(deleted),
                     agent_seconds, wall)

    def _shared(self, task: Task, spec: HarborSpec, image: str, agent: AgentPhase) -> Trial:
        api = self.client.api
        t0 = time.monotonic()
        with self._container(image, spec, ["/bin/sh", "-c", "exec sleep infinity"], user=spec.agent_user,
                             phase="shared") as cid:
            api.start(cid)
            self._healthy(cid, spec)
            verdict, message, output = self._agent_phase(task, spec, cid, agent)
            agent_seconds = time.monotonic() - t0
            if verdict is Verdict.TIMEOUT:
                run = RunResult(Verdict.TIMEOUT, _BACKEND, message=message, stdout=captured(output),
                                results={RESULTS_FILE: reward_junit(Reward({}, "", message))})
                return Trial(run, None, VerifierMode.SHARED, agent_seconds=agent_seconds)
            t1 = time.monotonic()
            self._mkdir_root(cid, TESTS_MOUNT)
            self._mkdir_root(cid, VERIFIER_LOGS)
            api.put_archive(cid, TESTS_MOUNT, _tar(verifier_files(task), 0o755))
            ex = _Exec(api, cid, ["bash", f"{TESTS_MOUNT}/test.sh"], user=spec.verifier_user, workdir=spec.workdir,
                       env=spec.verifier_env)
            code, done = ex.run(spec.verifier_timeout_sec)
            verdict = Verdict.OK if done else Verdict.TIMEOUT
            message = f"test.sh exited {code}" if done else f"test.sh ran past {spec.verifier_timeout_sec:g}s"
            logs = self._logs_of(cid)
            wall = time.monotonic() - t1
        run, reward = self._judge(verdict, code, logs, ex.output, wall, message, image)
        return Trial(run, reward, VerifierMode.SHARED, agent_seconds=agent_seconds, verifier_seconds=wall)


__all__ = ["MAX_WORK_BYTES", "REWARD_RESULT", "SHADOWING", "AgentPhase", "HarborTrials", "Trial", "TrialInfraError",
           "admit", "agent_timeout_run", "captured", "judge_verifier", "oracle_files", "output_tail", "read_logs",
           "verifier_files"]
