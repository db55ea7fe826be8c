"""Backend options on the command line are checked once, before anything starts: an option the
chosen backend does not take, a missing one or a bad value is one line on stderr and exit 2,
never a traceback and never silently dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from verify_cli.cli.app import main


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert "Traceback" not in captured.err + captured.out
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("error: ")
    return lines[0]


def test_train_with_hf_and_no_model_says_which_option_is_missing(
        sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(sample_tasks_dir), "--backend", "hf", "--out", str(tmp_path / "r")]) == 2
    line = one_error_line(capsys)
    assert "model backend 'hf' needs option --model" in line
    assert not (tmp_path / "r").exists()  # nothing started


def test_an_unknown_backend_option_is_refused_not_ignored(
        sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", str(sample_tasks_dir), "--backend", "replay", "--model", str(tmp_path / "x.jsonl"),
                 "--backend-option", "temprature=0.5", "--out", str(tmp_path / "r")])
    assert code == 2
    assert "model backend 'replay' has no option 'temprature' (its options: model)" in one_error_line(capsys)


def test_a_base_url_that_is_not_a_url_is_a_usage_error(
        sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["difficulty", str(sample_tasks_dir), "--backend", "openai", "--model", "m",
                 "--base-url", "foo", "--max-retries", "0", "--out", str(tmp_path / "d")])
    assert code == 2
    line = one_error_line(capsys)
    assert "model backend 'openai'" in line and "base_url 'foo' is not an http(s) URL" in line


def test_an_option_of_another_model_backend_is_refused(
        sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["difficulty", str(sample_tasks_dir), "--backend", "replay", "--model", str(tmp_path / "x.jsonl"),
                 "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "d")])
    assert code == 2
    assert "model backend 'replay' has no option --base-url (base_url)" in one_error_line(capsys)


@pytest.mark.parametrize(("flags", "message"), [
    (["--docker-mode", "single-use"], "sandbox backend 'process' has no option --docker-mode"),
    (["--pool-size", "3"], "sandbox backend 'process' has no option --pool-size"),
])
def test_a_docker_option_with_another_sandbox_is_refused(
        flags: list[str], message: str, make_task: object, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root = make_task("ok")  # type: ignore[operator]
    for command in (["check-tasks", str(root), "--no-cache"], ["audit", str(root)]):
        assert main([*command, "--sandbox", "process", *flags]) == 2
        assert message in one_error_line(capsys)


def test_a_bad_docker_mode_is_refused_before_any_engine_is_asked(
        make_task: object, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_task("ok")  # type: ignore[operator]
    assert main(["check-tasks", str(root), "--no-cache", "--sandbox", "docker", "--docker-mode", "warm"]) == 2
    assert "sandbox backend 'docker': unknown docker mode 'warm'" in one_error_line(capsys)


def test_train_takes_base_url_as_difficulty_and_agent_run_do(make_task: Any, tmp_path: Path) -> None:
    """``train --base-url`` (it needed ``--backend-option base_url=...``): the run samples from
    the server it names, and its rewards are the grades of what the server answered."""
    from tests.models.test_openai import ScriptedServer

    root = make_task("sum")
    answer = "```python solution.py\n" + (root / "solution" / "solution.py").read_text() + "```\n"
    server = ScriptedServer(lambda body: {"choices": [
        {"index": i, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
        for i in range(body.get("n", 1))]})
    server.thread.start()
    try:
        code = main(["train", str(root), "--backend", "openai", "--model", "m", "--base-url", server.url,
                     "--no-chat", "--chat", "-G", "2", "-B", "1", "--steps", "1", "--sandbox", "process",
                     "--jobs", "2", "--out", str(tmp_path / "run"), "--json", str(tmp_path / "run.json")])
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
    assert code == 0
    assert server.requests and all(path.endswith("/chat/completions") for path, _ in server.requests)
    summary = json.loads((tmp_path / "run.json").read_text())
    assert summary["status_counts"] == {"ok": 2}, summary


def test_train_refuses_base_url_for_a_backend_without_one(
        sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["train", str(sample_tasks_dir), "--backend", "replay", "--model", str(tmp_path / "x.jsonl"),
                 "--base-url", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r")])
    assert code == 2
    assert "model backend 'replay' has no option --base-url (base_url)" in one_error_line(capsys)


def test_difficulty_and_agent_run_take_backend_options_checked_like_trains(
        sample_tasks_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # vllm's options (max_model_len, enforce_eager, dtype) have no flag of their own: --backend-option
    # reaches them, and a misspelt one is refused before any engine starts (vllm need not be installed).
    code = main(["difficulty", str(sample_tasks_dir), "--backend", "vllm", "--model", str(tmp_path),
                 "--backend-option", "max_model_length=4096", "--out", str(tmp_path / "o")])
    assert code == 2
    assert "model backend 'vllm' has no option 'max_model_length'" in refusal(capsys)
    code = main(["agent", "run", str(sample_tasks_dir / "coding-roman-numerals"), "--backend", "vllm",
                 "--model", str(tmp_path), "--backend-option", "enforce_eagre=true"])
    assert code == 2
    assert "model backend 'vllm' has no option 'enforce_eagre'" in refusal(capsys)


def refusal(capsys: pytest.CaptureFixture[str]) -> str:
    """The one error message (the console may wrap it: its options make it long)."""
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out and captured.err.startswith("error: ")
    return " ".join(captured.err.split())
