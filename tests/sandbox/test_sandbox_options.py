"""Sandbox backends' typed options: checked once where the caller builds them (an option the
backend does not take, a bad value: a one-line UsageError naming both), never dropped; the
sandbox's own cache identity; no engine needed."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from verify_cli.errors import UsageError
from verify_cli.registry import DuplicateNameError
from verify_cli.sandbox.docker.config import ABSENT, DockerConfig, docker_cache_identity
from verify_cli.sandbox.registry import (
    SandboxSpec,
    create_sandbox,
    environment_label,
    register_sandbox,
    sandbox_class,
    sandbox_names,
    sandbox_spec,
)


def test_an_option_of_another_backend_is_an_error_naming_the_flag_and_the_backend() -> None:
    with pytest.raises(UsageError) as e:
        sandbox_spec("bwrap", {"mode": "single-use"})
    assert str(e.value) == "sandbox backend 'bwrap' has no option --docker-mode (mode) (it takes none)"
    with pytest.raises(UsageError, match="sandbox backend 'process' has no option --pool-size"):
        sandbox_spec("process", {"pool_size": 3})


def test_auto_checks_the_options_against_what_it_may_become() -> None:
    with pytest.raises(UsageError, match=r"\(chosen by auto\) has no option --pool-size"):
        sandbox_spec("auto", {"pool_size": 3})
    with pytest.raises(UsageError, match=r"\(from auto\) has no option --docker-mode"):
        sandbox_spec("auto", {"mode": "node"}, resolve=False)  # resolved later, on a Ray node
    assert sandbox_spec("auto", resolve=False).backend == "auto"


def test_docker_options_are_checked_without_a_docker_engine() -> None:
    spec = sandbox_spec("docker", {"mode": "single-use", "pool_size": 2})
    assert spec.config == DockerConfig(pool_size=2, mode="single-use")
    with pytest.raises(UsageError, match="sandbox backend 'docker': unknown docker mode 'warm'"):
        sandbox_spec("docker", {"mode": "warm"})
    with pytest.raises(UsageError, match=r"docker' option --pool-size \(pool_size\): 'two' is not a whole"):
        sandbox_spec("docker", {"pool_size": "two"})
    with pytest.raises(UsageError, match="docker' has no option 'pool'"):
        sandbox_spec("docker", {"pool": 2})


def test_a_spec_with_another_backends_config_is_refused() -> None:
    with pytest.raises(UsageError, match="was given the options of another backend"):
        create_sandbox(SandboxSpec("process", DockerConfig()))


@pytest.mark.parametrize("name", ["bwrap", "docker", "process"])
def test_each_config_mirrors_its_constructor(name: str) -> None:
    cls = sandbox_class(name)
    params = inspect.signature(cls).parameters
    for f in dataclasses.fields(cls.config_type):
        assert f.name in params, f"{name}: {f.name} is not a constructor parameter"
        assert params[f.name].default == f.default, f"{name}: {f.name} defaults differ"
    # what the constructor takes beyond the config is a library caller's injection, with a default
    extra = [p for p in params.values() if p.name not in {f.name for f in dataclasses.fields(cls.config_type)}]
    assert all(p.default is not inspect.Parameter.empty for p in extra)


def test_a_second_class_under_a_taken_name_is_refused() -> None:
    with pytest.raises(DuplicateNameError):
        register_sandbox("process")(type("Other", (sandbox_class("bwrap"),), {}))
    assert sandbox_class("process").__name__ == "ProcessSandbox"


def test_docker_cache_identity_names_mode_image_and_digest() -> None:
    digests = {"verify-cli/python:3.11": "sha256:aaa"}
    same = docker_cache_identity("node", "verify-cli/python:3.11", digests.get)
    assert same == "docker node verify-cli/python:3.11@sha256:aaa"
    rebuilt = docker_cache_identity("node", "verify-cli/python:3.11", {"verify-cli/python:3.11": "sha256:bbb"}.get)
    assert rebuilt != same  # a rebuilt image is checked again
    assert docker_cache_identity("single-use", "verify-cli/python:3.11", digests.get) != same
    assert docker_cache_identity("node", "other:1", digests.get).endswith(f"@{ABSENT}")


def test_local_backends_identity_is_their_name() -> None:
    box = create_sandbox("process")
    assert box.cache_identity("verify-cli/python:3.11") == box.cache_identity(None) == "process"


def test_what_a_run_runs_in_is_the_sandboxes_to_say() -> None:
    assert environment_label("docker", "verify-cli/python:3.11", "python") == "verify-cli/python:3.11"
    for backend in ("bwrap", "process", "bwrap+docker", "not-registered"):
        assert environment_label(backend, "verify-cli/python:3.11", "python") == "python"
    assert set(sandbox_names()) >= {"bwrap", "docker", "process"}
