"""verify-cli tasks as a verifiers environment, run by verifiers' own evaluation entry point.

verifiers 0.4.0 pins openai<3 and mcp==2.0.0, so it is installed beside the venv (scripts/setup.sh,
scripts/extras/verifiers.txt) and ``vf-eval`` runs in a child process, on verifiers' ``null``
harness (its chat program, which verifiers runs with uv in a ``subprocess`` runtime) against an
OpenAI-compatible server on loopback here that answers each task with a scripted reply. The
rewards in the traces verifiers writes are checked against verify-cli's grades of the same replies.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.framework_extras import pinned, require
from tests.conftest import REPO_ROOT, SAMPLE_TASKS

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

ROMAN, MERGE = "coding-roman-numerals", "coding-interval-merge"
SHIM = "from verify_cli.adapters.verifiers import VerifyCliTaskset\n\n__all__ = [\"VerifyCliTaskset\"]\n"


class ChatServer:
    """``/v1/chat/completions`` (streamed or not) answering with ``reply(user message)``."""

    def __init__(self, reply: Callable[[str], str]) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, "application/json", json.dumps({"data": [{"id": "toy", "object": "model"}]}))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                server.requests.append(body)
                user = [m for m in body.get("messages", []) if m.get("role") == "user"]
                content = user[-1]["content"] if user else ""
                if isinstance(content, list):
                    content = "".join(part.get("text", "") for part in content)
                text = reply(str(content))
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                head = {"id": "chatcmpl-1", "created": int(time.time()), "model": body.get("model", "toy")}
                if not body.get("stream"):
                    self._send(200, "application/json", json.dumps({**head, "object": "chat.completion", "usage": usage,
                               "choices": [{"index": 0, "finish_reason": "stop",
                                            "message": {"role": "assistant", "content": text}}]}))
                    return
                chunks = [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None},
                          {"index": 0, "delta": {}, "finish_reason": "stop"}]
                events = [{**head, "object": "chat.completion.chunk", "choices": [c]} for c in chunks]
                events.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
                payload = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
                self._send(200, "text/event-stream", payload)

            def _send(self, status: int, kind: str, text: str) -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def fenced(name: str, text: str) -> str:
    return f"Here is my solution.\n\n```python {name}\n{text}```\n"


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vf-tasks")
    for name in (ROMAN, MERGE):
        shutil.copytree(SAMPLE_TASKS / name, root / name)
    return root


def replies(tasks: Path) -> dict[str, str]:
    """The scripted model: the reference for roman numerals, a wrong merge."""
    roman = (tasks / ROMAN / "solution" / "roman.py").read_text()
    (merge,) = sorted((tasks / MERGE / "solution").iterdir())
    return {"coding/roman-numerals": fenced("roman.py", roman),
            "coding/interval-merge": fenced(merge.name, "def merge(intervals):\n    return intervals\n")}


def vf_eval(tmp: Path, tasks: Path, server: ChatServer, *options: str) -> list[dict[str, Any]]:
    """``vf-eval verify_cli_tasks ...`` in a child process; the traces it wrote."""
    folder = require("verifiers")
    (tmp / "shim").mkdir(exist_ok=True)
    (tmp / "shim" / "verify_cli_tasks.py").write_text(SHIM)
    out = tmp / "out"
    # this checkout's verify_cli, not the venv's (which may be another checkout, installed editable)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(tmp / "shim"), str(REPO_ROOT)]),
           "PATH": os.pathsep.join([str(folder / "bin"), os.environ.get("PATH", "")]), "TOY_KEY": "unused"}
    args = [sys.executable, str(folder / "bin" / "vf-eval"), "verify_cli_tasks", "--env.taskset.tasks", str(tasks),
            "--env.agent.harness.id", "null",
            "--env.agent.runtime.type", "subprocess", "--model", "toy", "--client.base-url", server.url,
            "--client.api-key-var", "TOY_KEY", "--no-push", "--no-rich", "--output-dir", str(out), *options]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=480, cwd=tmp)
    assert proc.returncode == 0, f"vf-eval exited {proc.returncode}\n{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}"
    (traces,) = out.glob("*/traces.jsonl")
    return [json.loads(line) for line in traces.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def evaluated(tasks: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    answers = replies(tasks)
    words = {"coding/roman-numerals": "roman", "coding/interval-merge": "interval"}  # in each task's prompt
    server = ChatServer(lambda message: next(text for tid, text in answers.items() if words[tid] in message.lower()))
    try:
        yield {"traces": vf_eval(tmp_path_factory.mktemp("vf"), tasks, server), "answers": answers,
               "requests": server.requests}
    finally:
        server.close()


def test_the_pinned_verifiers_is_the_one_the_extra_names() -> None:
    import tomllib

    extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extra["verifiers"] == [f"verifiers=={pinned('verifiers')['verifiers']}"]


def test_vf_eval_rewards_are_verify_cli_grades(evaluated: dict[str, Any], tasks: Path) -> None:
    from verify_cli.adapters.grading import CompletionGrader

    traces = evaluated["traces"]
    assert evaluated["requests"], "vf-eval never called the model"
    by_task = {t["task"]["key"]: t for t in traces}
    assert set(by_task) == set(evaluated["answers"]), [t["task"] for t in traces]
    with CompletionGrader(tasks=tasks, sandbox="bwrap", warm=False) as fresh:
        expected = {tid: r["score"] for tid, r in zip(evaluated["answers"], fresh.grade(
            list(evaluated["answers"].items())), strict=True)}
    assert expected["coding/roman-numerals"] == 1.0 and expected["coding/interval-merge"] < 1.0
    for tid, episode in by_task.items():
        (trace,) = episode["traces"]
        assert episode["ok"] and trace["ok"], trace.get("errors")
        assert trace["rewards"]["verify_cli"]["score"] == pytest.approx(expected[tid]), (tid, trace["rewards"])


def test_an_infrastructure_error_fails_the_rollout_never_scores_it(tasks: Path, tmp_path: Path) -> None:
    from tests.service.conftest import start_server

    answers = replies(tasks)
    chat = ChatServer(lambda message: answers["coding/roman-numerals"])
    served = start_server([tasks], "--jobs", "1")
    try:
        (episode,) = vf_eval(tmp_path, tasks, chat, "-n", "1", "--env.taskset.task.url", served.url,
                             "--env.taskset.task.deadline-seconds", "0.001", "--env.taskset.task.infra-retries", "0")
    finally:
        served.stop()
        chat.close()
    (trace,) = episode["traces"]
    assert not trace["ok"] and not episode["ok"]
    assert (trace.get("rewards") or {}).get("verify_cli") is None, trace.get("rewards")  # no reward, not 0
    # verifiers' own SandboxError (the machinery failed), not TaskError (the task's code raised)
    assert [e["type"] for e in trace["errors"]] == ["SandboxError"], trace["errors"]
    assert "deadline" in trace["errors"][0]["message"], trace["errors"]


def test_load_environment_is_a_verifiers_env_over_the_task_folders(tasks: Path) -> None:
    folder = require("verifiers")
    code = ("import json, sys; from verify_cli.adapters.verifiers import load_environment; "
            "env = load_environment(sys.argv[1], sandbox='bwrap'); tasks = list(env.taskset); "
            "print(json.dumps({'env': type(env).__name__, 'keys': [t.key for t in tasks], "
            "'graded_over': tasks[0].config.tasks, 'prompt': tasks[0].data.prompt}))")
    path = os.pathsep.join([str(folder), str(REPO_ROOT)])
    proc = subprocess.run([sys.executable, "-c", code, str(tasks)], env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["env"] == "SingleAgentEnv" and out["graded_over"] == str(tasks)
    assert sorted(out["keys"]) == ["coding/interval-merge", "coding/roman-numerals"]
    assert "```" in out["prompt"]  # verify-cli's answer format: fenced files
