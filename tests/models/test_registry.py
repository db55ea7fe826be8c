"""Model backends are chosen by name; a wrong name or a missing package says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from verify_cli.errors import UsageError
from verify_cli.models import create_model_backend, model_backend_class, model_backend_names
from verify_cli.models.base import ModelBackendUnavailableError, SamplingParams
from verify_cli.models.registry import missing_requirements


def test_every_builtin_backend_is_listed() -> None:
    assert {"hf", "openai", "replay", "vllm"} <= set(model_backend_names())
    for name in model_backend_names():
        assert model_backend_class(name).name == name


def test_unknown_backend_lists_the_choices() -> None:
    with pytest.raises(UsageError) as e:
        create_model_backend("gpt9")
    assert "vllm" in (e.value.hint or "")


def test_missing_optional_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    cls = model_backend_class("hf")
    monkeypatch.setattr(cls, "requires", ("torch", "no_such_module_for_verify_cli"))
    assert missing_requirements(cls) == ["no_such_module_for_verify_cli"]
    with pytest.raises(ModelBackendUnavailableError) as e:
        create_model_backend("hf", model="/nowhere")
    assert "verify-cli[train]" in (e.value.hint or "")


def test_sampling_params_fingerprint_ignores_n_but_not_the_distribution() -> None:
    a = SamplingParams(n=4, temperature=0.7, seed=1)
    assert a.fingerprint() == SamplingParams(n=16, temperature=0.7, seed=1).fingerprint()
    assert a.fingerprint() != SamplingParams(n=4, temperature=0.8, seed=1).fingerprint()
    with pytest.raises(Exception, match="top_p"):
        SamplingParams(top_p=0)


def test_vllm_without_vllm_says_to_install_the_gpu_extra() -> None:
    if not missing_requirements(model_backend_class("vllm")):
        pytest.skip("vllm is installed here")
    with pytest.raises(ModelBackendUnavailableError) as e:
        create_model_backend("vllm", model="/nowhere")
    assert "verify-cli[gpu]" in (e.value.hint or "")


# --- typed options: checked once, never dropped ---------------------------------------------


def test_an_unknown_option_names_the_option_and_the_backend() -> None:
    with pytest.raises(UsageError) as e:
        create_model_backend("replay", model="x.jsonl", temprature=0.5)  # a typo: never ignored
    assert str(e.value) == ("model backend 'replay' has no option 'temprature' (its options: model)")


def test_a_missing_option_is_a_usage_error_not_a_type_error() -> None:
    for name in ("hf", "replay", "vllm", "openai"):
        with pytest.raises(UsageError, match=f"model backend '{name}' needs option 'model'"):
            create_model_backend(name)


def test_an_option_of_another_backend_is_refused() -> None:
    with pytest.raises(UsageError, match="model backend 'hf' has no option 'base_url'"):
        create_model_backend("hf", model="/nowhere", base_url="http://127.0.0.1:8000/v1")


def test_values_are_checked_by_type_and_by_the_backend() -> None:
    with pytest.raises(UsageError, match="'concurrency': 'many' is not a whole number"):
        create_model_backend("openai", model="m", concurrency="many")
    with pytest.raises(UsageError, match="base_url 'foo' is not an http"):
        create_model_backend("openai", model="m", base_url="foo")


@pytest.mark.parametrize("name", ["hf", "openai", "replay", "vllm"])
def test_each_config_mirrors_its_constructor(name: str) -> None:
    """The config is what create_model_backend checks; the constructor what it calls: a field
    of one that the other lacks (or a different default) would be a silent drift."""
    import dataclasses
    import inspect

    cls = model_backend_class(name)
    params = inspect.signature(cls.__init__).parameters
    for f in dataclasses.fields(cls.config_type):
        assert f.name in params, f"{name}: {f.name} is not a constructor parameter"
        default = params[f.name].default
        want = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert default == want, f"{name}: {f.name} defaults to {want!r} in the config, {default!r} in __init__"
    fields = {f.name for f in dataclasses.fields(cls.config_type)}
    assert {p for p in params if p != "self"} <= fields


def test_a_second_class_under_a_taken_name_is_refused() -> None:
    from verify_cli.models.registry import register_model_backend
    from verify_cli.registry import DuplicateNameError

    with pytest.raises(DuplicateNameError):
        register_model_backend("replay")(type("Other", (model_backend_class("replay"),), {}))


def test_a_backend_without_a_trainable_model_says_so_for_grpo(tmp_path: Path) -> None:
    """--update grpo asks the backend for the module to train; replay has none (UsageError, exit 2)."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"task_id": "t", "completion": "x"}\n')
    backend = create_model_backend("replay", model=str(rows))
    with pytest.raises(UsageError, match="cannot update the 'replay' backend's model"):
        backend.trainable_model(None)
