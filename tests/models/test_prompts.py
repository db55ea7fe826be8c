"""Prompts carry the task and its starter files; extraction takes files back or says why not."""

from __future__ import annotations

from pathlib import Path

from verify_cli.models.prompts import build_prompt, extract_files, extract_for_task, single_editable_file
from verify_cli.tasks.loader import load_task


def test_prompt_shows_the_task_the_starter_and_visible_tests_but_never_hidden_tests(sample_tasks_dir: Path) -> None:
    task = load_task(sample_tasks_dir / "coding-roman-numerals")
    prompt = build_prompt(task)
    assert prompt.task_id == "coding/roman-numerals"
    assert "Implement two functions in `roman.py`" in prompt.text
    assert (task.root / "starter" / "roman.py").read_text().strip() in prompt.text
    assert "tests/test_roman.py" in prompt.text
    assert "test_roman_edge" not in prompt.text and "hidden_tests" not in prompt.text
    assert [m["role"] for m in prompt.messages] == ["system", "user"]
    assert "```python roman.py" in prompt.messages[-1]["content"]
    assert prompt.prompt_token_ids is None


def test_single_editable_file(sample_tasks_dir: Path, make_task) -> None:  # type: ignore[no-untyped-def]
    assert single_editable_file(load_task(sample_tasks_dir / "coding-word-wrap-js")) == "wrap.js"
    two = make_task("two", mutate=lambda d: d.update(editable=["solution.py", "extra.py"]),
                    files={"solution/extra.py": "X = 1\n", "starter/extra.py": "X = 0\n"})
    assert single_editable_file(load_task(two)) is None


def test_named_blocks_in_every_common_form() -> None:
    text = (
        "Here is the fix.\n\n```python roman.py\nA = 1\n```\n\n"
        "```js title=\"lib/util.js\"\nexport const b = 2;\n```\n\n"
        "**pkg/mod.py**\n```python\nC = 3\n```\n\n"
        "```python:other.py\nD = 4\n```\n"
    )
    ex = extract_files(text, ["*.py", "lib/*.js", "pkg/*.py"])
    assert ex.ok
    assert ex.files == {"roman.py": "A = 1\n", "lib/util.js": "export const b = 2;\n",
                        "pkg/mod.py": "C = 3\n", "other.py": "D = 4\n"}


def test_last_block_for_a_path_wins_and_longer_fences_nest() -> None:
    text = "```python a.py\nold\n```\nthen\n````markdown a.py\n```\ninner\n```\n````\n"
    assert extract_files(text, ["a.py"]).files == {"a.py": "```\ninner\n```\n"}


def test_single_file_tasks_take_an_unnamed_block_or_a_bare_answer() -> None:
    assert extract_files("Sure:\n```python\nX = 1\n```\n```\nprint(X)\n```\n", ["s.py"], "s.py").files == {
        "s.py": "print(X)\n"}
    assert extract_files("def f():\n    return 1\n", ["s.py"], "s.py").files == {"s.py": "def f():\n    return 1\n"}
    # A block cut off by max_tokens is still the candidate (it will fail its tests, not parse).
    assert extract_files("```python\ndef f(:\n", ["s.py"], "s.py").files == {"s.py": "def f(:\n"}


def test_unparseable_answers_are_parse_errors_not_exceptions() -> None:
    assert extract_files("", ["s.py"], "s.py").error == "the answer is empty"
    assert extract_files("```python\n\n```", ["s.py"], "s.py").error == "the answer's code block is empty"
    several = extract_files("```python\nX = 1\n```", ["a.py", "b.py"])
    assert not several.ok and "several editable files" in (several.error or "")
    assert not extract_files("no code here", ["a.py", "b.py"]).ok
    # A sentence mentioning a file is not a file name line.
    assert not extract_files("I changed a.py as follows\n```\nX\n```", ["a.py", "b.py"]).ok


def test_a_bare_answer_that_is_not_python_is_a_parse_error_not_a_file() -> None:
    prose = "Sure! Here is my solution: replace the loop with a sum.\n"
    result = extract_files(prose, ["s.py"], "s.py")
    assert not result.ok and result.files == {}
    assert "no fenced code block" in (result.error or "") and "not valid Python (line 1" in (result.error or "")
    assert not extract_files("x = 1\0\n", ["s.py"], "s.py").ok  # a NUL byte: no Python file
    assert not extract_files("(" * 5000 + ")" * 5000, ["s.py"], "s.py").ok  # nesting past the parser's limit
    # A bare answer that parses is still the file; a fenced block is taken even when it does not parse.
    assert extract_files("x = 1\n", ["s.py"], "s.py").files == {"s.py": "x = 1\n"}
    assert extract_files("```\nSure! not python (\n```\n", ["s.py"], "s.py").files == {
        "s.py": "Sure! not python (\n"}


def test_a_bare_answer_to_a_file_of_no_parsed_language_is_taken_as_it_is() -> None:
    # A text answer (toy_sums' answer.txt) has no syntax to check: it is the file, as before.
    assert extract_files("7", ["answer.txt"], "answer.txt").files == {"answer.txt": "7\n"}


def test_extract_for_task_uses_the_tasks_editable_file(sample_tasks_dir: Path) -> None:
    task = load_task(sample_tasks_dir / "coding-roman-numerals")
    solution = (task.root / "solution" / "roman.py").read_text()
    ex = extract_for_task(task, f"```python\n{solution}```")
    assert ex.files == {"roman.py": solution}
