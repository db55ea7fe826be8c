"""A scripted policy behind a real OpenAI-compatible server on loopback: it answers each chat
request with the tool calls its script gives for the conversation so far."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.rollout.conftest import toy_model  # noqa: F401 - the toy model fixture, for the agent training tests

#: A policy: the request's messages -> the calls of the next reply, as (name, arguments) pairs,
#: or a string (a reply with text and no call).
Policy = Callable[[Sequence[dict[str, Any]]], "list[tuple[str, Any]] | str"]


class PolicyServer:
    """``/v1/chat/completions`` answering with the policy's calls (ids call_<turn>_<i>)."""

    def __init__(self) -> None:
        self.policies: dict[str, Policy] = {}
        #: The ``usage.completion_tokens`` each model's replies report (none where absent).
        self.usage: dict[str, int] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append(body)
                policy = server.policies[body["model"]]
                messages = body["messages"]
                turn = sum(1 for m in messages if m["role"] == "assistant")
                calls = policy(messages)
                if isinstance(calls, str):
                    message: dict[str, Any] = {"role": "assistant", "content": calls}
                else:
                    message = {"role": "assistant", "content": f"turn {turn}", "tool_calls": [
                        {"id": f"call_{turn}_{i}", "type": "function",
                         "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
                        for i, (name, args) in enumerate(calls)]}
                reply: dict[str, Any] = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
                if body["model"] in server.usage:
                    reply["usage"] = {"prompt_tokens": 1, "completion_tokens": server.usage[body["model"]]}
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def policy_server() -> Iterator[PolicyServer]:
    server = PolicyServer()
    yield server
    server.close()


def scripted(steps: Sequence[list[tuple[str, Any]] | str]) -> Policy:
    """A policy that plays ``steps`` in order (one per assistant turn), then submits."""

    def policy(messages: Sequence[dict[str, Any]]) -> list[tuple[str, Any]] | str:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        return steps[turn] if turn < len(steps) else [("submit", {})]

    return policy
