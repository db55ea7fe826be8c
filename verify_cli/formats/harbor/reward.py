"""The verifier's reward file, read as Harbor reads it, and turned into per-key test outcomes.

Harbor reads ``/logs/verifier/reward.json`` first (an object of reward names to numbers: several
keys are partial credit, one per key), else ``reward.txt`` (one number, the key ``reward``). A
verifier that writes neither, or one that does not parse, has not verified anything: that is the
task's defect, said with its reason (never a score of the candidate's making).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

REWARD_JSON = "reward.json"
REWARD_TXT = "reward.txt"
#: The one test case a trial reports when no reward could be read.
NO_REWARD_CASE = "reward"
#: A reward at or above this counts as the key passed (full credit).
FULL = 1.0
_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Reward:
    """What the verifier's files said: the rewards by key, or why there are none."""

    values: Mapping[str, float]
    source: str = ""  # the file they came from
    error: str = ""  # why nothing could be read (the task's defect)

    @property
    def score(self) -> float:
        """The mean of the keys' rewards, each clamped to [0, 1] (0 without rewards)."""
        if not self.values:
            return 0.0
        return sum(min(1.0, max(0.0, v)) for v in self.values.values()) / len(self.values)

    @property
    def passed(self) -> bool:
        return bool(self.values) and all(v >= FULL for v in self.values.values())

    def to_dict(self) -> dict[str, object]:
        return {"rewards": dict(self.values), "source": self.source, "error": self.error, "score": self.score}


def read_reward(files: Mapping[str, bytes]) -> Reward:
    """Parse the verifier's logs folder (file name to bytes), json first."""
    if REWARD_JSON in files:
        raw = files[REWARD_JSON][:_MAX_BYTES]
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return Reward({}, REWARD_JSON, f"the verifier's reward.json does not parse: {e}")
        if not isinstance(data, dict) or not data:
            return Reward({}, REWARD_JSON, "the verifier's reward.json is not an object of reward names to numbers")
        values: dict[str, float] = {}
        for key, v in data.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                return Reward({}, REWARD_JSON, f"the verifier's reward.json gives {key!r} the non-number {v!r}")
            values[str(key)] = float(v)
        return Reward(values, REWARD_JSON)
    if REWARD_TXT in files:
        text = files[REWARD_TXT][:_MAX_BYTES].decode("utf-8", "replace").strip()
        try:
            value = float(text)
        except ValueError:
            return Reward({}, REWARD_TXT, f"the verifier's reward.txt does not parse as a number: {text[:60]!r}")
        if not math.isfinite(value):
            return Reward({}, REWARD_TXT, f"the verifier's reward.txt is not a finite number: {text[:60]!r}")
        return Reward({"reward": value}, REWARD_TXT)
    return Reward({}, "", "the verifier wrote no reward file (/logs/verifier/reward.json or reward.txt)")


def reward_junit(reward: Reward, output_tail: str = "") -> bytes:
    """The reward as JUnit XML: one case per key, passed at full credit, else failed with its value
    (and the end of the verifier's output, where given: what a curator reads first)."""
    cases: list[str] = []
    tail = f" (the verifier's output ends: {output_tail})" if output_tail else ""
    if reward.error:
        failure = f"<failure message={quoteattr(reward.error + tail)}/>"
        cases.append(f'<testcase classname="harbor" name="{NO_REWARD_CASE}">{failure}</testcase>')
    for key, v in sorted(reward.values.items()):
        body = "" if v >= FULL else f"<failure message={quoteattr(f'reward {v:g} of 1' + tail)}/>"
        cases.append(f"<testcase classname=\"harbor\" name={quoteattr(key)}>{body}</testcase>")
    failures = sum(1 for c in cases if "<failure" in c)
    return (f'<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="harbor" tests="{len(cases)}" '
            f'failures="{failures}">{"".join(cases)}</testsuite></testsuites>').encode()


__all__ = ["FULL", "NO_REWARD_CASE", "REWARD_JSON", "REWARD_TXT", "Reward", "read_reward", "reward_junit"]
