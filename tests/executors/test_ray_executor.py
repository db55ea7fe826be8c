"""The ray executor on a real two-node Ray cluster (head: 1 sandbox slot, worker: 2).

check-tasks gives the same verdicts on ray as on local; work lands on both nodes and no node runs
more sandboxes than its slots; killing a sandbox-pool actor mid-run loses no run and scores none
wrongly; ``cluster status`` shows both nodes.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DEFECTIVE_TASKS, SAMPLE_TASKS
from tests.executors.conftest import LocalRayCluster
from verify_cli.cli.app import main
from verify_cli.executors import ExecutorUnavailableError
from verify_cli.grading import GradeRequest, GradeStatus, Phase
from verify_cli.tasks import load_task

# One cluster for the module: under xdist (--dist loadfile, scripts/test.sh) these tests share one worker.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.xdist_group("ray-cluster")]


@pytest.fixture(scope="module")
def task_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample tasks plus two defective ones, so that the verdicts to compare are not all alike."""
    root = tmp_path_factory.mktemp("tasks")
    for src in sorted(p for p in SAMPLE_TASKS.iterdir() if p.is_dir()):
        shutil.copytree(src, root / src.name)
    for name in ("reference-fails", "starter-passes"):
        shutil.copytree(DEFECTIVE_TASKS / name, root / name)
    return root


def _check_tasks(path: Path, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code = main(["check-tasks", str(path), "--no-cache", "--repeats", "1", "--json", str(out), *extra])
    return code, json.loads(out.read_text())


def _verdicts(report: dict[str, Any]) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    return {t["task_id"]: (t["verdict"], sorted((c["name"], c["status"]) for c in t["checks"]))
            for t in report["tasks"]}


def test_check_tasks_gives_the_same_verdicts_on_ray_as_on_local(
        ray_cluster: LocalRayCluster, task_set: Path, tmp_path: Path) -> None:
    local_code, local = _check_tasks(task_set, tmp_path / "local.json", "--jobs", "2")
    ray_code, on_ray = _check_tasks(task_set, tmp_path / "ray.json", "--executor", "ray",
                                    "--ray-address", ray_cluster.address)
    assert local_code == ray_code == 1  # the two defective tasks
    assert _verdicts(on_ray) == _verdicts(local)
    verdicts = Counter(v for v, _ in _verdicts(on_ray).values())
    assert verdicts == {"sound": 11, "defective": 2}
    assert on_ray["executor"] == "ray" and on_ray["sandbox"]["backend"] == local["sandbox"]["backend"]
    # Every run names its node, and the work landed on both nodes.
    nodes = Counter(run["node"] for t in on_ray["tasks"] for run in t["runs"])
    assert "" not in nodes and len(nodes) == 2, nodes
    assert {n.split("/")[1] for n in nodes} == {ray_cluster.head_node_id[:8], ray_cluster.worker_node_id[:8]}
    assert all("node" not in run for t in local["tasks"] for run in t["runs"])


def _requests(*, starters: bool = True) -> list[GradeRequest]:
    tasks = [load_task(p) for p in sorted(SAMPLE_TASKS.iterdir()) if (p / "task.toml").is_file()]
    out = []
    for task in tasks:
        out.append(GradeRequest(task, Phase.REFERENCE, seed=1, label=f"ref:{task.id}"))
        if starters:
            out.append(GradeRequest(task, Phase.STARTER, label=f"starter:{task.id}"))
    return out


def test_killing_a_pool_actor_mid_run_loses_no_run_and_scores_none_wrongly(ray_cluster: LocalRayCluster) -> None:
    import ray

    from verify_cli.executors.ray_executor import RayExecutor

    requests = _requests()
    killed: list[str] = []
    results = []
    with RayExecutor(ray_cluster.address, sandbox="auto") as executor:
        for result in executor.grade_many(requests):
            results.append(result)
            if not killed:
                # Kill the actor with the most runs queued or running on it, mid-stream.
                busy = executor.in_flight()
                victim = max(busy, key=lambda node: busy[node])
                assert busy[victim] > 0
                ray.kill(executor.pool_actor(victim), no_restart=True)
                killed.append(victim)
        stats = executor.stats
    labels = Counter(r.label for r in results)
    assert set(labels) == {r.label for r in requests} and set(labels.values()) == {1}
    assert stats.requeued >= 1 and stats.actor_restarts == 1 and stats.lost == 0
    for r in results:
        assert r.status is GradeStatus.GRADED, (r.label, r.problems)
        if r.phase is Phase.REFERENCE:
            assert r.passed and r.score == 1.0, (r.label, r.problems)
        else:
            assert not r.passed, r.label
    # The node whose actor was killed got a new actor and kept working.
    assert killed[0][:8] in {r.node.split("/")[1] for r in results[1:]}


def test_no_node_runs_more_sandboxes_than_its_slots(ray_cluster: LocalRayCluster) -> None:
    import ray

    from verify_cli.executors.ray_executor import RayExecutor

    with RayExecutor(ray_cluster.address, sandbox="auto") as executor:
        results = list(executor.grade_many(_requests(starters=False)))
        peaks = {node.node_id: ray.get(executor.pool_actor(node.node_id).stats.remote())["peak"]
                 for node in executor.nodes}
    assert all(r.status is GradeStatus.GRADED for r in results)
    assert peaks[ray_cluster.head_node_id] <= 1
    assert peaks[ray_cluster.worker_node_id] <= 2
    assert peaks[ray_cluster.worker_node_id] == 2  # and the slots are used


def test_cluster_status_shows_both_nodes(ray_cluster: LocalRayCluster, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "status", "--ray-address", ray_cluster.address, "--json", "-"]) == 0
    status = json.loads(capsys.readouterr().out)
    nodes = {n["node_id"]: n for n in status["nodes"]}
    assert {nid: n["slots"] for nid, n in nodes.items()} == ray_cluster.slots
    for n in nodes.values():
        assert n["alive"] and n["backends"]["process"] == "available" and not n["problem"]


def test_a_backend_no_node_has_is_a_clear_error(ray_cluster: LocalRayCluster) -> None:
    from verify_cli.errors import UsageError
    from verify_cli.executors.ray_executor import RayExecutor
    from verify_cli.sandbox.registry import SandboxSpec

    with pytest.raises(UsageError, match="unknown sandbox backend 'no-such-backend'"):
        RayExecutor(ray_cluster.address, sandbox="no-such-backend")  # known here: checked before any node
    with pytest.raises(ExecutorUnavailableError, match="no node of the Ray cluster could start a sandbox pool"):
        RayExecutor(ray_cluster.address, sandbox=SandboxSpec("no-such-backend"))  # say, a plugin only here


def test_a_node_that_keeps_failing_is_drained_and_its_work_finishes_elsewhere(ray_cluster: LocalRayCluster) -> None:
    import ray

    from verify_cli.executors.ray_executor import RayExecutor

    requests = _requests()
    results = []
    killed: list[Any] = []
    with RayExecutor(ray_cluster.address, sandbox="auto", drain_after=2) as executor:
        victim = ray_cluster.worker_node_id
        done = threading.Event()

        def kill_the_replacement() -> None:
            # The replacement dies as soon as it is there, before it can finish a run (a success
            # would end the node's failure streak; under load the stream may take a while to
            # yield again after the first death).
            while not done.is_set():
                actor = executor.pool_actor(victim)
                if killed and actor not in killed:
                    ray.kill(actor, no_restart=True)
                    killed.append(actor)
                    return
                time.sleep(0.005)

        watcher = threading.Thread(target=kill_the_replacement, daemon=True)
        watcher.start()
        for result in executor.grade_many(requests):
            results.append(result)
            actor = executor.pool_actor(victim)
            if not killed and executor.in_flight()[victim] > 0:
                ray.kill(actor, no_restart=True)  # its actor dies with work in flight
                killed.append(actor)
        done.set()
        watcher.join()
        stats = executor.stats
    assert len(killed) == 2
    victim_name = next(n.name for n in executor.nodes if n.node_id == victim)
    assert stats.drained == [victim_name] and stats.actor_restarts == 1 and stats.lost == 0
    assert sorted(r.label for r in results) == sorted(r.label for r in requests)
    for r in results:
        assert r.status is GradeStatus.GRADED and r.passed is (r.phase is Phase.REFERENCE), (r.label, r.problems)
    assert results[-1].node.split("/")[1] == ray_cluster.head_node_id[:8]


def _audit(out: Path, *extra: str) -> dict[str, Any]:
    main(["audit", str(DEFECTIVE_TASKS / "weak-tests"), "--reruns", "1", "--max-mutants", "4",
          "--probe", "always-equal", "--probe", "planted-conftest", "--fail-under", "90", "--json", str(out), *extra])
    return json.loads(out.read_text())


def test_audit_finds_the_same_on_ray_as_on_local(ray_cluster: LocalRayCluster, tmp_path: Path) -> None:
    local = _audit(tmp_path / "local.json")
    on_ray = _audit(tmp_path / "ray.json", "--executor", "ray", "--ray-address", ray_cluster.address)

    def findings(report: dict[str, Any]) -> list[Any]:
        return [(t["verdict"], t["mutation"]["killed"], t["mutation"]["survived"], t["mutation"]["total"],
                 sorted((p["name"], p["hacked"], p["score"], p["passed_tests"]) for p in t["probes"]),
                 t["flakiness"]["flaky"])
                for t in report["tasks"]]

    assert findings(on_ray) == findings(local)
    assert on_ray["summary"] == local["summary"] == {"reliable": 0, "unreliable": 1, "error": 0,
                                                     "not_gradeable_two_process": 0}


# --- sessions and agent episodes on the cluster ------------------------------------------------------


def test_sessions_spread_over_both_nodes_and_keep_their_state(ray_cluster: LocalRayCluster) -> None:
    from verify_cli.executors.ray_executor import RayExecutor
    from verify_cli.sandbox.sessions.base import SessionDeadError, SessionFileError, SessionLimits

    with RayExecutor(ray_cluster.address, sandbox="auto") as executor:
        sessions = [executor.open_session({"seed.txt": b"seed\n"}, SessionLimits(command_seconds=30))
                    for _ in range(3)]
        try:
            # least loaded first: the worker (2 slots) holds two, the head (1 slot) one
            on = Counter(s.node.split("/")[1] for s in sessions)
            assert on == {ray_cluster.worker_node_id[:8]: 2, ray_cluster.head_node_id[:8]: 1}
            assert executor.sessions_open() == {ray_cluster.worker_node_id: 2, ray_cluster.head_node_id: 1}
            for i, s in enumerate(sessions):
                s.write_file("mine.txt", f"session {i}\n")
                assert s.exec("echo step1 >> log; pwd > where").ok
            for i, s in enumerate(sessions):  # the state of each call is there at the next, and only there
                result = s.exec("echo step2 >> log; cat log mine.txt; ls")
                assert result.ok, result
                lines = result.stdout.text.split()
                assert lines[:3] == ["step1", "step2", "session"] and lines[3] == str(i)
                assert s.read_file("where").decode().strip() == s.workdir
                assert sorted(s.snapshot(["*"])) == ["log", "mine.txt", "seed.txt", "where"]
                assert [e.path for e in s.list_files()] == ["log", "mine.txt", "seed.txt", "where"]
                with pytest.raises(SessionFileError):  # the session's own errors come back typed
                    s.read_file("no-such-file")
        finally:
            for s in sessions:
                s.close()
        assert executor.sessions_open() == {ray_cluster.worker_node_id: 0, ray_cluster.head_node_id: 0}
        with pytest.raises(SessionDeadError):
            sessions[0].read_file("log")


class _KillsItsNode:
    """An agent model that, before its ``at``-th turn of the first run, kills the sandbox-pool
    actor holding the one open session (its node lost mid-episode)."""

    name = "kills-its-node"

    def __init__(self, inner: Any, executor: Any, killed: list[str], at: int = 1) -> None:
        self.inner, self.executor, self.killed, self.at = inner, executor, killed, at

    def act(self, messages: Any, tools: Any, params: Any) -> Any:
        import ray

        turn = sum(1 for m in messages if m["role"] == "assistant")
        if turn == self.at and not self.killed:
            held = [node for node, n in self.executor.sessions_open().items() if n]
            assert len(held) == 1, held
            ray.kill(self.executor.pool_actor(held[0]), no_restart=True)
            self.killed.append(held[0])
        return self.inner.act(messages, tools, params)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def policy_server() -> Any:
    from tests.agents.conftest import PolicyServer

    server = PolicyServer()
    yield server
    server.close()


def _solving_model(server: Any, name: str) -> Any:
    from tests.agents.conftest import scripted
    from verify_cli.agents.protocol import agent_model
    from verify_cli.models.registry import create_model_backend

    task = load_task(SAMPLE_TASKS / "coding-roman-numerals")
    steps: list[Any] = [[("bash", {"command": "echo noted > note"})], [("bash", {"command": "cat note"})],
                        [("write_file", {"path": rel, "content": p.read_text()})
                         for rel, p in sorted(task.solution_files().items())],
                        [("run_tests", {})], [("submit", {})]]
    server.policies[name] = scripted(steps)
    return agent_model(create_model_backend("openai", model=name, base_url=server.base_url, max_retries=0))


def test_a_node_lost_mid_episode_is_infra_error_then_requeued_elsewhere_and_passes(
        ray_cluster: LocalRayCluster, policy_server: Any) -> None:
    from verify_cli.agents.episode import EpisodeJob, run_episode, run_episodes
    from verify_cli.executors.ray_executor import RayExecutor

    task = load_task(SAMPLE_TASKS / "coding-roman-numerals")
    with RayExecutor(ray_cluster.address, sandbox="auto") as executor:
        # One episode, its node lost at its second turn: infra_error, never scored.
        killed: list[str] = []
        lost = run_episode(task, _KillsItsNode(_solving_model(policy_server, "lost"), executor, killed), executor)
        assert killed and lost.node.split("/")[1] == killed[0][:8]
        assert (lost.status, lost.score, lost.end_reason, lost.machinery) == ("infra_error", None, "infra_error",
                                                                             "sandbox")
        assert "was lost under the session" in lost.outcome.reason  # type: ignore[union-attr]
        assert "the sandbox failed (not your fault)" in lost.turns[1].observations[0]["text"]
        # its session was closed: no node counts it any more
        assert executor.sessions_open() == dict.fromkeys(executor.sessions_open(), 0)

        # Through run_episodes: the lost run is re-queued once, on the other node, and passes.
        again: list[str] = []
        episodes = list(run_episodes([EpisodeJob(task, 7)],
                                     lambda job: _KillsItsNode(_solving_model(policy_server, "requeued"),
                                                               executor, again),
                                     executor, concurrency=1))
        stats = executor.stats
    assert len(episodes) == 1  # only the run that finished is yielded: nothing from the lost one
    (episode,) = episodes
    assert len(again) == 1 and len(episode.lost) == 1 and "was lost under the session" in episode.lost[0]
    assert (episode.status, episode.score, episode.end_reason, episode.sample_index) == ("passed", 1.0, "submit", 7)
    assert episode.node and episode.node.split("/")[1] != again[0][:8]  # kept off the node it was lost on
    assert episode.turns[1].observations[0]["text"].strip().endswith("noted")
    assert episode.to_dict()["lost"] == episode.lost
    assert stats.actor_restarts == 2


def test_agent_run_and_difficulty_agent_on_ray(ray_cluster: LocalRayCluster, policy_server: Any, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``agent run --executor ray``: the session on a node of the cluster, graded there;
    ``difficulty --agent --executor ray``: the reference policy's pass rate is 1.0."""
    from tests.agents.conftest import scripted

    task = load_task(SAMPLE_TASKS / "coding-roman-numerals")
    _solving_model(policy_server, "cli-ray")  # registers the scripted policy under that name
    out = tmp_path / "episode.json"
    code = main(["agent", "run", str(task.root), "--backend", "openai", "--model", "cli-ray", "--base-url",
                 policy_server.base_url, "--executor", "ray", "--ray-address", ray_cluster.address,
                 "--json", str(out)])
    shown = capsys.readouterr().out
    assert code == 0, shown
    doc = json.loads(out.read_text())
    assert (doc["status"], doc["score"], doc["end_reason"]) == ("passed", 1.0, "submit")
    assert doc["node"].split("/")[1] in {ray_cluster.head_node_id[:8], ray_cluster.worker_node_id[:8]}
    assert f"session on node {doc['node']}" in shown

    writes = [("write_file", {"path": rel, "content": p.read_text()})
              for rel, p in sorted(task.solution_files().items())]
    policy_server.policies["difficulty-ray"] = scripted([writes, [("submit", {})]])
    summary = tmp_path / "difficulty.json"
    code = main(["difficulty", str(task.root), "--agent", "--backend", "openai", "--model", "difficulty-ray",
                 "--base-url", policy_server.base_url, "--out", str(tmp_path / "d"), "--samples", "2", "-j", "2",
                 "--no-cache", "--max-turns", "4", "--executor", "ray", "--ray-address", ray_cluster.address,
                 "--json", str(summary)])
    assert code == 0, capsys.readouterr()
    rates = {t["task_id"]: (t["pass_rate"], t["n"]) for t in json.loads(summary.read_text())["tasks"]}
    assert rates == {task.id: (1.0, 2)}


def test_train_agent_on_ray_writes_the_episodes_a_local_run_writes(ray_cluster: LocalRayCluster, policy_server: Any,
                                                                   tmp_path: Path) -> None:
    """``train --agent --executor ray``: each episode's session on a node of the cluster, graded
    there; the trajectory rows (rewards, turns, tool calls) are those of the same run on local."""
    from tests.agents.conftest import scripted
    from verify_cli.rollout.shards import read_run

    task = load_task(SAMPLE_TASKS / "coding-roman-numerals")
    writes = [("write_file", {"path": rel, "content": p.read_text()})
              for rel, p in sorted(task.solution_files().items())]
    policy_server.policies["train-ray"] = scripted([writes, [("run_tests", {})], [("submit", {})]])
    rows = {}
    for executor in ("ray", "local"):
        run = tmp_path / executor
        extra = ["--executor", "ray", "--ray-address", ray_cluster.address] if executor == "ray" else []
        code = main(["train", str(task.root), "--agent", "--backend", "openai", "--model", "train-ray",
                     "--backend-option", f"base_url={policy_server.base_url}", "-G", "2", "-B", "1",
                     "--steps", "1", "-j", "2", "--max-turns", "4", "--out", str(run), *extra])
        assert code == 0, executor
        rows[executor] = sorted(((r["sample_index"], r["status"], r["reward"], r["end_reason"], r["num_turns"],
                                  [[c["name"] for c in t["tool_calls"]] for t in r["turns"]])
                                 for r in read_run(run).to_pylist()), key=lambda row: row[0])
    assert rows["ray"] == rows["local"]
    assert [row[1:5] for row in rows["ray"]] == [("ok", 1.0, "submit", 3)] * 2
