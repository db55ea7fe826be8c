"""Fixtures for the model backends: a tiny random model built once per session, offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Llama-style model folder with a byte-level tokenizer (no downloads)."""
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("the hf backend needs torch and transformers (pip install 'verify-cli[train]')")
    from verify_cli.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
