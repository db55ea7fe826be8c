"""The docker backend's ``node`` mode: long-lived containers, each run isolated inside one.

A *node* is a container that holds an image's environment and a resource envelope: the run's
memory limit (tmpfs pages included), its process limit plus the node's own few processes, one
CPU, no network, a read-only root, every capability dropped, ``no-new-privileges``, uid 1000
and the seccomp allowlist of :mod:`.seccomp`. Its main process only sleeps; its *supervisor* is
one long-lived exec, a shell that reads a job script from its stdin, evaluates it, and waits for
the next. A job is one bwrap run, as the bwrap backend makes them (:mod:`verify_cli.sandbox.bwrap.sandbox`:
the same namespaces and the same wrapper inside): fresh user, pid, mount, network, IPC and UTS
namespaces; the image read-only; fresh size-limited tmpfs ``/workspace``, ``/tmp`` and
``/results``; a cleared environment set from the run's; the run's CPU and file-size rlimits;
and at its end every process of its pid namespace killed (the kernel takes the namespace down
with bubblewrap). The supervisor runs any bwrap argv the host writes it, so a run with other
mounts (a socket folder shared by two runs, say) needs no new container protocol.

The stream of a job, on the supervisor's stdin: the script, then the work folder as tar, then
the run's stdin. The script's ``head -c`` hands bubblewrap exactly that many bytes and drains
what the run leaves unread, so nothing of one job can be read as the next one's script. On its
stdout and stderr the run's output comes first, then a marker with a per-run secret that
nothing inside the run can see (it lives only in the supervisor, outside the run's pid and mount
namespaces): after it on stdout, the exit status, the cgroup's CPU and OOM-kill counts during
the run, the number of processes left in the container and the results folder as tar.

A node is recycled (removed; the pool starts another) after ``max_runs`` runs or on any sign of
damage: a timeout or output flood (the host kills the container to stop those), a supervisor
that died or answered out of protocol, bubblewrap failing before the command started, or any
process of a run still alive after it. Nodes are never shared between shapes (image and limits).
"""

from __future__ import annotations

import contextlib
import io
import re
import secrets
import shlex
import struct
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import IO, Any

from docker.errors import ImageNotFound
from docker.types import Ulimit

from verify_cli.sandbox.base import CANCELLED_MESSAGE, CapturedOutput, RunResult, RunSpec, Verdict
from verify_cli.sandbox.bwrap.sandbox import RUN_NAMESPACES, SANDBOX_UID, run_wrapper
from verify_cli.sandbox.docker.archives import write_workdir_tar
from verify_cli.sandbox.docker.containers import (
    COLLECT_TIMEOUT_S,
    LABEL,
    MAX_RESULTS_ARCHIVE_BYTES,
    OWNER_LABEL,
    POOL_LABEL,
    USER,
    Shape,
    base_environment,
    hardened_container,
    owner,
    tmpfs_mib,
)
from verify_cli.sandbox.docker.errors import DAEMON_ERRORS, ImageUnfit, daemon_failure
from verify_cli.sandbox.docker.execs import DockerExecs
from verify_cli.sandbox.docker.node_pool import NodePool
from verify_cli.sandbox.docker.scripts import ENV_NAME
from verify_cli.sandbox.docker.seccomp import node_profile
from verify_cli.sandbox.docker.streams import Clock, Conn, ExecOutcome, Killer, ReadyGate
from verify_cli.sandbox.docker.two_process import NESTED_PIDS, TESTS_STARTED_FILE, TRUSTED_HOME_DIR, two_process_job
from verify_cli.sandbox.docker.verdicts import copy_error, judge_run
from verify_cli.sandbox.environment import SANDBOX_HARNESS, SANDBOX_RESULTS, SANDBOX_TMP, SANDBOX_WORKDIR
from verify_cli.sandbox.local import sandbox_failure_cause
from verify_cli.sandbox.plumbing.deadlines import Deadline, arm
from verify_cli.sandbox.plumbing.judging import read_results_tar
from verify_cli.sandbox.plumbing.levers import lever_on
from verify_cli.sandbox.plumbing.output import BoundedCapture
from verify_cli.sandbox.plumbing.trusted_launch import SEAL_KEY_ENV, absolute_harness_requires, seal_key_heredoc

#: Processes of the node's own during a run: pid 1 and its sleep, the supervisor, its subshell,
#: head, the drain, bubblewrap (two) and its init in the run's pid namespace, the wrapper shell.
#: Plus the two nested bubblewraps of a two-process run (.two_process).
NODE_OWN_PIDS = 10 + NESTED_PIDS
#: What the container's own /tmp holds: the results archive of the run in flight.
NODE_TMP_MIB = 96
RESULTS_FILE = "/tmp/verify-results.tar"
START_TIMEOUT_S = 60.0
UNPACK_FAILED = 125
UNFIT = 97
_READY_LINE = b"verify-node-ready\n"
_NODE_NEEDS = ("sh, tar, head and bwrap in node mode; --docker-mode single-use runs images without "
               "bwrap")
_UNFIT_PREFIX = b"verify-node-unfit "
#: Reads the cgroup's CPU (ns into $c) and OOM-kill count ($o) with shell builtins (v1 and v2).
_COUNTERS = (
    "ctr() { c=0; o=0; "
    "if [ -r /sys/fs/cgroup/cpu.stat ]; then "
    "while read -r k v; do [ \"$k\" = usage_usec ] && c=$((v * 1000)); done < /sys/fs/cgroup/cpu.stat; "
    "elif [ -r /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then "
    "read -r c < /sys/fs/cgroup/cpuacct/cpuacct.usage; fi; "
    "for f in /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control; do "
    "[ -r \"$f\" ] && while read -r k v; do [ \"$k\" = oom_kill ] && o=$((o + v)); done < \"$f\"; "
    "done; }\n"
    # Counts the container's live processes (zombies aside) into $n. bubblewrap's setup process
    # may still be exiting as a run ends: callers retry a moment before calling it damage.
    "cnt() { n=0; for p in /proc/[0-9]*; do "
    "read -r _ _ z _ < \"$p/stat\" 2>/dev/null && [ \"$z\" != Z ] && n=$((n + 1)); done; }\n")
#: The supervisor: ``$0`` is a per-container secret that heads every job (``SECRET SIZE`` on a
#: line, then SIZE bytes of script); root has unpacked the harness before it starts
#: (``NodeEngine._install_harness``). It checks that bubblewrap can make a run's namespaces here,
#: says it is ready, then evaluates one job script after another; a job out of step ends it.
_SUPERVISOR = (
    _COUNTERS
    + "if ! e=$(bwrap " + " ".join(RUN_NAMESPACES)
    + " --ro-bind / / --proc /proc --dev /dev true 2>&1); then "
    + "printf 'verify-node-unfit %s\\n' \"$e\"; exit " + str(UNFIT) + "; fi\n"
    + "printf 'verify-node-ready\\n'\n"
    + "while read -r k l; do [ \"$k\" = \"$0\" ] || exit 0; s=$(head -c \"$l\") || exit 0; "
    + "eval \"$s\"; done\n")


#: pid 1 of a node: reaps what bubblewrap's intermediate processes leave to it (a bare ``sleep``
#: would let zombies pile up against the process limit). Its own processes: the shell and sleep.
#: Once it has been alone in the container on two checks in a row (the supervisor is gone: the
#: process that made the node was killed and the daemon closed the supervisor's stdin), it
#: exits, and the container with it: a node outlives its process by seconds, holding nothing.
_INIT = ("trap 'exit 0' TERM; a=0; while :; do sleep 5 & wait; "
         "n=0; for p in /proc/[0-9]*; do n=$((n + 1)); done; "
         "if [ $n -le 1 ]; then a=$((a + 1)); [ $a -ge 2 ] && exit 0; else a=0; fi; done")
#: Processes alive between runs: pid 1, its sleep and the supervisor; more means a run escaped.
_BASELINE_PROCESSES = 3
#: Re-arming a node (uid 1000, the supervisor's user): SIGKILL to every process this user may
#: signal but pid 1 (``kill -1`` spares it and the caller: the old supervisor and anything of
#: it, init's sleep at worst, which init restarts), then wait until no more live processes are
#: left (``cnt``, as the job script counts them) than pid 1, its sleep and this shell.
_CLEAR_NODE = (_COUNTERS + "kill -9 -1 2>/dev/null; i=0; while :; do cnt; "
               "[ $n -le 3 ] && exit 0; i=$((i + 1)); [ $i -ge 500 ] && exit 1; sleep 0.01; done")


@dataclass
class Node:
    """A started container whose supervisor waits for jobs; used by one run at a time."""

    container_id: str
    shape: Shape
    conn: Conn
    nonce: str
    digest: str
    runs: int = 0
    #: How its last run's candidate started, as a warm node reports it ("warm", "cold"; "" for
    #: a run without one, or a node that does not say).
    last_candidate: str = ""


@dataclass
class _Trailer:
    status: int
    cpu_ns: int
    oom_kills: int
    processes: int
    results: dict[str, bytes]
    #: The results archive was over MAX_RESULTS_ARCHIVE_BYTES (the run wrote into the channel
    #: its wrapper holds open: its /proc entry is the run's); the stream is out of step.
    flooded: bool = False
    #: How the run's candidate started (warm nodes say it: "warm", "cold"); "" otherwise.
    candidate: str = ""


def bwrap_argv(spec: RunSpec, *, env: dict[str, str]) -> list[str]:
    """The bubblewrap command line of one run inside a node: the bwrap backend's namespaces, the
    image read-only, fresh tmpfs work, temporary and results folders sized as a single-use
    container's (fractions of the memory limit), and the run's environment only."""
    mem = spec.limits.memory_mb
    argv = ["bwrap", *RUN_NAMESPACES, "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--hostname", "sandbox", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    for path in (SANDBOX_TMP, SANDBOX_WORKDIR, SANDBOX_RESULTS):
        argv += ["--size", str(tmpfs_mib(path, mem) * 1024 * 1024)]
        argv += ["--perms", "1777" if path == SANDBOX_TMP else "0755", "--tmpfs", path]
    if spec.candidate is not None:  # the trusted side's home: never in the candidate's sandbox
        argv += ["--size", str(1 << 20), "--perms", "0700", "--tmpfs", TRUSTED_HOME_DIR]
    argv.append("--clearenv")
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return [*argv, "--chdir", SANDBOX_WORKDIR, "--"]


def job_script(spec: RunSpec, marker: str, nonce: str, tar_bytes: int, stdin_bytes: int) -> bytes:
    """What the supervisor reads for one run: the ``nonce SIZE`` line, then the script it
    evaluates (every value shell-quoted)."""
    limits = spec.limits
    source = "" if not stdin_bytes else f"head -c {tar_bytes} | "
    # A two-process run (spec.candidate) lays the work folder out for two sandboxes (.two_process).
    two = two_process_job(spec) if spec.candidate is not None else None
    wrapper = run_wrapper(
        unpack=("(echo 1000 > /proc/self/oom_score_adj) 2>/dev/null\n"
                + (two.before_unpack if two else "")
                + f"e=$({source}TAR_OPTIONS= tar -x -f - -C {two.unpack_into if two else SANDBOX_WORKDIR} 2>&1) || "
                f"{{ printf '\\002%s\\n' \"$e\" >&2; exit {UNPACK_FAILED}; }}"
                + ("\n" + two.after_unpack.rstrip("\n") if two else "")),
        ready="printf '\\001' >&2\n", close_fds=" 3>&-", results_to="&3")
    env = {**base_environment(), **spec.env, **(two.env if two else {})}
    key_doc = seal_key_heredoc(env)  # the key on a descriptor of bwrap's, in no environment
    if env.get("NODE_OPTIONS"):  # preloads by absolute path, never looked up from the work folder
        env["NODE_OPTIONS"] = absolute_harness_requires(env["NODE_OPTIONS"], SANDBOX_HARNESS)
    # The wrapper shell drops variables whose names a shell cannot hold; env(1) restores them.
    odd = [f"{name}={value}" for name, value in spec.env.items()
           if not ENV_NAME.match(name) and name != SEAL_KEY_ENV]
    command = ["env", "--", *odd, *spec.command] if odd else list(spec.command)
    if two:
        command = [*two.command_prefix, *command]
    argv = [*bwrap_argv(spec, env=env), "/bin/sh", "-c", wrapper, "sh", *command]
    rlimits = [f"ulimit -f {max(1, limits.file_bytes // 512)}"]
    if limits.cpu_seconds is not None:
        secs = max(1, int(limits.cpu_seconds + 0.999))
        # Soft first: a hard limit below the current (unlimited) soft one is refused, and the
        # shell's complaint would come before the ready byte (an infra error).
        rlimits += [f"ulimit -S -t {secs}", f"ulimit -H -t {secs + 1}"]
    total = tar_bytes + stdin_bytes
    lines = [
        f"m={marker}",
        "ctr; c0=$c; o0=$o",
        "( " + "; ".join(rlimits) + f"; head -c {total} | "
        f"{{ {' '.join(shlex.quote(a) for a in argv)}; s=$?; cat >/dev/null; exit $s; }} "
        f") 3>{RESULTS_FILE}{key_doc}",
        "st=$?",
        "ctr",
        f"cnt; i=0; while [ $n -gt {_BASELINE_PROCESSES} ] && [ $i -lt 50 ]; do "
        "sleep 0.01; i=$((i + 1)); cnt; done",
        "printf '\\n%s\\n' \"$m\" >&2",
        "printf '\\n%s %s %s %s %s\\n' \"$m\" \"$st\" \"$((c - c0))\" \"$((o - o0))\" \"$n\"",
        f"set -- $(wc -c < {RESULTS_FILE}); printf '%s\\n' \"${{1:-0}}\"; cat {RESULTS_FILE}",
    ]
    script = ("\n".join(lines) + "\n").encode()
    return f"{nonce} {len(script)}\n".encode() + script


class _Splitter:
    """Forwards a stream to ``sink`` up to ``token`` (which starts with a newline; no part of it
    is forwarded), then keeps what follows in ``rest``."""

    def __init__(self, token: bytes, sink: Callable[[bytes], None]) -> None:
        self.token = token
        self.sink = sink
        self.pending = b""
        self.done = False
        self.rest = bytearray()

    def feed(self, data: bytes) -> None:
        if self.done:
            self.rest += data
            return
        buf = self.pending + data
        at = buf.find(self.token)
        if at >= 0:
            if at:
                self.sink(buf[:at])
            self.done = True
            self.pending = b""
            self.rest += buf[at + len(self.token):]
            return
        # Hold back only a tail that may begin the token (it starts with a newline): a quiet
        # stream's bytes (the ready byte above all) must reach the sink at once.
        keep_from = len(buf)
        at = buf.find(b"\n", max(0, len(buf) - len(self.token) + 1))
        while at >= 0:
            if self.token.startswith(buf[at:]):
                keep_from = at
                break
            at = buf.find(b"\n", at + 1)
        if keep_from:
            self.sink(buf[:keep_from])
        self.pending = buf[keep_from:]


#: ``STATUS CPU_NS OOM_KILLS PROCESSES [CANDIDATE]`` then the results archive's size.
_TRAILER = re.compile(rb"(\d+) (-?\d+) (-?\d+) (\d+)(?: (warm|cold))?\n(\d+)\n")


def _read_job(reader: IO[bytes], out: _Splitter, err: _Splitter, on_end: Callable[[], None],
              stop: Callable[[], bool]) -> _Trailer | None:
    """Pump the supervisor's frames for one job; the trailer, or None when the stream broke."""
    ended = False
    try:
        while not stop():
            if out.done and err.done:
                if not ended:
                    ended = True
                    on_end()
                match = _TRAILER.match(bytes(out.rest[:200]))
                if match is not None:
                    size = int(match.group(6))
                    if size > MAX_RESULTS_ARCHIVE_BYTES:
                        return _Trailer(int(match.group(1)), int(match.group(2)),
                                        int(match.group(3)), int(match.group(4)), {}, flooded=True)
                    if len(out.rest) >= match.end() + size:
                        if len(out.rest) > match.end() + size:
                            return None  # more than the protocol allows: out of step
                        data = bytes(out.rest[match.end():])
                        return _Trailer(int(match.group(1)), int(match.group(2)),
                                        int(match.group(3)), int(match.group(4)),
                                        read_results_tar(io.BytesIO(data), stream=False),
                                        candidate=(match.group(5) or b"").decode())
                elif len(out.rest) > 200:
                    return None
            header = reader.read(8)
            if len(header) < 8:
                return None
            kind, size = struct.unpack(">BxxxL", header)
            while size:
                data = reader.read(min(size, 65536))
                if not data:
                    return None
                size -= len(data)
                if kind == 1:
                    out.feed(data)
                elif kind == 2:
                    err.feed(data)
    except (OSError, ValueError):
        return None  # the connection was shut down by a kill
    return None


def node_container(api: Any, shape: Shape, digest: str) -> dict[str, Any]:
    """``create_container``'s arguments for a node of ``shape`` made from the image ``digest``:
    the hardening every container gets, with bubblewrap's needs on top (user namespaces through
    the seccomp allowlist, a fresh /proc under unmasked system paths)."""
    return hardened_container(
        api, digest, ["/bin/sh", "-c", _INIT, "verify-node-init"],
        memory_mb=shape.memory_mb, pids_limit=shape.processes + NODE_OWN_PIDS,
        # The harness folder is root's (filled by a root exec once the node has started).
        # /dev/mqueue (the container's IPC namespace's, which a warm run's view keeps) is covered
        # by an empty root-owned tmpfs: a run's message queues live in the run's own IPC namespace.
        tmpfs={SANDBOX_TMP: f"size={NODE_TMP_MIB}m,mode=1777",
               SANDBOX_HARNESS: "size=8m,mode=0755",
               "/dev/mqueue": "size=4k,mode=0755"},
        ulimits=[Ulimit(name="core", soft=0, hard=0)],
        labels={LABEL: "1", OWNER_LABEL: owner(), POOL_LABEL: "node"}, working_dir="/",
        seccomp_profile=node_profile(), unmask_system_paths=True)


class NodeEngine(DockerExecs):
    """Runs specs on pooled nodes; the docker backend's default mode."""

    def __init__(self, api: Any, backend: str, harness: bytes, digest_of: Callable[[str], str],
                 remove: Callable[[str], None], *, max_nodes: int, idle_s: float,
                 max_runs: int) -> None:
        self._api = api
        self._backend = backend
        #: The harness, unpacked by root into the node's root-owned harness folder before the
        #: supervisor starts (never by the supervisor, uid 1000): a folder uid 1000 could write
        #: to would be writable by every run (uid 1000 too), and what one run planted there (a
        #: ``sitecustomize.py`` on the runs' PYTHONPATH, a changed harness module) would reach
        #: the next.
        self._harness = harness
        self._digest_of = digest_of
        self._remove = remove
        self.pool: NodePool[Node] = NodePool(self._create, self._destroy, max_nodes=max_nodes,
                                             idle_s=idle_s, max_runs=max_runs, rearm=self._rearm)

    # -- nodes -----------------------------------------------------------------------------------

    def _create(self, shape: Shape) -> Node:
        digest = self._digest_of(shape.image)  # raises ImageNotFound first, before any container
        # Made from the digest it records, not the name: a name re-tagged meanwhile (an image
        # rebuilt) would run one image and record another.
        container_id: str = self._api.create_container(**node_container(self._api, shape, digest))["Id"]
        try:
            self._api.start(container_id)
            self._install_harness(container_id, shape.image)
            conn, nonce = self._start_supervisor(container_id, shape)
        except BaseException:
            self._remove_now(container_id)
            raise
        return Node(container_id, shape, conn, nonce, digest)

    def _start_supervisor(self, container_id: str, shape: Shape) -> tuple[Conn, str]:
        """``shape``'s supervisor in the container, with a new job secret, once it says it is
        ready: its connection and the secret (the connection is closed if it never is)."""
        nonce = f"verify-job-{secrets.token_hex(12)}"
        argv, env = self._supervisor(shape, nonce)
        _, conn = self._start_exec(container_id, argv, user=USER, env=env, workdir="/")
        try:
            self._await_ready(shape.image, conn, nonce)
        except BaseException:
            conn.close()
            raise
        return conn, nonce

    def _rearm(self, node: Node, shape: Shape) -> Node:
        """``node`` (idle, so only its own processes are alive) serving ``shape``, whose container
        is the same (image and limits: :meth:`Shape.container`) and whose supervisor is not: the
        old supervisor's stdin is closed, every process of the supervisor's user but pid 1 is
        killed and gone, and ``shape``'s supervisor starts, with a new job secret, as in
        :meth:`_create`. The container, its root-owned harness folder and its limits stay. Raises
        when the node cannot be re-armed (the pool then removes it and starts a new one)."""
        if node.shape.container() != shape.container():
            raise ValueError("a node is re-armed only for a shape of the same container")
        node.conn.close()
        said = BoundedCapture(4096)
        outcome = self._exec(node.container_id, ["/bin/sh", "-c", _CLEAR_NODE], user=USER, feed=None,
                             stdout=said, stderr=said, timeout_s=START_TIMEOUT_S)
        if outcome.exit_code != 0:
            raise RuntimeError(f"the node's processes did not end ({outcome}): {said.result().text[-300:]}")
        conn, nonce = self._start_supervisor(node.container_id, shape)
        return Node(node.container_id, shape, conn, nonce, node.digest, runs=node.runs)

    def _install_harness(self, container_id: str, image: str) -> None:
        """The harness in the node's root-owned harness folder (see ``_unpack_harness``)."""
        ok, said = self._unpack_harness(container_id, self._harness)
        if not ok:
            raise ImageUnfit(image, "could not unpack the harness into the node (the image "
                                    f"needs tar): {said[-500:]}")

    def _supervisor(self, shape: Shape, nonce: str) -> tuple[list[str], dict[str, str]]:
        """The node's supervisor exec (argv, environment): the job shell (warm nodes: see
        :mod:`.warm_nodes`)."""
        return (["/bin/sh", "-c", _SUPERVISOR, nonce],
                {"PATH": "/usr/local/bin:/usr/bin:/bin"})

    def _await_ready(self, image: str, conn: Conn, nonce: str) -> None:
        said = b""
        conn.sock.settimeout(START_TIMEOUT_S)
        try:
            while _READY_LINE not in said:
                header = conn.reader.read(8)
                if len(header) < 8:
                    # The shell names itself by its $0, the node's job secret: not for reports.
                    text = said.removeprefix(_UNFIT_PREFIX).decode("utf-8", "replace")
                    raise ImageUnfit(image, "bubblewrap could not make a run's namespaces in it: "
                                            + text.replace(nonce, "node"), needs=_NODE_NEEDS)
                _kind, size = struct.unpack(">BxxxL", header)
                said += conn.reader.read(size)
                if len(said) > 65536:
                    raise ImageUnfit(image, said[-500:].decode("utf-8", "replace").replace(nonce, "node"),
                                     needs=_NODE_NEEDS)
        finally:
            conn.sock.settimeout(None)

    def _destroy(self, node: Node) -> None:
        node.conn.close()
        self._remove(node.container_id)

    # -- runs ------------------------------------------------------------------------------------

    def run(self, spec: RunSpec) -> RunResult:
        assert spec.image is not None
        shape = Shape.of(spec.image, spec.limits)
        try:
            node = self.pool.acquire(shape)
        except (ImageNotFound, ImageUnfit) as e:
            return daemon_failure(self._backend, e, spec.image)
        except DAEMON_ERRORS as e:
            return daemon_failure(self._backend, e, spec.image)
        healthy = False
        try:
            result, healthy = self._run_on(node, spec)
        except DAEMON_ERRORS as e:
            result = daemon_failure(self._backend, e, spec.image)
        finally:
            node.runs += 1
            self.pool.release(node, healthy=healthy)
        return replace(result, image_digest=node.digest)

    def _run_on(self, node: Node, spec: RunSpec,
                job: Callable[[str, int], tuple[bytes, bytes]] | None = None
                ) -> tuple[RunResult, bool]:
        """``job(marker, tar_bytes)``: what goes before and after the work folder on the
        supervisor's stdin (default: the job shell's script, then the run's stdin; warm nodes
        send theirs)."""
        limits = spec.limits
        killer = Killer(self._api, node.container_id)
        killer.watch(node.conn.sock)
        stdout = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer.kill("output"))
        stderr = BoundedCapture(limits.output_bytes, on_exceed=lambda: killer.kill("output"))
        gate = ReadyGate(stderr)
        marker = secrets.token_hex(16)
        stdin = spec.stdin or b""
        with tempfile.SpooledTemporaryFile(8 * 1024 * 1024) as archive:
            write_workdir_tar(archive, spec.workdir)
            tar_bytes = archive.tell()
            archive.seek(0)
            if job is None:
                script, tail = job_script(spec, marker, node.nonce, tar_bytes, len(stdin)), stdin
            else:
                script, tail = job(marker, tar_bytes)
            clock = Clock(killer, limits.wall_seconds, gated=True)
            gate.on_ready = clock.ready
            writer: threading.Thread | None = None
            if lever_on("docker-host-threads") and job is not None and tar_bytes <= INLINE_JOB_BYTES:
                # A warm node reads the whole job before its run can write a byte: sent from
                # here, no thread (the copy limit's kill shuts the socket if it sticks).
                _send_job(node.conn.sock, script, archive, tail)
            else:
                writer = threading.Thread(target=_send_job, args=(node.conn.sock, script, archive, tail),
                                          daemon=True, name="verify-docker-job")
                writer.start()
            seconds: list[float] = []
            collect: Deadline | threading.Timer | None = None

            def on_end() -> None:
                nonlocal collect
                seconds.append(clock.stop())
                collect = arm(COLLECT_TIMEOUT_S, killer.kill, "collect")

            unsubscribe = (spec.cancel.subscribe(lambda: killer.kill("cancelled"))
                           if spec.cancel is not None else None)

            out = _Splitter(f"\n{marker} ".encode(), stdout.feed)
            err = _Splitter(f"\n{marker}\n".encode(), gate.feed)
            try:
                trailer = _read_job(node.conn.reader, out, err, on_end,
                                    stop=lambda: killer.reason is not None)
            finally:
                elapsed = seconds[0] if seconds else clock.stop()
                if collect is not None:
                    collect.cancel()
                if unsubscribe is not None:
                    unsubscribe()
            if writer is not None:
                writer.join(timeout=5)
        node.last_candidate = trailer.candidate if trailer is not None else ""
        # The job shell's two-process runs mark their tests' start (two_process.trusted_argv);
        # a warm node's job starts the tests itself.
        return self._judge(node, spec, trailer, killer, gate, elapsed, stdout, stderr, tests_mark=job is None)

    def _judge(self, node: Node, spec: RunSpec, trailer: _Trailer | None, killer: Killer,
               gate: ReadyGate, elapsed: float, stdout: BoundedCapture,
               stderr: BoundedCapture, *, tests_mark: bool = True) -> tuple[RunResult, bool]:
        name = self._backend
        if killer.reason == "cancelled":  # the node was killed with the run: it goes
            return RunResult(Verdict.INFRA_ERROR, name, wall_seconds=elapsed, stdout=stdout.result(),
                             stderr=stderr.result(), message=CANCELLED_MESSAGE), False
        if killer.reason in ("output", "timeout"):
            verdict, _, message = judge_run(ExecOutcome(None, killer.reason, elapsed), None,
                                             False, spec.limits, stderr.result())
            return RunResult(verdict, name, wall_seconds=elapsed, stdout=stdout.result(),
                             stderr=stderr.result(), message=message), False
        if not gate.ready:
            text = gate.setup_text()
            if killer.reason == "copy":
                return RunResult(Verdict.SETUP_ERROR, name, message=(
                    "could not copy the work folder into the container: timed out")), False
            if trailer is not None and trailer.status == UNPACK_FAILED and text:
                return RunResult(Verdict.SETUP_ERROR, name,
                                 message=copy_error(text, spec.limits)), trailer.processes <= _BASELINE_PROCESSES
            return RunResult(Verdict.INFRA_ERROR, name, message=(
                "the node's bubblewrap failed before the command started "
                f"(exit {None if trailer is None else trailer.status}): {text[-500:]}")), False
        if trailer is None:
            # The supervisor died or the stream broke mid-run: the OOM killer (the daemon saw
            # it) or damage. The node goes either way.
            if self._oom_reported(node.container_id):
                return RunResult(Verdict.MEMORY_LIMIT, name, wall_seconds=elapsed,
                                 stdout=stdout.result(), stderr=stderr.result(), message=(
                                     f"ran out of memory under the limit of "
                                     f"{spec.limits.memory_mb} MiB")), False
            return RunResult(Verdict.INFRA_ERROR, name, wall_seconds=elapsed,
                             stdout=stdout.result(), stderr=stderr.result(),
                             message="the node's supervisor died during the run; the container "
                                     "was recycled"), False
        if trailer.flooded:  # as the bwrap backend judges a flooded results channel
            return RunResult(Verdict.OUTPUT_LIMIT, name, exit_code=trailer.status,
                             wall_seconds=elapsed, cpu_seconds=max(0, trailer.cpu_ns) / 1e9,
                             stdout=stdout.result(), stderr=stderr.result(), message=(
                                 f"the results folder's archive exceeded "
                                 f"{MAX_RESULTS_ARCHIVE_BYTES} bytes")), False
        err: CapturedOutput = stderr.result()
        results = dict(trailer.results)
        started = results.pop(TESTS_STARTED_FILE, None) is not None
        if spec.candidate is not None and tests_mark and not started:
            # The tests' nested sandbox never began (its bwrap or the no-links namespace failed):
            # nothing of the tests ran, whatever the exit status says.
            return RunResult(Verdict.INFRA_ERROR, name, exit_code=trailer.status, wall_seconds=elapsed,
                             stdout=stdout.result(), stderr=err, message=(
                                 "the sandbox did not start (the tests' nested sandbox never began): "
                                 f"{sandbox_failure_cause(err)}")), trailer.processes <= _BASELINE_PROCESSES
        verdict, sig, message = judge_run(ExecOutcome(trailer.status, None, elapsed),
                                          trailer.status, trailer.oom_kills > 0, spec.limits, err)
        result = RunResult(verdict, name, exit_code=trailer.status, signal=sig,
                           wall_seconds=elapsed, cpu_seconds=max(0, trailer.cpu_ns) / 1e9,
                           stdout=stdout.result(), stderr=err, results=results,
                           message=message)
        # Anything but the node's own processes alive now escaped its run: recycle.
        return result, trailer.processes <= _BASELINE_PROCESSES

    def close(self) -> None:
        self.pool.close()


#: A warm job whose work folder is at most this is sent from the run's own thread.
INLINE_JOB_BYTES = 1 << 20


def _send_job(sock: Any, script: bytes, archive: IO[bytes], stdin: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):
        sock.sendall(script)
        while chunk := archive.read(1 << 16):
            sock.sendall(chunk)
        if stdin:
            sock.sendall(stdin)


__all__ = ["Node", "NodeEngine", "bwrap_argv", "job_script"]
