"""The reward manager the verl adapter's docs name is one verl 0.9.1's trainer resolves (the
docs once said "a batch reward manager": verl answers ``Unknown reward manager: batch``)."""

from __future__ import annotations

from pathlib import Path

from tests.adapters.framework_extras import run_child
from verify_cli.adapters import verl as verl_adapter

CHILD = Path(__file__).with_name("verl_registry_child.py")


def test_the_documented_reward_manager_is_in_verls_registry(tmp_path: Path) -> None:
    doc = verl_adapter.__doc__ or ""
    assert f"reward_manager: {{name: {verl_adapter.VERL_REWARD_MANAGER}}}" in doc
    out = run_child("verl", CHILD, {"names": [verl_adapter.VERL_REWARD_MANAGER, "batch"]}, tmp_path / "out.json",
                    timeout=300)
    assert out[verl_adapter.VERL_REWARD_MANAGER].endswith("NaiveRewardManager"), out
    assert out["batch"] == "error: Unknown reward manager: batch"  # what the old docs led to
