"""pytest plugin loaded by the harness (PYTEST_PLUGINS=verify_shuffle): shuffles test order.

Active only when VERIFY_SHUFFLE_SEED is set; the order is a pure function of the seed, so a
failing order can be replayed.
"""

from __future__ import annotations

import os
import random
from typing import Any


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    seed = os.environ.get("VERIFY_SHUFFLE_SEED")
    if seed is None or seed == "":
        return
    random.Random(int(seed)).shuffle(items)
