"""verl 0.9.1's reward-loop registry, as its trainer resolves ``reward.reward_manager``:
``python verl_registry_child.py REQUEST.json OUT.json`` with verl on the path. REQUEST:
{"names": [...]}; OUT: {name: the class's qualified name, or the error verl raises}."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omegaconf import OmegaConf
from verl.trainer.ppo.reward import resolve_reward_manager_cls


def main() -> None:
    names = json.loads(Path(sys.argv[1]).read_text())["names"]
    out = {}
    for name in names:
        config = OmegaConf.create({"reward": {"reward_manager": {"source": "register", "name": name}}})
        try:
            cls = resolve_reward_manager_cls(config)
            out[name] = f"{cls.__module__}.{cls.__qualname__}"
        except ValueError as e:
            out[name] = f"error: {e}"
    Path(sys.argv[2]).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
