"""The ``openai`` backend: any OpenAI-compatible server (``vllm serve``, SGLang, others).

``/v1/completions`` (prompt text) or ``/v1/chat/completions`` (messages), ``n`` completions per
request, at most ``concurrency`` requests in flight, retries with exponential backoff (and the
server's ``Retry-After``) on 429, 5xx, timeouts and dropped connections. Token ids are taken
where the server returns them (vLLM's ``token_ids`` per choice); log-probabilities of the
sampled tokens when asked for.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

from verify_cli.backend_config import BackendConfig
from verify_cli.errors import ExitCode, UsageError
from verify_cli.models.base import (
    Completion,
    ModelBackend,
    ModelBackendError,
    Prompt,
    SamplingParams,
    prompt_seed,
)
from verify_cli.models.context import too_long_completions
from verify_cli.models.registry import register_model_backend

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class ServerError(ModelBackendError):
    """The server kept failing (or refused the request): nothing could be sampled."""

    exit_code = ExitCode.INFRA


class ContextExceededError(ServerError):
    """The server refused a prompt longer than the model's context (HTTP 400). The backend turns
    it into ``prompt_too_long`` samples; it reaches a caller only through :meth:`OpenAIBackend._post`."""


#: How vLLM (and OpenAI) say a prompt does not fit: "This model's maximum context length is N tokens".
_CONTEXT_EXCEEDED = re.compile(r"maximum context length is (\d+) tokens|longer than the maximum model length",
                               re.IGNORECASE)


def served_context_length(models_reply: Mapping[str, Any], model: str) -> int | None:
    """The ``max_model_len`` a ``GET /v1/models`` reply gives for ``model`` (vLLM's servers say
    it; others do not: None)."""
    entries = models_reply.get("data")
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("id") == model:
            value = entry.get("max_model_len")
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
    return None


def request_body(prompt: Prompt, params: SamplingParams, *, model: str, chat: bool,
                 seed: int | None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one request for ``prompt``'s ``params.n`` completions."""
    body: dict[str, Any] = {"model": model, "n": params.n, "temperature": params.temperature,
                            "top_p": params.top_p, "max_tokens": params.max_tokens}
    if seed is not None:
        body["seed"] = seed
    if params.stop:
        body["stop"] = list(params.stop)
    if chat:
        if not prompt.messages:
            raise UsageError(f"prompt of {prompt.task_id} has no chat messages for /v1/chat/completions")
        body["messages"] = [dict(m) for m in prompt.messages]
        if params.logprobs:
            body["logprobs"] = True
    else:
        body["prompt"] = list(prompt.prompt_token_ids) if prompt.prompt_token_ids is not None else prompt.text
        if params.logprobs:
            body["logprobs"] = 1
    body.update(extra or {})
    return body


def _choice_logprobs(choice: Mapping[str, Any], chat: bool) -> tuple[float, ...] | None:
    lp = choice.get("logprobs")
    if not isinstance(lp, Mapping):
        return None
    if chat:
        content = lp.get("content")
        if not isinstance(content, list):
            return None
        return tuple(float(t["logprob"]) for t in content)
    values = lp.get("token_logprobs")
    return tuple(float(v) for v in values) if isinstance(values, list) else None


def completions_from_response(data: Mapping[str, Any], *, chat: bool) -> list[Completion]:
    """The completions of one response body, in choice ``index`` order."""
    choices = data.get("choices")
    if not isinstance(choices, list):
        raise ModelBackendError(f"the server's reply has no 'choices' list: {str(data)[:200]}")
    prompt_ids = data.get("prompt_token_ids")
    out = []
    for choice in sorted(choices, key=lambda c: c.get("index", 0)):
        message = choice.get("message") or {}
        text = (message.get("content") if chat else choice.get("text")) or ""
        ids = choice.get("token_ids")
        out.append(Completion(
            text=text, token_ids=tuple(int(t) for t in ids) if isinstance(ids, list) else (),
            logprobs=_choice_logprobs(choice, chat), finish_reason=str(choice.get("finish_reason") or "stop"),
            prompt_token_ids=tuple(int(t) for t in prompt_ids) if isinstance(prompt_ids, list) else None))
    return out


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class OpenAIConfig(BackendConfig):
    """``model``: the served model name; ``base_url``: the server's API root (``http://HOST:PORT/v1``);
    the rest: endpoint, requests in flight, retries and their backoff, the request timeout, the
    environment variable holding the API key, fields added to every request body."""

    model: str = field(metadata={"help": "the served model name"})
    base_url: str = "http://127.0.0.1:8000/v1"
    chat: bool = True
    concurrency: int = 8
    max_retries: int = 5
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 30.0
    timeout_seconds: float = 600.0
    api_key_env: str = "OPENAI_API_KEY"
    extra_body: Mapping[str, Any] | None = None

    def check(self) -> str | None:
        url = urlsplit(self.base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            return (f"base_url {self.base_url!r} is not an http(s) URL: give the server's API root, "
                    "e.g. http://127.0.0.1:8000/v1")
        if self.concurrency < 1:
            return f"concurrency must be >= 1, got {self.concurrency}"
        if self.max_retries < 0:
            return f"max_retries must be >= 0, got {self.max_retries}"
        if self.timeout_seconds <= 0:
            return f"timeout_seconds must be > 0, got {self.timeout_seconds}"
        return None


@register_model_backend("openai")
class OpenAIBackend(ModelBackend):
    """``base_url`` is the server's API root (``http://127.0.0.1:8000/v1``); ``model`` the served
    model name. The API key, if any, is read from the environment variable ``api_key_env``."""

    requires: ClassVar[tuple[str, ...]] = ("httpx",)
    config_type = OpenAIConfig

    def __init__(self, model: str, *, base_url: str = "http://127.0.0.1:8000/v1", chat: bool = True,
                 concurrency: int = 8, max_retries: int = 5, backoff_seconds: float = 0.5,
                 max_backoff_seconds: float = 30.0, timeout_seconds: float = 600.0,
                 api_key_env: str = "OPENAI_API_KEY", extra_body: Mapping[str, Any] | None = None) -> None:
        import httpx

        self.model = model
        self.base_url = base_url.rstrip("/")
        self.chat = chat
        self.concurrency = max(1, concurrency)
        self.max_retries = max(0, max_retries)
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.extra_body = dict(extra_body or {})
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout_seconds, connect=30.0),
                                    limits=httpx.Limits(max_connections=self.concurrency))
        self._lock = threading.Lock()
        #: Counters for reports: requests sent, retried, failed for good.
        self.stats = {"requests": 0, "retries": 0, "failures": 0}
        self._context: tuple[int | None] | None = None  # asked of the server once

    @property
    def context_length(self) -> int | None:
        """The served model's ``max_model_len``, as ``GET /v1/models`` says it (vLLM's servers do);
        None when the server does not say (asked once)."""
        if self._context is None:
            found: int | None = None
            try:
                response = self._client.get(f"{self.base_url}/models")
                if response.status_code == 200:
                    data = response.json()
                    found = served_context_length(data, self.model) if isinstance(data, dict) else None
            except Exception:  # a server that cannot say leaves it to the server to decide
                found = None
            self._context = (found,)
        return self._context[0]

    @property
    def model_id(self) -> str:
        return f"{self.base_url}#{self.model}"

    @property
    def agent_protocol(self) -> str:
        """How agent episodes talk to it (verify_cli.agents.protocol): the chat API with
        ``tools``, or the text protocol over ``/v1/completions``."""
        return "openai-tools" if self.chat else "text"

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions" if self.chat else f"{self.base_url}/completions"

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    def _sleep_before_retry(self, attempt: int, server_says: float | None) -> None:
        delay = self.backoff_seconds * (2 ** attempt)
        if server_says is not None:
            delay = max(delay, server_says)
        time.sleep(min(delay, self.max_backoff_seconds))

    def post_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST one ``/chat/completions`` body as it is (agent turns with ``tools``), with the
        backend's retries; the reply's JSON object."""
        return self._post(body, endpoint=f"{self.base_url}/chat/completions")

    def _post(self, body: dict[str, Any], *, endpoint: str | None = None) -> dict[str, Any]:
        import httpx

        endpoint = endpoint or self.endpoint
        last = ""
        for attempt in range(self.max_retries + 1):
            self._count("requests")
            wait_hint = None
            try:
                response = self._client.post(endpoint, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as e:
                last = f"{type(e).__name__}: {e}"
            else:
                if response.status_code == 200:
                    try:
                        data = response.json()
                    except ValueError:
                        last = f"a reply that is not JSON: {response.text[:200]!r}"
                    else:
                        if isinstance(data, dict):
                            return data
                        last = "a reply that is not a JSON object"
                elif response.status_code in RETRY_STATUSES:
                    last = f"HTTP {response.status_code}: {response.text[:200]}"
                    wait_hint = _retry_after(response.headers)
                else:
                    self._count("failures")
                    if response.status_code == 400 and _CONTEXT_EXCEEDED.search(response.text):
                        raise ContextExceededError(f"{endpoint}: the prompt does not fit the model's context: "
                                                   f"{response.text[:300]}")
                    raise ServerError(f"{endpoint} refused the request: HTTP {response.status_code}: "
                                      f"{response.text[:300]}",
                                      hint="check the model name and the sampling options the server takes")
            if attempt < self.max_retries:
                self._count("retries")
                self._sleep_before_retry(attempt, wait_hint)
        self._count("failures")
        tries = self.max_retries + 1
        raise ServerError(f"{endpoint} failed {tries} time{'s' if tries != 1 else ''}; last: {last}",
                          hint="is the server up and reachable? raise --max-retries for a busy server")

    def _one(self, prompt: Prompt, params: SamplingParams, index: int) -> list[Completion]:
        """The prompt's ``n`` completions; a prompt that does not fit the context (known before
        sending where the prompt's tokens and the served context are, else as the server says)
        gives ``prompt_too_long`` samples."""
        if not self.prompt_fits(prompt):
            return too_long_completions(params.n, prompt.prompt_token_ids)
        body = request_body(prompt, params, model=self.model, chat=self.chat,
                            seed=prompt_seed(prompt, params, index), extra=self.extra_body)
        try:
            return completions_from_response(self._post(body), chat=self.chat)
        except ContextExceededError:
            return too_long_completions(params.n, prompt.prompt_token_ids)

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai") as pool:
            futures = [pool.submit(self._one, p, params, i) for i, p in enumerate(prompts)]
            return [f.result() for f in futures]

    def generate_stream(self, prompts: Sequence[Prompt], params: SamplingParams, *,
                        chunk_size: int = 0) -> Iterator[tuple[int, Completion]]:
        """Completions of each request as soon as it returns, ``concurrency`` requests at a time."""
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="openai") as pool:
            todo = iter(enumerate(prompts))
            pending: dict[Future[list[Completion]], int] = {}
            try:
                while True:
                    for i, p in todo:
                        pending[pool.submit(self._one, p, params, i)] = i
                        if len(pending) >= self.concurrency:
                            break
                    if not pending:
                        return
                    done, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in done:
                        i = pending.pop(fut)
                        for completion in fut.result():
                            yield i, completion
            finally:
                for fut in pending:
                    fut.cancel()

    def close(self) -> None:
        self._client.close()
