"""No backend name is branched on outside the module that owns the backend: a new backend is a
new module and its registration, with no edit elsewhere (the registries, the typed configs and
``Sandbox.cache_identity``/``runs_in_image`` carry what the branches used to)."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "verify_cli"

SANDBOX_OWNERS = {"docker": ("sandbox/docker/", "harness/warm/docker_"), "bwrap": ("sandbox/bwrap",),
                  "process": ("sandbox/process.py",)}
MODEL_OWNERS = {"hf": ("models/hf.py",), "vllm": ("models/vllm_backend.py",),
                "openai": ("models/openai_backend.py",), "replay": ("models/replay.py",)}
#: Branches known to remain, each with the reason; the list only shrinks.
KNOWN: set[tuple[str, str]] = set()


def _branches(names: dict[str, tuple[str, ...]]) -> list[str]:
    alternatives = "|".join(names)
    pattern = re.compile(rf"""(==|!=|\bin)\s*\(?\s*["']({alternatives})["']|["']({alternatives})["']\s*(==|!=)""")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for m in pattern.finditer(line):
                name = m.group(2) or m.group(3)
                if rel.startswith(names[name]) or (rel, name) in KNOWN:
                    continue
                found.append(f"{rel}:{number}: {line.strip()}")
    return found


def test_no_sandbox_backend_is_branched_on_outside_its_module() -> None:
    assert _branches(SANDBOX_OWNERS) == []


def test_no_model_backend_is_branched_on_outside_its_module() -> None:
    assert _branches(MODEL_OWNERS) == []
