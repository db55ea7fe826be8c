"""How an agent's model is asked for its next step, over each kind of model backend.

The conversation is kept as OpenAI chat messages (``system``, ``user``, ``assistant`` with
``tool_calls``, ``tool`` with ``tool_call_id``). An :class:`AgentModel` turns it into the model's
next :class:`ModelTurn` (its text and the tool calls it made):

- :class:`OpenAIToolModel`: an OpenAI-compatible server's chat API with ``tools`` (``vllm serve``
  with a tool parser, SGLang, hosted APIs); tool calls come back as ``tool_calls``;
- :class:`TextProtocolModel`: any backend that only completes text (``replay``, ``hf`` with a
  template that knows no tools, ``/v1/completions``): the tools are described in the system
  message and the model writes each call as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
  (the Hermes/Qwen convention); tool results come back as ``<tool_response>`` user messages;
- :class:`HFToolModel`: the ``hf`` backend; when the model's chat template takes ``tools``
  (``apply_chat_template(tools=...)``) the native messages and tools go through it, else the
  text protocol; either way calls are read in the ``<tool_call>`` format those templates use.

A reply with no usable call is not an error here: the episode shows the model what was wrong.
"""

from __future__ import annotations

import json
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verify_cli.agents.tools import ToolCall, ToolSpec, tool_call
from verify_cli.models.base import ModelBackend, ModelBackendError, Prompt, SamplingParams

Message = dict[str, Any]

TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_OPEN_TAG = "<tool_call>"


@dataclass(frozen=True)
class ModelTurn:
    """The model's reply for one turn: its text, its tool calls (in order), and what the backend
    gives of tokens. ``malformed`` lists tool calls written but unreadable (the text protocol)."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    malformed: tuple[str, ...] = ()
    finish_reason: str = "stop"
    token_ids: tuple[int, ...] = ()
    prompt_token_ids: tuple[int, ...] | None = None
    logprobs: tuple[float, ...] | None = None
    seconds: float = 0.0
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: The tokens the server says it generated (its ``usage.completion_tokens``), when it says.
    usage_tokens: int | None = None


class AgentModel(ABC):
    """A model that acts: given the conversation and the tools, its next turn."""

    name: str = "?"

    @abstractmethod
    def act(self, messages: Sequence[Message], tools: Sequence[ToolSpec], params: SamplingParams) -> ModelTurn:
        """The model's next turn. Raises ModelBackendError when the model could not be asked
        (an infrastructure fault of the episode, never the agent's)."""

    def close(self) -> None:  # noqa: B027 - lifecycle hook, nothing by default
        """Release what the model holds."""


# --- the text protocol ----------------------------------------------------------------------------

TEXT_PROTOCOL = """You can use these tools. To call one, write on its own line
<tool_call>{{"name": "TOOL", "arguments": {{...}}}}</tool_call>
with the arguments as a JSON object; you may make several calls in one reply. Each result comes
back in a <tool_response> message. Call submit when your files are ready.

Tools:
{tools}"""


def text_protocol_instructions(tools: Sequence[ToolSpec]) -> str:
    """The system-message text that teaches a text-only model the tools and the call format."""
    lines = [f"- {t.name}: {t.description} Arguments (JSON schema): "
             f"{json.dumps(dict(t.parameters.get('properties', {})), sort_keys=True)}" for t in tools]
    return TEXT_PROTOCOL.format(tools="\n".join(lines))


def parse_tool_calls(text: str, *, prefix: str = "call") -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
    """The ``<tool_call>`` blocks of ``text``: the calls read, and what could not be read."""
    calls: list[ToolCall] = []
    bad: list[str] = []
    for i, m in enumerate(TOOL_CALL_RE.finditer(text)):
        body = m.group(1)
        try:
            data = json.loads(body)
        except json.JSONDecodeError as e:
            bad.append(f"<tool_call> #{i + 1} is not JSON ({e.msg} at character {e.pos}): {body[:120]!r}")
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            bad.append(f"<tool_call> #{i + 1} needs a JSON object with a string 'name': {body[:120]!r}")
            continue
        args = data.get("arguments", data.get("parameters", {}))
        calls.append(tool_call(data["name"], args if isinstance(args, (dict, str)) else None, f"{prefix}_{i}"))
    closed = len(TOOL_CALL_RE.findall(text))
    if text.count(_OPEN_TAG) > closed:
        bad.append("a <tool_call> was opened but never closed with </tool_call>")
    return tuple(calls), tuple(bad)


def render_text_protocol(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[dict[str, str]]:
    """``messages`` as plain role/content messages: the tools taught in the system message,
    assistant calls written as ``<tool_call>`` lines, tool results as ``<tool_response>`` user turns."""
    out: list[dict[str, str]] = []
    instructions = text_protocol_instructions(tools)
    has_system = bool(messages) and messages[0].get("role") == "system"
    if not has_system:
        out.append({"role": "system", "content": instructions})
    for i, m in enumerate(messages):
        role = m.get("role", "user")
        content = str(m.get("content") or "")
        if role == "system" and i == 0:
            out.append({"role": "system", "content": f"{content}\n\n{instructions}".strip()})
        elif role == "assistant":
            # A text-protocol reply already holds its calls as written; native calls are written out.
            calls = "" if TOOL_CALL_RE.search(content) else "".join(
                f"\n<tool_call>{json.dumps({'name': c['function']['name'], 'arguments': _decoded(c)})}</tool_call>"
                for c in m.get("tool_calls") or ())
            out.append({"role": "assistant", "content": (content + calls).strip()})
        elif role == "tool":
            out.append({"role": "user", "content": f"<tool_response name=\"{m.get('name', '')}\">\n"
                                                   f"{content}\n</tool_response>"})
        else:
            out.append({"role": role, "content": content})
    return out


def _decoded(call: Mapping[str, Any]) -> Any:
    raw = call.get("function", {}).get("arguments", "")
    try:
        return json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
    except ValueError:
        return raw


def _plain_text(messages: Sequence[Mapping[str, str]]) -> str:
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages) + "\n\n[assistant]\n"


class TextProtocolModel(AgentModel):
    """Any text-completing backend, taught the tools by the text protocol."""

    def __init__(self, backend: ModelBackend, *, task_id: str = "agent") -> None:
        self.backend = backend
        self.task_id = task_id
        self.name = f"{backend.name}+text-protocol"
        # Backends need not be thread-safe (models.base): episodes in flight take turns here.
        self._lock = threading.Lock()

    def render(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Prompt:
        plain = render_text_protocol(messages, tools)
        return Prompt(task_id=self.task_id, text=_plain_text(plain), messages=tuple(plain))

    def act(self, messages: Sequence[Message], tools: Sequence[ToolSpec], params: SamplingParams) -> ModelTurn:
        started = time.monotonic()
        prompt = self.render(messages, tools)
        with self._lock:
            completions = self.backend.generate([prompt], SamplingParams(
                n=1, temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens,
                seed=params.seed, logprobs=params.logprobs, stop=params.stop))
        if not completions or not completions[0]:
            raise ModelBackendError(f"model backend {self.backend.name!r} returned no completion")
        c = completions[0][0]
        calls, bad = parse_tool_calls(c.text)
        return ModelTurn(text=c.text, tool_calls=calls, malformed=bad, finish_reason=c.finish_reason,
                         token_ids=c.token_ids, prompt_token_ids=c.prompt_token_ids or prompt.prompt_token_ids,
                         logprobs=c.logprobs, seconds=time.monotonic() - started)

    def close(self) -> None:
        self.backend.close()


class HFToolModel(TextProtocolModel):
    """The ``hf`` backend: the model's own chat template with ``tools`` where it takes them."""

    def render(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Prompt:
        tokenizer = getattr(self.backend, "tokenizer", None)
        template = str(getattr(tokenizer, "chat_template", "") or "")
        if tokenizer is None or not template:
            return super().render(messages, tools)
        if "tools" in template:
            native = [dict(m) for m in messages]
            for m in native:  # templates read arguments as objects
                for c in m.get("tool_calls") or ():
                    c["function"] = {**c["function"], "arguments": _decoded(c)}
            text = tokenizer.apply_chat_template(native, tools=[t.openai() for t in tools], tokenize=False,
                                                 add_generation_prompt=True)
            plain: Sequence[Mapping[str, str]] = ()
        else:
            plain = render_text_protocol(messages, tools)
            text = tokenizer.apply_chat_template([dict(m) for m in plain], tokenize=False,
                                                 add_generation_prompt=True)
        ids = tuple(int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"])
        return Prompt(task_id=self.task_id, text=text, messages=tuple(plain), prompt_token_ids=ids)


# --- OpenAI-compatible chat with tools ------------------------------------------------------------

def chat_tools_body(messages: Sequence[Message], tools: Sequence[ToolSpec], params: SamplingParams, *,
                    model: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON body of one ``/chat/completions`` request with ``tools``."""
    body: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages],
                            "tools": [t.openai() for t in tools], "tool_choice": "auto", "n": 1,
                            "temperature": params.temperature, "top_p": params.top_p,
                            "max_tokens": params.max_tokens}
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    if params.logprobs:
        body["logprobs"] = True
    body.update(extra or {})
    return body


def turn_from_chat_response(data: Mapping[str, Any], seconds: float = 0.0) -> ModelTurn:
    """The first choice of a chat reply as a ModelTurn; calls written as text (a server without
    a tool parser) are read by the text protocol."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ModelBackendError(f"the server's reply has no 'choices': {str(data)[:200]}")
    choice = choices[0]
    message = choice.get("message") or {}
    text = str(message.get("content") or "")
    calls: list[ToolCall] = []
    bad: list[str] = []
    for i, c in enumerate(message.get("tool_calls") or ()):
        fn = c.get("function") if isinstance(c, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            bad.append(f"tool call #{i + 1} has no function name: {str(c)[:120]}")
            continue
        calls.append(tool_call(fn["name"], fn.get("arguments"), str(c.get("id") or f"call_{i}")))
    if not calls and _OPEN_TAG in text:
        calls_t, bad_t = parse_tool_calls(text)
        calls, bad = list(calls_t), bad + list(bad_t)
    ids = choice.get("token_ids")
    prompt_ids = data.get("prompt_token_ids")
    lp = choice.get("logprobs")
    logprobs = None
    if isinstance(lp, Mapping) and isinstance(lp.get("content"), list):
        logprobs = tuple(float(t["logprob"]) for t in lp["content"])
    usage = data.get("usage")
    used = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    return ModelTurn(text=text, tool_calls=tuple(calls), malformed=tuple(bad),
                     usage_tokens=used if isinstance(used, int) and not isinstance(used, bool) and used >= 0 else None,
                     finish_reason=str(choice.get("finish_reason") or "stop"),
                     token_ids=tuple(int(t) for t in ids) if isinstance(ids, list) else (),
                     prompt_token_ids=tuple(int(t) for t in prompt_ids) if isinstance(prompt_ids, list) else None,
                     logprobs=logprobs, seconds=seconds, raw={"message": dict(message)})


class OpenAIToolModel(AgentModel):
    """An OpenAI-compatible server's chat API with tools, through the ``openai`` backend (its
    retries, backoff and ``Retry-After`` handling)."""

    def __init__(self, backend: Any) -> None:
        from verify_cli.models.openai_backend import OpenAIBackend

        if not isinstance(backend, OpenAIBackend):
            raise TypeError("OpenAIToolModel needs the openai backend")
        self.backend = backend
        self.name = f"openai:{backend.model}"

    def act(self, messages: Sequence[Message], tools: Sequence[ToolSpec], params: SamplingParams) -> ModelTurn:
        started = time.monotonic()
        body = chat_tools_body(messages, tools, params, model=self.backend.model, extra=self.backend.extra_body)
        data = self.backend.post_chat(body)
        return turn_from_chat_response(data, time.monotonic() - started)

    def close(self) -> None:
        self.backend.close()


class VLLMToolModel(TextProtocolModel):
    """The ``vllm`` backend: ``LLM.chat(messages, sampling_params, tools=...)`` renders the model's
    own template with the tools; calls are read in the ``<tool_call>`` format. (Needs a GPU; the
    rendering and parsing are the text protocol's, tested here.)"""

    def act(self, messages: Sequence[Message], tools: Sequence[ToolSpec], params: SamplingParams) -> ModelTurn:
        llm = getattr(self.backend, "llm", None)
        if llm is None or not hasattr(llm, "chat"):
            return super().act(messages, tools, params)
        from vllm import SamplingParams as VSP

        started = time.monotonic()
        sp = VSP(n=1, temperature=params.temperature, top_p=params.top_p, max_tokens=params.max_tokens,
                 seed=params.seed, stop=list(params.stop) or None, logprobs=0 if params.logprobs else None)
        outputs = llm.chat([dict(m) for m in messages], sp, tools=[t.openai() for t in tools], use_tqdm=False)
        out = outputs[0].outputs[0]
        calls, bad = parse_tool_calls(out.text)
        return ModelTurn(text=out.text, tool_calls=calls, malformed=bad, finish_reason=str(out.finish_reason),
                         token_ids=tuple(out.token_ids), prompt_token_ids=tuple(outputs[0].prompt_token_ids or ()),
                         seconds=time.monotonic() - started)


#: Each model backend's ``agent_protocol`` (a class attribute, "text" when absent) names the
#: AgentModel that drives it.
AGENT_PROTOCOLS: Mapping[str, type[AgentModel]] = {
    "openai-tools": OpenAIToolModel, "chat-template": HFToolModel, "vllm-chat": VLLMToolModel,
    "text": TextProtocolModel,
}


def agent_model(backend: ModelBackend) -> AgentModel:
    """The AgentModel for ``backend``: chat with tools where the backend speaks it, else the text
    protocol (through the model's own template where it has one)."""
    protocol = str(getattr(backend, "agent_protocol", "text"))
    cls = AGENT_PROTOCOLS.get(protocol, TextProtocolModel)
    return cls(backend)  # type: ignore[call-arg]


__all__ = ["AGENT_PROTOCOLS", "AgentModel", "HFToolModel", "ModelTurn", "OpenAIToolModel", "TextProtocolModel",
           "VLLMToolModel", "agent_model", "chat_tools_body", "parse_tool_calls", "render_text_protocol",
           "text_protocol_instructions", "turn_from_chat_response"]
