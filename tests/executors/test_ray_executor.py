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
