"""A model's context length and prompts that do not fit it: decided before generating, on the hf
backend with a real tiny model of few positions, and on the openai backend against a loopback
server that says its context (``GET /v1/models``) or refuses a prompt as vLLM's server does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from verify_cli.models import create_model_backend
from verify_cli.models.base import Prompt, SamplingParams
from verify_cli.models.context import (
    PROMPT_TOO_LONG,
    context_length_of_config,
    context_length_of_folder,
    prompt_fits,
    room_for,
)
from verify_cli.models.openai_backend import served_context_length


def test_context_length_from_config_fields_and_folder(tmp_path: Path) -> None:
    assert context_length_of_config({"max_position_embeddings": 8192}) == 8192
    assert context_length_of_config({"n_positions": 1024}) == 1024  # GPT-2's name for it
    assert context_length_of_config({"text_config": {"max_position_embeddings": 4096}}) == 4096
    assert context_length_of_config({"hidden_size": 8}) is None
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    assert context_length_of_folder(tmp_path) is None
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 2048}))
    assert context_length_of_folder(tmp_path) == 2048
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": int(1e30)}))  # "unset"
    assert context_length_of_folder(tmp_path) is None


def test_a_prompt_fits_when_one_token_can_follow_it() -> None:
    assert prompt_fits(99, 100) and not prompt_fits(100, 100) and not prompt_fits(150, 100)
    assert prompt_fits(None, 100) and prompt_fits(10_000, None)
    assert room_for(90, 64, 100) == 10 and room_for(10, 64, 100) == 64 and room_for(10, 64, None) == 64


@pytest.fixture(scope="module")
def short_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny byte-level model with 64 positions."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from verify_cli.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("short-model"), hidden_size=32, layers=1, heads=2,
                            max_positions=64)


def test_hf_prompt_longer_than_the_context_is_never_generated(short_model: Path) -> None:
    with create_model_backend("hf", model=str(short_model), device="cpu") as hf:
        assert hf.context_length == 64
        long, fits, edge = Prompt("long", "x" * 200), Prompt("fits", "y" * 10), Prompt("edge", "z" * 60)
        assert hf.prompt_tokens(long) == 200 and not hf.prompt_fits(long) and hf.prompt_fits(fits)
        out = hf.generate([long, fits, edge], SamplingParams(n=2, max_tokens=32, seed=1, logprobs=True))
        assert [c.finish_reason for c in out[0]] == [PROMPT_TOO_LONG, PROMPT_TOO_LONG]
        assert all(c.text == "" and c.token_ids == () for c in out[0])
        # A prompt that fits is generated up to the context's end, never past it.
        assert all(0 < len(c.token_ids) <= 32 for c in out[1])
        assert all(len(c.token_ids) <= 4 for c in out[2])
        streamed = list(hf.generate_stream([long], SamplingParams(n=3, max_tokens=8, seed=0)))
        assert [(i, c.finish_reason) for i, c in streamed] == [(0, PROMPT_TOO_LONG)] * 3


# --- openai: the server says its context, or refuses a prompt --------------------------------------


class ContextServer:
    """``GET /v1/models`` says ``max_model_len`` 100 (as vLLM's server does); a POST whose prompt
    is longer than 50 characters (or token ids) is refused with vLLM's 400 message; others are answered."""

    def __init__(self, *, says_context: bool) -> None:
        self.posts: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if says_context and self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "m", "max_model_len": 100}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.posts.append(body)
                text = body["prompt"]  # text, or token ids
                if len(text) > 50:
                    self._send(400, {"error": {"message": "This model's maximum context length is 100 tokens. "
                                               f"However, your prompt contains {len(text)} input tokens, which "
                                               "exceeds this limit even without any output tokens.",
                                               "type": "BadRequestError", "code": 400}})
                    return
                self._send(200, {"choices": [{"index": i, "text": "ok", "finish_reason": "stop"}
                                             for i in range(body["n"])]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(params=[True, False], ids=["says-context", "silent"])
def context_server(request: pytest.FixtureRequest) -> Iterator[ContextServer]:
    s = ContextServer(says_context=request.param)
    yield s
    s.close()


def test_openai_prompt_too_long_is_a_status_never_an_error(context_server: ContextServer) -> None:
    backend = create_model_backend("openai", model="m", base_url=context_server.url, chat=False, max_retries=0)
    with backend:
        too_long_ids = Prompt("ids", "x", prompt_token_ids=tuple(range(120)))  # known too long: never sent
        refused = Prompt("text", "y" * 80)  # tokens unknown here: the server refuses it
        fine = Prompt("fine", "z" * 10)
        out = backend.generate([too_long_ids, refused, fine], SamplingParams(n=2, max_tokens=4))
        assert [c.finish_reason for c in out[1]] == [PROMPT_TOO_LONG] * 2
        assert [c.text for c in out[2]] == ["ok", "ok"]
        assert [c.finish_reason for c in out[0]] == [PROMPT_TOO_LONG] * 2
        sent_ids = [p for p in context_server.posts if isinstance(p["prompt"], list)]
        if backend.context_length == 100:  # the server said its context: the long ids never left
            assert sent_ids == []
        else:
            assert len(sent_ids) == 1


def test_served_context_length_reads_vllm_model_cards() -> None:
    reply = {"data": [{"id": "other", "max_model_len": 5}, {"id": "m", "max_model_len": 4096}]}
    assert served_context_length(reply, "m") == 4096
    assert served_context_length({"data": [{"id": "m"}]}, "m") is None
    assert served_context_length({}, "m") is None
