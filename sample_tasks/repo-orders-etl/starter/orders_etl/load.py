"""Write the summary as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_summary(summary: dict[str, Any], path: str | Path, indent: int = 2) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=indent, sort_keys=True) + "\n", encoding="utf-8")
    return out
