"""The README's five-minute walk-through runs as written: its commands, in order, in a fresh folder,
against a small OpenAI-compatible server on loopback standing in for the model the README names
(the one change: the server's address). And the README's Python block runs as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_URL = "http://127.0.0.1:8000/v1"
#: The reference solution ``verify-cli new-task`` writes (a model that knows the answer).
ANSWER = "def total(values):\n    return sum(values)\n"

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


def walkthrough_script(readme: str) -> str:
    """The shell commands of the README's walk-through section, in order."""
    section = re.search(r"^## A five-minute walk-through\n(.*?)^## ", readme, re.M | re.S)
    assert section, "the README has no walk-through section"
    blocks = re.findall(r"^```bash\n(.*?)^```", section.group(1), re.M | re.S)
    return "\n".join(blocks)


class ModelServer:
    """``/v1/chat/completions``: the reference in a fenced block for a one-shot prompt, and for an
    agent (a request with tools) a write_file of the reference, then submit."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                data = json.dumps(server.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @staticmethod
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        if not body.get("tools"):
            text = f"```python solution.py\n{ANSWER}```\n"
            return {"choices": [{"index": i, "message": {"role": "assistant", "content": text},
                                 "finish_reason": "stop"} for i in range(body.get("n", 1))]}
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        name, args = (("write_file", {"path": "solution.py", "content": ANSWER}) if turn == 0
                      else ("submit", {}))
        call = {"id": f"call_{turn}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)}}
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "", "tool_calls": [call]},
                             "finish_reason": "tool_calls"}]}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer()
    yield server
    server.close()


def test_the_walkthrough_runs_as_written(model_server: ModelServer, tmp_path: Path) -> None:
    script = walkthrough_script(README.read_text(encoding="utf-8"))
    assert script.count("verify-cli ") >= 5 and README_URL in script
    # ``verify-cli`` is this checkout's (the installed entry point may be another's)
    prelude = f'set -euo pipefail\nverify-cli() {{ "{sys.executable}" -m verify_cli "$@"; }}\n'
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    done = subprocess.run(["bash", "-c", prelude + script.replace(README_URL, model_server.url)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout[-4000:], done.stderr[-4000:])
    out = done.stdout
    assert "1 sound, 0 defective" in out  # check-tasks
    assert "1 reliable, 0 unreliable" in out  # audit
    table = pq.read_table(tmp_path / "difficulty-out" / "difficulty.parquet").to_pylist()
    assert [(r["task_id"], r["n"], r["pass_rate"], r["bucket"]) for r in table] == [("sum-list", 8, 1.0, "solved")]
    episode = json.loads((tmp_path / "episode.json").read_text())
    assert episode["status"] == "passed" and episode["end_reason"] == "submit"
    assert "grade: passed (score 1.00)" in out
    assert any(r.get("tools") for r in model_server.requests)  # the agent episode used the server too


def test_the_readme_python_block_runs_as_written(tmp_path: Path) -> None:
    block = re.search(r"^## Library use\n.*?^```python\n(.*?)^```", README.read_text(encoding="utf-8"),
                      re.M | re.S)
    assert block
    done = subprocess.run([sys.executable, "-c", block.group(1)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("graded 0.0 [")  # the wrong candidate fails its tests


def test_the_walkthrough_extraction_reads_only_that_section() -> None:
    readme = "# x\n\n## A five-minute walk-through\n\n```bash\nverify-cli a\n```\n\ntext\n\n```bash\nverify-cli b\n" \
             "```\n\n## Commands\n\n```bash\nverify-cli c\n```\n"
    assert walkthrough_script(readme) == "verify-cli a\n\nverify-cli b\n"
