"""The harness's own record of a pytest session, and how a JUnit file is checked against it.

Candidate code runs in the same process as the tests, so a results file alone proves little: a
candidate can write a forged ``junit.xml`` and ``os._exit(0)`` before pytest writes anything,
overwrite pytest's file at exit, plant a conftest at run time, or replace ``pytest.raises``. The
harness plugin (``verify_cli/harness/plugins/verify_harness.py``) therefore writes a *seal*: what pytest
collected and reported, and any tampering it saw, authenticated with a per-run secret that the
plugin takes out of the environment before any candidate code is imported.

The grader trusts the JUnit file only as far as a valid seal agrees with it: no valid seal, a
test that JUnit says passed but the seal does not, or tamper evidence, and the run scores 0. A
collected test absent from the JUnit file counts as missing (failed). This raises the bar; it is
not a proof: code in the test process can, with effort aimed at this harness, find the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from verify_cli.sandbox.plumbing.trusted_launch import (
    SEAL_KEY_ENV as SEAL_KEY_ENV,  # an order to the backend, no variable
)

SEAL_PREFIX = "verify-seal-"
TEST_DIRS_ENV = "VERIFY_TEST_DIRS"


def new_seal_key() -> str:
    return secrets.token_hex(16)


@dataclass(frozen=True)
class SessionRecord:
    """What the harness saw of the run's pytest sessions (merged when a command runs several)."""

    collected: tuple[str, ...] = ()
    outcomes: Mapping[str, str] = field(default_factory=dict)
    tampered: tuple[str, ...] = ()
    sessions: int = 0


def read_seals(results: Mapping[str, bytes], key: str) -> tuple[SessionRecord | None, list[str]]:
    """The merged record of every valid seal in ``results``, and problems with invalid ones.

    None when there is no valid seal at all.
    """
    problems: list[str] = []
    collected: list[str] = []
    outcomes: dict[str, str] = {}
    tampered: list[str] = []
    sessions = 0
    for name, data in sorted(results.items()):
        if not name.startswith(SEAL_PREFIX) or "/" in name:
            continue
        try:
            doc = json.loads(data)
            payload = str(doc["payload"])
            mac = str(doc["mac"])
        except (ValueError, KeyError, TypeError):
            problems.append(f"harness record {name} is not readable")
            continue
        want = hmac.new(key.encode(), payload.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, mac):
            problems.append(f"harness record {name} is forged (its signature does not match)")
            continue
        try:
            body = json.loads(payload)
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError:
            problems.append(f"harness record {name} is not readable (was the JSON module replaced?)")
            continue
        sessions += 1
        collected.extend(str(t) for t in body.get("collected", []))
        for tid, outcome in dict(body.get("outcomes", {})).items():
            before = outcomes.setdefault(str(tid), str(outcome))
            if before != str(outcome):
                # Two signed records that disagree on one test: one of them is forged (the key
                # leaked). Never merged: the run fails, and says why.
                problems.append(f"harness records disagree on {tid} ({before} and {outcome}): "
                                "one of them is forged")
                tampered.append(f"conflicting harness records for {tid}")
        tampered.extend(str(t) for t in body.get("tampered", []))
    if not sessions:
        return None, problems
    return SessionRecord(tuple(dict.fromkeys(collected)), outcomes, tuple(dict.fromkeys(tampered)),
                         sessions), problems


def is_seal_file(name: str) -> bool:
    return name.startswith(SEAL_PREFIX)


def seal_document(key: str, outcomes: Mapping[str, str], *, collected: tuple[str, ...] | None = None,
                  tampered: tuple[str, ...] = (), exitstatus: int = 0) -> tuple[str, bytes]:
    """(file name, bytes) of a seal as the harness plugin writes it: for tests and for runners
    other than the plugin that report through the same record."""
    payload = json.dumps({"version": 1, "pid": 0, "exitstatus": exitstatus,
                          "collected": list(collected if collected is not None else outcomes),
                          "outcomes": dict(outcomes), "tampered": list(tampered)}, sort_keys=True)
    mac = hmac.new(key.encode(), payload.encode(), hashlib.sha256).hexdigest()
    return f"{SEAL_PREFIX}0.json", json.dumps({"payload": payload, "mac": mac}).encode()


def seal_matching(key: str, junit_xml: bytes) -> tuple[str, bytes]:
    """A seal that agrees with ``junit_xml``: for stand-in sandboxes in tests that hand back a
    fixed JUnit file for a pytest task."""
    from verify_cli.grading.junit import parse_junit

    outcomes = {t.id: t.outcome.value for t in parse_junit(junit_xml)}
    return seal_document(key, outcomes)
