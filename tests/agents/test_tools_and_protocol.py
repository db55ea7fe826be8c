"""The agent's tools and the model protocol, without a sandbox: schemas, call checking,
truncation, the text protocol and OpenAI chat replies with tool calls."""

from __future__ import annotations

import json

from verify_cli.agents.protocol import (
    chat_tools_body,
    parse_tool_calls,
    render_text_protocol,
    turn_from_chat_response,
)
from verify_cli.agents.tools import TOOLS, TOOLS_BY_NAME, check_call, tool_call, truncate
from verify_cli.models.base import SamplingParams


def test_the_five_tools_are_named_exactly_and_have_object_schemas() -> None:
    assert [t.name for t in TOOLS] == ["bash", "read_file", "write_file", "run_tests", "submit"]
    for t in TOOLS:
        entry = t.openai()
        assert entry["type"] == "function" and entry["function"]["name"] == t.name
        assert entry["function"]["parameters"]["type"] == "object"
    assert TOOLS_BY_NAME["write_file"].parameters["required"] == ["path", "content"]


def test_malformed_calls_are_explained_not_raised() -> None:
    assert check_call(tool_call("bash", '{"command": "ls"}')) is None
    assert "unknown tool 'rm'" in (check_call(tool_call("rm", "{}")) or "")
    assert "not a JSON object" in (check_call(tool_call("bash", "{command: ls")) or "")
    assert "'command' is a required property" in (check_call(tool_call("bash", "{}")) or "")
    wrong_type = check_call(tool_call("write_file", {"path": "a.py", "content": 3}))
    assert wrong_type is not None and "/content" in wrong_type
    extra = check_call(tool_call("submit", {"now": True}))
    assert extra is not None and "Additional properties" in extra


def test_truncation_keeps_head_and_tail_and_says_how_much_was_cut() -> None:
    text = "A" * 600 + "B" * 400
    shown, cut = truncate(text, 300)
    assert cut == 700
    assert shown.startswith("A" * 200) and shown.endswith("B" * 100)
    assert "[... 700 characters cut ...]" in shown
    assert truncate("short", 300) == ("short", 0)


def test_text_protocol_reads_calls_and_reports_broken_ones() -> None:
    text = ('I will look first.\n<tool_call>{"name": "bash", "arguments": {"command": "ls -la"}}</tool_call>\n'
            '<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>\n'
            '<tool_call>{"name": "bash", "arguments": {"command": </tool_call>\n<tool_call>{"name": "submit"')
    calls, bad = parse_tool_calls(text)
    assert [(c.name, dict(c.arguments or {})) for c in calls] == [
        ("bash", {"command": "ls -la"}), ("read_file", {"path": "a.py"})]
    assert len(bad) == 2
    assert "not JSON" in bad[0] and "never closed" in bad[1]


def test_text_protocol_rendering_teaches_the_tools_and_replays_the_conversation() -> None:
    messages = [
        {"role": "system", "content": "be good"},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "looking", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "bash", "content": "exit code 0\na.py"},
    ]
    plain = render_text_protocol(messages, TOOLS)
    assert [m["role"] for m in plain] == ["system", "user", "assistant", "user"]
    assert plain[0]["content"].startswith("be good") and "<tool_call>" in plain[0]["content"]
    assert "write_file" in plain[0]["content"]
    again, _ = parse_tool_calls(plain[2]["content"])
    assert [(c.name, dict(c.arguments or {})) for c in again] == [("bash", {"command": "ls"})]
    assert plain[3]["content"].startswith('<tool_response name="bash">') and "a.py" in plain[3]["content"]



def test_text_protocol_replays_a_reply_that_wrote_its_calls_as_written_once() -> None:
    text = 'ok\n<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
    calls, _ = parse_tool_calls(text)
    messages = [{"role": "user", "content": "fix it"},
                {"role": "assistant", "content": text, "tool_calls": [c.to_openai() for c in calls]}]
    plain = render_text_protocol(messages, TOOLS)
    assert plain[-1]["content"] == text  # as the model wrote it: the call not written a second time

def test_openai_body_carries_the_tools_and_the_reply_gives_the_calls() -> None:
    body = chat_tools_body([{"role": "user", "content": "hi"}], TOOLS, SamplingParams(max_tokens=64, seed=3),
                           model="m")
    assert body["tool_choice"] == "auto" and body["seed"] == 3 and body["max_tokens"] == 64
    assert [t["function"]["name"] for t in body["tools"]] == [t.name for t in TOOLS]
    reply = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "x1", "type": "function", "function": {"name": "write_file",
                                                          "arguments": json.dumps({"path": "a", "content": "b"})}},
            {"id": "x2", "type": "function", "function": {"arguments": "{}"}}]}}]}
    turn = turn_from_chat_response(reply)
    assert [(c.id, c.name, dict(c.arguments or {})) for c in turn.tool_calls] == [
        ("x1", "write_file", {"path": "a", "content": "b"})]
    assert turn.malformed and "no function name" in turn.malformed[0]
    # a server without a tool parser hands the calls back as text: read by the text protocol
    text_reply = {"choices": [{"message": {"content": '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'}}]}
    assert [c.name for c in turn_from_chat_response(text_reply).tool_calls] == ["submit"]
