"""The openai backend against a real HTTP server on loopback that answers with chosen
completions, 429 and 500 responses included."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from verify_cli.models import create_model_backend
from verify_cli.models.base import Prompt, SamplingParams
from verify_cli.models.openai_backend import ServerError

Reply = tuple[int, dict[str, Any], dict[str, str]]


class ScriptedServer:
    """Answers each POST with the next scripted failure (if any), else ``answer(body)``."""

    def __init__(self, answer: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.answer = answer
        self.failures: list[tuple[int, dict[str, str]]] = []
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.gate = threading.Event()
        self.gate.set()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append((self.path, body))
                    failure = server.failures.pop(0) if server.failures else None
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    server.gate.wait(5)
                    status, payload, headers = (failure[0], {"error": "scripted"}, failure[1]) if failure \
                        else (200, server.answer(body), {})
                    data = json.dumps(payload).encode()
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    with server.lock:
                        server.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def chat_answer(body: dict[str, Any]) -> dict[str, Any]:
    task = body["messages"][-1]["content"]
    seed = body.get("seed")
    return {"choices": [{"index": i, "message": {"role": "assistant", "content": f"{task} #{i} seed={seed}"},
                         "finish_reason": "stop",
                         "logprobs": {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -0.25}]}}
                        for i in reversed(range(body["n"]))]}


def completion_answer(body: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"index": i, "text": f"{body['prompt']}+{i}", "finish_reason": "length", "token_ids": [1, 2],
                         "logprobs": {"tokens": ["x", "y"], "token_logprobs": [-1.0, -2.0]}}
                        for i in range(body["n"])], "prompt_token_ids": [9]}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    s = ScriptedServer(chat_answer)
    s.thread.start()
    yield s
    s.gate.set()
    s.httpd.shutdown()
    s.httpd.server_close()


def prompt(task: str) -> Prompt:
    return Prompt(task, task, messages=({"role": "user", "content": task},))


def test_chat_completions_in_order_with_logprobs_and_per_prompt_seeds(server: ScriptedServer) -> None:
    backend = create_model_backend("openai", model="m", base_url=server.url, backoff_seconds=0.01)
    out = backend.generate([prompt("t1"), prompt("t2")], SamplingParams(n=2, seed=10, logprobs=True, max_tokens=7))
    assert [[c.text for c in cs] for cs in out] == [["t1 #0 seed=10", "t1 #1 seed=10"],
                                                    ["t2 #0 seed=11", "t2 #1 seed=11"]]
    assert out[0][0].logprobs == (-0.5, -0.25)
    path, body = server.requests[0]
    assert path == "/v1/chat/completions"
    assert body["model"] == "m" and body["n"] == 2 and body["max_tokens"] == 7 and body["logprobs"] is True
    backend.close()


def test_completions_endpoint_sends_text_and_reads_token_ids(server: ScriptedServer) -> None:
    server.answer = completion_answer
    backend = create_model_backend("openai", model="m", base_url=server.url, chat=False)
    (c0, c1), = backend.generate([Prompt("t", "hello")], SamplingParams(n=2, logprobs=True))
    assert server.requests[0][0] == "/v1/completions" and server.requests[0][1]["logprobs"] == 1
    assert (c0.text, c1.text) == ("hello+0", "hello+1")
    assert c0.token_ids == (1, 2) and c0.logprobs == (-1.0, -2.0) and c0.finish_reason == "length"
    assert c0.prompt_token_ids == (9,)
    backend.close()


def test_429_and_500_are_retried_with_backoff_and_retry_after(server: ScriptedServer) -> None:
    server.failures = [(429, {"Retry-After": "0.2"}), (500, {}), (503, {})]
    backend = create_model_backend("openai", model="m", base_url=server.url, backoff_seconds=0.01)
    import time

    started = time.monotonic()
    out = backend.generate([prompt("t")], SamplingParams(n=1))
    assert out[0][0].text == "t #0 seed=None"
    assert time.monotonic() - started >= 0.2  # the server's Retry-After was honoured
    assert len(server.requests) == 4
    assert backend.stats == {"requests": 4, "retries": 3, "failures": 0}  # type: ignore[attr-defined]
    backend.close()


def test_a_server_that_keeps_failing_is_an_infrastructure_error(server: ScriptedServer) -> None:
    server.failures = [(500, {})] * 3
    backend = create_model_backend("openai", model="m", base_url=server.url, max_retries=2, backoff_seconds=0.01)
    with pytest.raises(ServerError, match="failed 3 times; last: HTTP 500") as e:
        backend.generate([prompt("t")], SamplingParams())
    assert e.value.exit_code == 3
    server.failures = [(400, {})]
    with pytest.raises(ServerError, match="refused the request: HTTP 400"):
        backend.generate([prompt("t")], SamplingParams())
    backend.close()


def test_timeouts_are_retried(server: ScriptedServer) -> None:
    server.gate.clear()  # the first request hangs past the client's timeout
    backend = create_model_backend("openai", model="m", base_url=server.url, timeout_seconds=0.3,
                                   backoff_seconds=0.01, max_retries=3)
    threading.Timer(0.5, server.gate.set).start()
    out = backend.generate([prompt("t")], SamplingParams())
    assert out[0][0].text.startswith("t #0")
    assert backend.stats["retries"] >= 1  # type: ignore[attr-defined]
    backend.close()


def test_concurrency_limit_and_streaming(server: ScriptedServer) -> None:
    server.gate.clear()
    backend = create_model_backend("openai", model="m", base_url=server.url, concurrency=2)
    threading.Timer(0.3, server.gate.set).start()
    got = list(backend.generate_stream([prompt(f"t{i}") for i in range(6)], SamplingParams(n=2)))
    assert sorted(i for i, _ in got) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert all(c.text.startswith(f"t{i} ") for i, c in got)
    assert server.max_in_flight == 2
    backend.close()


def test_one_failed_try_is_said_in_the_singular(server: ScriptedServer) -> None:
    server.failures = [(500, {})]
    backend = create_model_backend("openai", model="m", base_url=server.url, max_retries=0)
    with pytest.raises(ServerError, match="failed 1 time; last: HTTP 500"):
        backend.generate([prompt("t")], SamplingParams())
    backend.close()
