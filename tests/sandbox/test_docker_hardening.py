"""Every container the docker backend makes for untrusted code gets the same hardening, written
once (``containers.hardened_container``): a run's container (single-use mode) and a node (node
mode) differ only in what their kind needs. The configurations are built with a real docker SDK
client that never connects; one engine test creates both and reads back what the engine keeps."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from docker.api.client import APIClient

from verify_cli.sandbox.base import Limits
from verify_cli.sandbox.docker.containers import NANO_CPUS, OWN_PIDS, USER, Shape
from verify_cli.sandbox.docker.nodes import NODE_OWN_PIDS, node_container
from verify_cli.sandbox.docker.sandbox import run_container

SHAPE = Shape.of("verify-cli/python:3.11", Limits(memory_mb=384, processes=48))

#: host-config fields whose values may differ by kind (each difference is checked below)
PER_KIND = {"PidsLimit", "Tmpfs", "Ulimits", "SecurityOpt", "MaskedPaths", "ReadonlyPaths"}


def _offline_api() -> APIClient:
    return APIClient(base_url="unix:///nonexistent/docker.sock", version="1.44")


def _both() -> dict[str, dict[str, Any]]:
    api = _offline_api()
    return {"run": run_container(api, SHAPE, "sha256:" + "0" * 64),
            "node": node_container(api, SHAPE, "sha256:" + "0" * 64)}


@pytest.mark.parametrize("kind", ["run", "node"])
def test_each_container_kind_is_hardened(kind: str) -> None:
    config = _both()[kind]
    host = config["host_config"]
    assert config["user"] == USER and not USER.startswith("0")
    # loopback only (the conformance suite proves egress contained); not network_disabled, with
    # which the engine writes an empty /etc/hosts (tests/sandbox/test_localhost.py)
    assert host["NetworkMode"] == "none" and "network_disabled" not in config
    assert host["CapDrop"] == ["ALL"] and "CapAdd" not in host
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["ReadonlyRootfs"] is True
    assert host["Memory"] == host["MemorySwap"] == SHAPE.memory_mb * 1024 * 1024
    assert host["NanoCpus"] == NANO_CPUS
    assert host["PidsLimit"] == SHAPE.processes + {"run": OWN_PIDS, "node": NODE_OWN_PIDS}[kind]
    assert host["LogConfig"]["Type"] == "none"
    assert {"Name": "core", "Soft": 0, "Hard": 0} in [dict(u) for u in host["Ulimits"]]
    assert "Privileged" not in host and "Binds" not in host and "Mounts" not in host


def test_both_kinds_share_every_other_hardening_field() -> None:
    both = _both()
    run, node = (both[k]["host_config"] for k in ("run", "node"))
    assert set(run) - {"MaskedPaths", "ReadonlyPaths"} == set(node) - {"MaskedPaths", "ReadonlyPaths"}
    assert {k: v for k, v in run.items() if k not in PER_KIND} == \
        {k: v for k, v in node.items() if k not in PER_KIND}
    assert both["run"]["user"] == both["node"]["user"]
    assert "network_disabled" not in both["run"] and "network_disabled" not in both["node"]


def test_what_a_node_adds_is_what_bubblewrap_needs() -> None:
    both = _both()
    run, node = (both[k]["host_config"] for k in ("run", "node"))
    assert run["SecurityOpt"] == ["no-new-privileges"]  # Docker's default seccomp profile
    assert node["SecurityOpt"][0] == "no-new-privileges" and len(node["SecurityOpt"]) == 2
    assert node["SecurityOpt"][1].startswith("seccomp=")
    assert node["MaskedPaths"] == node["ReadonlyPaths"] == []
    assert "MaskedPaths" not in run and "ReadonlyPaths" not in run
    fsize = [dict(u) for u in run["Ulimits"] if u["Name"] == "fsize"]
    assert fsize == [{"Name": "fsize", "Soft": SHAPE.file_bytes, "Hard": SHAPE.file_bytes}]


def test_a_pool_container_and_a_labelled_run_differ_only_in_labels() -> None:
    api = _offline_api()
    pooled = run_container(api, SHAPE, "sha256:" + "0" * 64)
    labelled = run_container(api, SHAPE, "sha256:" + "0" * 64, {"task": "t1"})
    assert pooled["labels"]["verify-cli.pool"] == "1" and "verify-cli.pool" not in labelled["labels"]
    assert labelled["labels"]["task"] == "t1"
    assert pooled["host_config"] == labelled["host_config"]


@pytest.mark.docker
def test_the_engine_keeps_the_hardening_of_both_kinds() -> None:
    from tests.sandbox.test_docker_backend import _SKIP

    if _SKIP is not None:
        pytest.skip(_SKIP)
    from docker.client import DockerClient

    client = DockerClient.from_env(timeout=30)
    made: list[str] = []
    try:
        digest = client.images.get(SHAPE.image).id
        for config in (run_container(client.api, SHAPE, digest), node_container(client.api, SHAPE, digest)):
            made.append(client.api.create_container(**config)["Id"])
        kept = [client.api.inspect_container(cid) for cid in made]
        for inspected in kept:
            host = inspected["HostConfig"]
            assert inspected["Config"]["User"] == USER
            assert host["CapDrop"] == ["ALL"] and host["ReadonlyRootfs"] is True
            assert host["NetworkMode"] == "none" and "no-new-privileges" in host["SecurityOpt"]
            assert host["Memory"] == host["MemorySwap"] == SHAPE.memory_mb * 1024 * 1024
        assert kept[1]["HostConfig"]["MaskedPaths"] == []
        assert kept[0]["HostConfig"]["MaskedPaths"]  # the engine's default masks stay on runs
    finally:
        for cid in made:
            with contextlib.suppress(Exception):
                client.api.remove_container(cid, force=True)
        client.close()
