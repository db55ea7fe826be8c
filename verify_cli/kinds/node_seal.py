"""The seal of a node test run: which JUnit documents node's test runner itself produced.

``node --test`` writes the JUnit file in its own (parent) process. The grader adds a second
reporter, ``harness/plugins/verify_node_seal.js``, which renders the same events to JUnit once more and
signs the SHA-256 of that document with the per-run key (HMAC-SHA256), in
``verify-seal-node-<pid>.json``. A JUnit file counts only when a valid seal names its exact bytes,
so a results file forged or rewritten by anything but the runner scores 0.

Under two-process grading the key and the runner never share a process or a file view with the
candidate. In-process (``isolation = "in-process"``), the candidate's code runs in the runner's
child processes: the key is out of their environment but readable in their parent's initial
environment, and a child can still lie to its parent about its tests; the seal is a second line there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable, Mapping

from verify_cli.grading.seal import SEAL_PREFIX

NODE_SEAL_PREFIX = f"{SEAL_PREFIX}node-"


def node_seal_command(command: str) -> str:
    """``command`` (a task's node test command, for /bin/sh) with the seal reporter added to
    every ``node --test`` it starts (through NODE_OPTIONS, so the task's own reporters stay)."""
    return ('NODE_OPTIONS="$NODE_OPTIONS --test-reporter=$VERIFY_HARNESS_DIR/verify_node_seal.js '
            '--test-reporter-destination=/dev/null"; export NODE_OPTIONS\n' + command)


def runner_writes_junit(command: str) -> bool:
    """Whether a node task's command has node's own junit reporter write its results (the
    sample tasks' way): only then can the seal name the results file's bytes. A task that builds
    its JUnit otherwise (a converter) is graded without the seal."""
    return bool(re.search(r"--test-reporter[= ]+['\"]?junit\b", command))


def sealed_digests(results: Mapping[str, bytes], key: str) -> tuple[set[str], list[str]]:
    """SHA-256 digests of the JUnit documents named by valid node seals, and problems with
    seals that are not valid."""
    digests: set[str] = set()
    problems: list[str] = []
    for name, data in sorted(results.items()):
        if not name.startswith(NODE_SEAL_PREFIX) or "/" in name:
            continue
        try:
            doc = json.loads(data)
            payload, mac = str(doc["payload"]), str(doc["mac"])
        except (ValueError, KeyError, TypeError):
            problems.append(f"node test record {name} is not readable")
            continue
        want = hmac.new(key.encode(), payload.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(want, mac):
            problems.append(f"node test record {name} is forged (its signature does not match)")
            continue
        try:
            body = json.loads(payload)
            digests.add(str(body["junit_sha256"]))
        except (ValueError, KeyError, TypeError):
            problems.append(f"node test record {name} is not readable")
    return digests, problems


def check_node_seal(results: Mapping[str, bytes], key: str, junit_files: Iterable[str]) -> list[str]:
    """Problems that make the run's JUnit files untrustworthy; empty when every one of them is
    exactly a document node's test runner produced in this run."""
    digests, problems = sealed_digests(results, key)
    names = list(junit_files)
    if not digests:
        return [*problems, "no valid record of the node test run: the runner did not finish "
                           "(killed, exited early) or the results were forged"]
    unsealed = [n for n in names if hashlib.sha256(results[n]).hexdigest() not in digests]
    if unsealed:
        problems.append(f"results file {unsealed[0]} is not what node's test runner wrote "
                        "(rewritten or forged after the run?)")
        return problems
    return []
