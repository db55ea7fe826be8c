"""Two-process grading for node tasks (``framework = "node"``): the runtime registered with
:mod:`verify_cli.grading.two_process`.

The candidate side is ``harness/candidate/node/candidate_server.js``; the trusted side is the
task's own ``node --test`` command with ``verify_node_standin`` preloaded, which makes
``require()`` of an editable file return a stand-in whose calls cross the channel
(docs/wire-protocol.md, "node").
"""

from __future__ import annotations

import json
from pathlib import Path

from verify_cli.grading.two_process import TwoProcessRuntime, register_two_process_runtime
from verify_cli.tasks.model import Task

#: The candidate's code files, which the tests' side sees empty (reached only through the channel).
NODE_CODE_SUFFIXES = (".js", ".cjs", ".mjs")


def _node_trusted_env(task: Task, root: Path, env: dict[str, str]) -> dict[str, str]:
    options = env.get("NODE_OPTIONS", "")
    return {"NODE_OPTIONS": f"{options} --require verify_node_standin".strip(),
            "VERIFY_CANDIDATE_FILES": json.dumps(list(task.editable))}


register_two_process_runtime(TwoProcessRuntime(
    framework="node",
    server_command=("/bin/sh", "-c", 'exec node "$VERIFY_CANDIDATE_HARNESS/node/candidate_server.js"'),
    trusted_env=_node_trusted_env,
    code_suffixes=NODE_CODE_SUFFIXES,
))
