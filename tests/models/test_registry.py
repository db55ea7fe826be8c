"""Model backends are chosen by name; a wrong name or a missing package says what to do."""

from __future__ import annotations

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
