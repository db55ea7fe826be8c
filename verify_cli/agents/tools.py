"""The agent's tools: their names, JSON schemas, and how a model's call of one is checked.

Tools are plain data here (a name, a description, a JSON schema of the arguments): the loop that
calls the model sends them as OpenAI ``tools``, renders them into a chat template or into the
text protocol's instructions, and checks each call against them. What a tool *does* lives in
:mod:`verify_cli.agents.environment`, over a session; this module knows nothing of sandboxes.

The five tools, named exactly so that trainers' agent loops can call them:

- ``bash(command)``: run a shell command in the session's work folder;
- ``read_file(path)``: a file of the work folder, as text;
- ``write_file(path, content)``: replace (or create) a file of the work folder;
- ``run_tests()``: run the visible tests against the current files: per-test pass/fail and messages;
- ``submit()``: end the episode; the editable files are graded by the trusted grader.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, what it does (shown to the model) and its arguments' JSON schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def openai(self) -> dict[str, Any]:
        """The tool as an OpenAI chat ``tools`` entry."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": dict(self.parameters)}}


def _object(properties: Mapping[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(required),
            "additionalProperties": False}


BASH = ToolSpec("bash", "Run a shell command (bash) in the task's work folder and return its exit code, "
                "stdout and stderr. The work folder and anything you install persist between calls.",
                _object({"command": {"type": "string", "description": "the command line"}}, ["command"]))
READ_FILE = ToolSpec("read_file", "Read a file of the work folder (a path relative to it).",
                     _object({"path": {"type": "string"}}, ["path"]))
WRITE_FILE = ToolSpec("write_file", "Write a file of the work folder (created with its folders, or "
                      "replaced) with the given content.",
                      _object({"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"]))
RUN_TESTS = ToolSpec("run_tests", "Run the task's visible tests against the current files; returns each "
                     "test's outcome and the first lines of each failure.", _object({}))
SUBMIT = ToolSpec("submit", "Submit the current files as your answer and end the episode. The editable "
                  "files are graded by the task's full (hidden and visible) tests.", _object({}))

#: Every tool, in the order they are shown to a model.
TOOLS: tuple[ToolSpec, ...] = (BASH, READ_FILE, WRITE_FILE, RUN_TESTS, SUBMIT)
TOOLS_BY_NAME: Mapping[str, ToolSpec] = {t.name: t for t in TOOLS}
_VALIDATORS = {t.name: Draft202012Validator(dict(t.parameters)) for t in TOOLS}


@dataclass(frozen=True)
class ToolCall:
    """One call the model made. ``arguments`` is None when ``raw_arguments`` was not a JSON
    object; :func:`check_call` says what is wrong with a call before it is run."""

    name: str
    arguments: Mapping[str, Any] | None
    raw_arguments: str = ""
    id: str = ""

    def to_openai(self) -> dict[str, Any]:
        """The call as an assistant message's ``tool_calls`` entry."""
        raw = self.raw_arguments or json.dumps(dict(self.arguments or {}))
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": raw}}

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.raw_arguments
                or json.dumps(dict(self.arguments or {}), sort_keys=True)}


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate (a JSON ``"\\ud800"`` decodes to one) replaced: what a
    model writes must be storable as UTF-8 (a trajectory, a Parquet row) whatever it wrote."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def clean_value(value: Any) -> Any:
    """A decoded JSON value with :func:`clean_text` applied to every string in it."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, Mapping):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_value(v) for v in value]
    return value


def tool_call(name: str, raw_arguments: str | Mapping[str, Any] | None, call_id: str = "") -> ToolCall:
    """A ToolCall from a model's name and arguments (a JSON string, or already decoded); every
    string in it is :func:`clean_text`."""
    name, call_id = clean_text(name), clean_text(call_id)
    if isinstance(raw_arguments, Mapping):
        args = clean_value(raw_arguments)
        return ToolCall(name, args, json.dumps(args), call_id)
    raw = clean_text(raw_arguments or "")
    if not raw.strip():
        return ToolCall(name, {}, raw, call_id)
    try:
        decoded = json.loads(raw)
    except ValueError:
        return ToolCall(name, None, raw, call_id)
    return ToolCall(name, clean_value(decoded) if isinstance(decoded, dict) else None, raw, call_id)


def check_call(call: ToolCall, tools: Mapping[str, ToolSpec] = TOOLS_BY_NAME) -> str | None:
    """What is wrong with ``call`` (an observation the model is shown), or None when it can run."""
    spec = tools.get(call.name)
    if spec is None:
        return f"unknown tool {call.name!r}; the tools are: {', '.join(tools)}"
    if call.arguments is None:
        return (f"the arguments of {call.name} are not a JSON object: {call.raw_arguments[:200]!r}; "
                f"expected {json.dumps(dict(spec.parameters.get('properties', {})))}")
    validator = _VALIDATORS.get(call.name) or Draft202012Validator(dict(spec.parameters))
    errors = sorted(validator.iter_errors(dict(call.arguments)), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/" + "/".join(str(p) for p in first.path) if first.path else "the arguments"
        return f"bad arguments for {call.name}: {where}: {first.message}"
    return None


@dataclass(frozen=True)
class Observation:
    """What the model is shown after a call: the text, and whether the call was malformed."""

    text: str
    error: bool = False
    #: Characters cut from the middle of the text (0: shown whole).
    truncated_chars: int = 0
    seconds: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)


def truncate(text: str, limit: int) -> tuple[str, int]:
    """``text`` kept as a head and a tail of about ``limit`` characters in all, with a marker
    saying how many were cut; and that count (0 when it fits)."""
    if limit <= 0 or len(text) <= limit:
        return text, 0
    head = limit * 2 // 3
    tail = max(0, limit - head)
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[len(text) - tail:] if tail else ''}", cut


__all__ = ["BASH", "READ_FILE", "RUN_TESTS", "SUBMIT", "TOOLS", "TOOLS_BY_NAME", "WRITE_FILE",
           "Observation", "ToolCall", "ToolSpec", "check_call", "clean_text", "clean_value", "tool_call",
           "truncate"]
