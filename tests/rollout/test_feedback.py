"""Multi-turn feedback: visible tests only, and the tokens that join one turn to the next."""

from __future__ import annotations

from pathlib import Path

from verify_cli.grading.grader import GradeResult, GradeStatus
from verify_cli.grading.junit import Outcome, TestOutcome
from verify_cli.grading.workspace import Phase
from verify_cli.rollout.episodes import feedback_message, feedback_tokens, is_visible_test
from verify_cli.sandbox.base import RunResult, Verdict


def graded(*tests: TestOutcome) -> GradeResult:
    return GradeResult(task_id="t", phase=Phase.CANDIDATE, status=GradeStatus.GRADED, score=0.0, passed=False,
                       tests=tests, run=RunResult(Verdict.NONZERO_EXIT, "process", exit_code=1))


def test_feedback_names_failing_visible_tests_and_never_hidden_ones() -> None:
    msg = feedback_message(graded(
        TestOutcome("tests.test_roman::test_to_roman", Outcome.FAILED, message="assert 'IIII' == 'IV'\n" + "x" * 900),
        TestOutcome("tests.test_roman::test_ok", Outcome.PASSED),
        TestOutcome("hidden_tests.test_roman_edge::test_range", Outcome.FAILED, message="secret expectation"),
    ), None)
    assert "tests.test_roman::test_to_roman" in msg and "assert 'IIII' == 'IV'" in msg
    assert "test_ok" not in msg and "hidden" not in msg and "secret" not in msg and "test_range" not in msg
    assert len(msg) < 600  # the long message was cut
    only_hidden = feedback_message(graded(TestOutcome("hidden_tests.h::t", Outcome.FAILED, message="s")), None)
    assert "hidden" not in only_hidden and "not right yet" in only_hidden
    assert "could not be read" in feedback_message(None, "the answer is empty")
    assert is_visible_test("tests/test_a.py::t") and not is_visible_test("hidden_tests/test_a.py::t")


def test_feedback_tokens_close_the_assistant_turn_and_open_the_next(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    messages = [{"role": "user", "content": "solve"}]
    ids = feedback_tokens(tok, messages, "my answer", "Revise your answer.")
    text = tok.decode(ids)
    assert text.startswith("<|end|>") and "<|user|>\nRevise your answer.<|end|>" in text
    assert text.endswith("<|assistant|>\n")
    # Prompt + answer + feedback tokens is exactly what the template renders for the conversation.
    whole = tok.apply_chat_template([*messages, {"role": "assistant", "content": "my answer"},
                                     {"role": "user", "content": "Revise your answer."}],
                                    tokenize=False, add_generation_prompt=True)
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert tok.decode(tok(prompt + "my answer", add_special_tokens=False)["input_ids"] + ids) == whole
