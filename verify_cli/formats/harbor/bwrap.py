"""One Harbor trial on bwrap, over the task image's exported root file system
(:mod:`verify_cli.environments.rootfs`): the same trial as on docker (:mod:`.verifier`), with a
private writable root (:mod:`verify_cli.sandbox.bwrap.writable_root`: an overlayfs over the
exported root, or a full copy where none can be mounted) in place of each container.

**Isolated** (the default): the agent phase (the oracle's ``solve.sh``, a scripted agent, a
candidate's files) runs in a writable root of its own; its sandbox ends (every process it started
dies with its pid namespace); *its work* is read on the host from that root's changes (the upper
layer: as docker's ``docker diff`` reads a container's), under the workdir only, filtered by the
same rule as on docker (:func:`.verifier.admit`: no links, nothing that configures Python or
pytest); then a **fresh** writable root over the same exported root gets that work in its
workdir (and the deleted paths removed), ``tests/`` bound read-only at ``/tests``, a host folder
of its own at ``/logs/verifier``, and runs ``test.sh``; the reward files are read on the host.

**Shared** (Harbor's own, declared): one sandbox over one writable root runs the agent phase,
then copies ``tests/`` into ``/tests`` and runs ``test.sh`` there, while whatever the agent
started still runs; the reward is read from that root's ``/logs/verifier``.

Every run has no network (all namespaces unshared), the task's memory as its cgroup's limit (or
rlimits), the task's timeouts as its wall limit. The runs' user is ``[agent] user`` /
``[verifier] user``, else the image's ``USER`` (kept beside the exported root), else root; a
user namespace maps it to the caller, so on bwrap a user is a name, not a boundary (the
boundary is the fresh root). Infrastructure is never scored: a root that cannot be made or
mounted, a sandbox that does not start, an exported root that is gone are ``infra_error``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from verify_cli.environments.rootfs import image_config
from verify_cli.formats.harbor.reward import Reward
from verify_cli.formats.harbor.spec import SOLUTION_MOUNT, TESTS_MOUNT, VERIFIER_LOGS, HarborSpec, VerifierMode
from verify_cli.formats.harbor.verifier import (
    MAX_WORK_BYTES,
    AgentPhase,
    Trial,
    TrialInfraError,
    admit,
    agent_timeout_run,
    judge_verifier,
    oracle_files,
    read_logs,
    verifier_files,
)
from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Verdict
from verify_cli.sandbox.bwrap.sandbox import RUN_NAMESPACES, SANDBOX_HOSTS
from verify_cli.sandbox.bwrap.writable_root import MARKER_FD, ROOT_READY, TooMuchWork, WritableRoot
from verify_cli.sandbox.local import LocalSandbox, Prepared
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import unsafe_relative_path

_BACKEND = "bwrap"
#: Where the agent's files (a candidate's, or the work carried to the verifier) are bound for the
#: run's first step to copy into the workdir.
CARRIED_MOUNT = "/.verify-carried"
#: Where ``tests/`` is bound in a shared trial, copied into ``/tests`` after the agent phase.
SHARED_TESTS_MOUNT = "/.verify-tests"
#: The marker the run's first shell writes once the sandbox exists (after :data:`ROOT_READY`).
SANDBOX_STARTED = b"S"
#: PATH where the image's configuration was not kept (docker's default).
DEFAULT_IMAGE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: The line a shared trial's wrapper writes on stderr when the agent phase runs past its timeout.
AGENT_TIMEOUT_LINE = "verify-cli: the agent phase ran past its timeout"
_AGENT_TIMEOUT_STATUS = 124
#: The output a run may write before it is stopped (docker's exec keeps it all: a solve.sh that
#: installs packages or builds prints a lot; the trial keeps its head and tail).
OUTPUT_BYTES = 64 << 20


class _OneRun(LocalSandbox):
    """The local runner's machinery (cgroup and rlimits, wall limit, killing, bounded output)
    over one prepared command line."""

    name = _BACKEND

    def __init__(self, prepare: Callable[[Path], Prepared]) -> None:
        self._prepare = prepare

    def prepare(self, spec: RunSpec, scratch: Path) -> Prepared:
        return self._prepare(scratch)


def _user_ids(root: Path, user: str | None) -> tuple[int, int, str]:
    """(uid, gid, home) of ``user`` (a name, a number, ``user:group``) in the root's /etc/passwd;
    root where none is named. TrialInfraError where the image has no such user."""
    def lookup(path: str, key: str, column: int) -> list[str] | None:
        try:
            lines = (root / path).read_text(errors="replace").splitlines()
        except OSError:
            return None
        for line in lines:
            parts = line.split(":")
            if len(parts) >= 4 and parts[column] == key:
                return parts
        return None

    name, _, group = (user or "0").partition(":")
    found = lookup("etc/passwd", name, 2 if name.isdigit() else 0)
    if name.isdigit():
        uid, gid = int(name), int(found[3]) if found is not None and found[3].isdigit() else int(name)
    elif found is None or not (found[2].isdigit() and found[3].isdigit()):
        raise TrialInfraError(f"the user {name!r} is not in the image's /etc/passwd")
    else:
        uid, gid = int(found[2]), int(found[3])
    home = found[5] if found is not None and len(found) > 5 and found[5] else "/"
    if group:
        g = [group, "", group] if group.isdigit() else lookup("etc/group", group, 0)
        if g is None or len(g) < 3 or not g[2].isdigit():
            raise TrialInfraError(f"the group {group!r} is not in the image's /etc/group")
        gid = int(g[2])
    return uid, gid, home


def _image_env(root: Path, extra: Mapping[str, str], home: str) -> dict[str, str]:
    """The environment of a run: the image's ``Env`` (kept beside its exported root), the user's
    HOME, and ``extra`` over them."""
    env: dict[str, str] = {"PATH": DEFAULT_IMAGE_PATH, "HOME": home}
    for item in image_config(root).get("Env") or ():
        if isinstance(item, str) and "=" in item:
            k, v = item.split("=", 1)
            env[k] = v
    env.update(extra)
    return env


def _write_folder(folder: Path, files: Mapping[str, bytes], mode: int = 0o644) -> Path:
    """``files`` written under ``folder`` (a path that would leave it is not written: a shared
    trial's candidate files are not filtered by :func:`admit`, and this is the host)."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        rel = rel.replace("\\", "/").lstrip("/")
        if not rel or unsafe_relative_path(rel):
            continue
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    return folder


class BwrapTrials:
    """Runs Harbor trials on bwrap over exported roots (thread-safe: each trial its own roots)."""

    def __init__(self, *, force_copy: bool = False) -> None:
        #: Make every writable root a full copy (the fallback where no overlay mounts; tests).
        self.force_copy = force_copy

    def trial(self, task: Task, root: str, agent: AgentPhase, *, mode: VerifierMode | None = None) -> Trial:
        """Run ``agent`` then the verifier over the exported root ``root`` (the task's image's)."""
        spec = task.harbor
        if spec is None:
            raise ValueError(f"{task.id} is not a Harbor task")
        mode = mode or spec.mode
        try:
            if not Path(root).is_dir():
                raise TrialInfraError(f"the exported root file system {root} is gone")
            # On disk (the system's temporary folder), not the RAM-backed scratch folder: a root's
            # upper layer holds all a trial writes, as a container's layer does on docker.
            with tempfile.TemporaryDirectory(prefix="verify-harbor-") as tmp:
                if mode is VerifierMode.SHARED:
                    return self._shared(task, spec, Path(root), agent, Path(tmp))
                return self._isolated(task, spec, Path(root), agent, Path(tmp))
        except TrialInfraError as e:
            return Trial(RunResult(Verdict.INFRA_ERROR, _BACKEND, message=str(e)), None, mode)
        except (OSError, TooMuchWork) as e:  # a root that cannot be made, a scratch disk: never a score
            return Trial(RunResult(Verdict.INFRA_ERROR, _BACKEND, message=f"{type(e).__name__}: {e}"), None, mode)

    # -- one run --------------------------------------------------------------------------------

    def run_in_root(self, root: WritableRoot, lower: Path, spec: HarborSpec, script: str, *, args: Sequence[str] = (),
             user: str | None, env: Mapping[str, str], wall: float, binds: Sequence[tuple[str, str, bool]] = (),
             scratch: Path, stdin: bytes | None = None, output_bytes: int = OUTPUT_BYTES,
             memory_mb: int | None = None) -> RunResult:
        """``script`` (a POSIX shell script, with ``args``) in a sandbox over ``root``, at the
        workdir. ``binds``: (host path, path inside, writable). INFRA_ERROR verdicts are raised
        as :class:`TrialInfraError`."""
        uid, gid, home = _user_ids(lower, user)
        run_env = _image_env(lower, env, home)
        hosts = scratch / "hosts"
        hosts.write_text(SANDBOX_HOSTS)

        def prepare(run_scratch: Path) -> Prepared:
            argv = [*root.launch_prefix(), shutil.which("bwrap") or "bwrap", *RUN_NAMESPACES,
                    "--uid", str(uid), "--gid", str(gid), "--hostname", "sandbox",
                    "--bind", str(root.path), "/", "--proc", "/proc", "--dev", "/dev",
                    "--ro-bind-try", str(hosts), "/etc/hosts"]
            for host, inside, writable in binds:
                argv += ["--bind" if writable else "--ro-bind", host, inside]
            argv += ["--dir", spec.workdir, "--chdir", spec.workdir, "--", "/bin/sh", "-c",
                     f"printf {SANDBOX_STARTED.decode()} >&{MARKER_FD} || exit 125\nexec {MARKER_FD}>&-\n{script}",
                     "sh", *args]
            read_end, write_end = os.pipe()
            return Prepared(argv=argv, env=run_env, cwd="/", results_dir=run_scratch / "results",
                            signal_from_status=True, results_pipe=(read_end, write_end), results_archive_limit=64,
                            start_markers=ROOT_READY + SANDBOX_STARTED,
                            start_stages=(f"the writable root ({root.mode})", "the trial's sandbox (bwrap)"))

        limits = Limits(wall_seconds=wall, memory_mb=memory_mb or spec.memory_mb, processes=4096,
                        output_bytes=output_bytes, file_bytes=max(spec.storage_mb, 1) << 20)
        run = _OneRun(prepare).run(RunSpec(command=[], workdir=scratch, limits=limits, stdin=stdin))
        if run.verdict in (Verdict.INFRA_ERROR, Verdict.SETUP_ERROR):
            raise TrialInfraError(run.message or "the trial's sandbox failed")
        return run

    def healthy(self, root: WritableRoot, lower: Path, spec: HarborSpec, scratch: Path) -> None:
        """Run the task's healthcheck in ``root`` until it passes (TrialInfraError where it never does)."""
        check = spec.healthcheck
        if check is None:
            return
        deadline = time.monotonic() + check.start_period_sec + check.retries * (check.interval_sec + check.timeout_sec)
        failures = 0
        started = time.monotonic()
        while time.monotonic() < deadline:
            run = self.run_in_root(root, lower, spec, f"exec /bin/sh -c {shlex.quote(check.command)}",
                            user=self.user(lower, spec.agent_user), env={}, wall=check.timeout_sec, scratch=scratch)
            if run.verdict is Verdict.OK:
                return
            if time.monotonic() - started >= check.start_period_sec:
                failures += 1
                if failures >= check.retries:
                    break
            time.sleep(check.interval_sec)
        raise TrialInfraError(f"the healthcheck {check.command!r} never passed ({failures} failures)")

    def user(self, lower: Path, user: str | None) -> str | None:
        """``user`` (a task's), else the image's ``USER`` (kept beside its exported root)."""
        configured = image_config(lower).get("User")
        return user or (str(configured) if configured else None)

    # -- the two modes --------------------------------------------------------------------------

    def _agent_binds(self, task: Task, agent: AgentPhase, files: Mapping[str, bytes], tmp: Path
                     ) -> tuple[list[tuple[str, str, bool]], str, dict[str, str]]:
        """(binds, the shell lines, env) of the agent phase: its files copied into the workdir,
        then its script (the oracle's solve.sh at /solution)."""
        spec = task.harbor
        assert spec is not None
        binds: list[tuple[str, str, bool]] = []
        lines = ""
        env: dict[str, str] = {}
        if files:
            binds.append((str(_write_folder(tmp / "agent-files", files)), CARRIED_MOUNT, False))
            lines += f"cp -R {CARRIED_MOUNT}/. ./ || exit 125\n"
        script = agent.script
        if agent.oracle:
            binds.append((str(_write_folder(tmp / "solution", oracle_files(task), 0o755)), SOLUTION_MOUNT, False))
            script, env = f"bash {SOLUTION_MOUNT}/solve.sh", dict(spec.solution_env)
        if script is not None:
            lines += f"bash -c {shlex.quote(script)} </dev/null\n"
        return binds, lines, env

    def _isolated(self, task: Task, spec: HarborSpec, lower: Path, agent: AgentPhase, tmp: Path) -> Trial:
        notes: list[str] = []
        carried: dict[str, bytes] = {}
        ignored: list[str] = []
        deleted: list[str] = []
        agent_seconds = 0.0
        if agent.script is not None or agent.oracle or spec.healthcheck is not None:
            t0 = time.monotonic()
            files, refused = admit(agent.files)
            ignored += refused
            with WritableRoot(str(lower), parent=str(tmp), force_copy=self.force_copy) as root:
                notes.append(f"the agent's root: {root.describe()}")
                self.healthy(root, lower, spec, tmp)
                binds, lines, env = self._agent_binds(task, AgentPhase(agent.script, files, agent.oracle), files, tmp)
                timeout = spec.agent_timeout_sec or 600.0
                run = self.run_in_root(root, lower, spec, lines or "true\n", user=self.user(lower, spec.agent_user),
                                       env=env, wall=timeout, binds=binds, scratch=tmp)
                # the sandbox has ended: every process the agent started is gone with it
                changes = root.changes(spec.workdir, max_bytes=MAX_WORK_BYTES)
            agent_seconds = time.monotonic() - t0
            carried, refused = admit(changes.files)
            ignored += sorted(changes.refused + refused)
            deleted = changes.deleted
            if run.verdict is Verdict.TIMEOUT:
                output = run.stdout.head + run.stdout.tail
                return Trial(agent_timeout_run(f"the agent phase ran past {timeout:g}s", output, _BACKEND), None,
                             VerifierMode.ISOLATED, tuple(sorted(carried)), tuple(ignored), tuple(deleted),
                             agent_seconds, notes=tuple(notes))
        else:
            carried, ignored = admit(agent.files)
        t1 = time.monotonic()
        logs = tmp / "verifier-logs"
        logs.mkdir()
        os.chmod(logs, 0o777)
        tests = _write_folder(tmp / "tests", verifier_files(task), 0o755)
        binds = [(str(tests), TESTS_MOUNT, False), (str(logs), VERIFIER_LOGS, True)]
        lines = 'rm -rf -- "$@"\n'
        if carried:
            binds.append((str(_write_folder(tmp / "carried", carried)), CARRIED_MOUNT, False))
            lines += f"cp -R {CARRIED_MOUNT}/. ./ || exit 125\n"
        lines += f"exec bash {TESTS_MOUNT}/test.sh </dev/null\n"
        workdir = spec.workdir.rstrip("/")
        with WritableRoot(str(lower), parent=str(tmp), force_copy=self.force_copy) as root:
            notes.append(f"the verifier's root: {root.describe()} (fresh)")
            run = self.run_in_root(root, lower, spec, lines, args=[f"{workdir}/{d}" for d in deleted],
                            user=self.user(lower, spec.verifier_user), env=spec.verifier_env,
                            wall=spec.verifier_timeout_sec, binds=binds, scratch=tmp)
        wall = time.monotonic() - t1
        result, reward = self._judge(run, read_logs(logs), wall, spec)
        return Trial(result, reward, VerifierMode.ISOLATED, tuple(sorted(carried)), tuple(ignored), tuple(deleted),
                     agent_seconds, wall, notes=tuple(notes))

    def _judge(self, run: RunResult, logs: Mapping[str, bytes], wall: float, spec: HarborSpec
               ) -> tuple[RunResult, Reward]:
        output = run.stdout.head + run.stdout.tail + run.stderr.head + run.stderr.tail
        verdict, message = run.verdict, f"test.sh exited {run.exit_code}"
        if verdict is Verdict.TIMEOUT:
            message = f"test.sh ran past {spec.verifier_timeout_sec:g}s"
        elif verdict is Verdict.MEMORY_LIMIT:
            message = f"test.sh ran out of {spec.memory_mb} MiB"
        elif verdict is not Verdict.OK:
            verdict = Verdict.OK  # test.sh's exit status is not the verdict: the reward file is
        return judge_verifier(verdict, run.exit_code, logs, output, wall, message, backend=_BACKEND)

    def _shared(self, task: Task, spec: HarborSpec, lower: Path, agent: AgentPhase, tmp: Path) -> Trial:
        t0 = time.monotonic()
        timeout = spec.agent_timeout_sec or 600.0
        with WritableRoot(str(lower), parent=str(tmp), force_copy=self.force_copy) as root:
            notes = [f"the shared root: {root.describe()}"]
            self.healthy(root, lower, spec, tmp)
            binds, lines, agent_env = self._agent_binds(task, agent, dict(agent.files), tmp)
            tests = _write_folder(tmp / "tests", verifier_files(task), 0o755)
            binds.append((str(tests), SHARED_TESTS_MOUNT, False))
            exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in agent_env.items())
            verifier_exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in spec.verifier_env.items())
            # The agent phase under its timeout (a watchdog in the same sandbox: shared mode is Harbor's
            # own, where the agent reaches everything, its own timeout included), then the verifier where
            # the agent ran, with whatever it left running. The watchdog says by its exit status whether
            # it fired: once its sleep is over it ignores TERM, kills the agent and exits 99; stopped
            # while it sleeps, it ends by TERM. (Asking whether it was still there to stop, as before,
            # took a watchdog that had just killed the agent and not yet exited for one that never
            # fired: a timed-out agent's work went on to the verifier on a loaded machine.)
            script = (f"( {exports}{lines or 'true'}\n) & agent=$!\n"
                      f"( sleep {timeout:g}; trap '' TERM; kill -KILL $agent 2>/dev/null; exit 99 ) & watchdog=$!\n"
                      "wait $agent\n"
                      "kill $watchdog 2>/dev/null; wait $watchdog\n"
                      "if [ $? = 99 ]; then "
                      f"echo {shlex.quote(AGENT_TIMEOUT_LINE)} >&2; exit {_AGENT_TIMEOUT_STATUS}; fi\n"
                      f"mkdir -p {TESTS_MOUNT} {VERIFIER_LOGS} && cp -R {SHARED_TESTS_MOUNT}/. {TESTS_MOUNT}/ "
                      "|| exit 125\n"
                      f"{verifier_exports}exec bash {TESTS_MOUNT}/test.sh </dev/null\n")
            run = self.run_in_root(root, lower, spec, script,
                                   user=self.user(lower, spec.agent_user or spec.verifier_user), env={},
                                   wall=timeout + spec.verifier_timeout_sec, binds=binds, scratch=tmp)
            found = root.host_path(VERIFIER_LOGS)
            logs = read_logs(found) if found is not None else {}
        total = time.monotonic() - t0
        stderr = run.stderr.head + run.stderr.tail
        if run.exit_code == _AGENT_TIMEOUT_STATUS and AGENT_TIMEOUT_LINE.encode() in stderr:
            return Trial(agent_timeout_run(f"the agent phase ran past {timeout:g}s", run.stdout.head, _BACKEND), None,
                         VerifierMode.SHARED, agent_seconds=total, notes=tuple(notes))
        result, reward = self._judge(run, logs, total, spec)
        return Trial(result, reward, VerifierMode.SHARED, agent_seconds=0.0, verifier_seconds=total,
                     notes=tuple(notes))


__all__ = ["CARRIED_MOUNT", "BwrapTrials"]
