"""The same option names for the same things on every command.

Every command's options are listed; two names that look like one concept under two spellings
(``--jobs`` / ``--grade-jobs``, ``--check`` / ``--checks``) or that are declared synonyms
(``--repeats`` / ``--reruns``) are a finding unless every command that takes either takes the
common one too (the other kept as an alias), or the pair is listed below as two concepts."""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Iterator
from typing import Any

import typer

from verify_cli.cli.app import app

#: One concept, names that do not look alike: each set must be one name (plus aliases).
SYNONYMS = [
    {"--repeats", "--reruns"},  # reference runs for flakiness (check-tasks, audit, tasks)
    {"--no-tests-in-prompt", "--no-visible-tests"},  # difficulty, train
    {"--check-report", "--checks"},  # a check-tasks --json report (difficulty, tasks)
]
#: Names that look alike and name different things (why, for each).
DISTINCT = {
    frozenset({"--group-size", "--round-size"}): "train's completions per task per step; difficulty "
                                                  "--adaptive's samples per round",
    frozenset({"--list-probes", "--probe"}): "audit: list the probes; run one probe",
    frozenset({"--plot", "--port"}): "difficulty's histogram; serve's port",
    frozenset({"--language", "--run-code-languages"}): "new-task: the task's language; serve: the "
                                                        "compiled languages /run_code builds toolchains for",
    frozenset({"--check", "--checks"}): "difficulty: run check-tasks first; --checks is the alias of "
                                        "tasks' --check-report",
}
#: One short flag, two long names (kept: each is the flag users of that command know).
SHORT_FLAG_EXCEPTIONS = {
    "-m": {"--model", "--map"},  # import's --map has no model
    "-n": {"--repeats", "--samples"},  # difficulty's samples per task; check-tasks' reference runs
    "-p": {"--preset", "--port"},  # import, serve
}
#: Options every command that samples a model takes, under these names.
MODEL_OPTIONS = ("--backend", "--model", "--base-url", "--chat", "--device")


def _leaves(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
    subs = getattr(command, "commands", None)
    if subs:
        for name, sub in sorted(subs.items()):
            yield from _leaves(sub, [*path, name])
    else:
        yield " ".join(path), command


def option_table() -> dict[str, list[tuple[str, ...]]]:
    """command -> its options, each as the tuple of its long names (primary first; a flag's
    ``--no-`` form left out: it is the same option)."""
    table = {}
    for path, command in _leaves(typer.main.get_command(app), []):
        table[path] = [tuple(o for o in p.opts if o.startswith("--")) for p in command.params
                       if p.param_type_name == "option" and any(o.startswith("--") for o in p.opts)]
    return table


def _words(name: str) -> list[str]:
    return [w[:-1] if w.endswith("s") and len(w) > 3 else w for w in name[2:].split("-")]


def look_alike(a: str, b: str) -> bool:
    """Two spellings of one concept, by their look: the same words up to a plural, one name's
    words inside the other's with the same last word (``--jobs``, ``--grade-jobs``), or nearly
    the same letters."""
    if (a.startswith("--no-") and a[5:] == b[2:]) or (b.startswith("--no-") and b[5:] == a[2:]):
        return False  # a flag and its negation
    wa, wb = _words(a), _words(b)
    if wa == wb:
        return True
    if (set(wa) < set(wb) or set(wb) < set(wa)) and wa[-1] == wb[-1]:
        return True
    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def near_duplicates(table: dict[str, list[tuple[str, ...]]]) -> list[str]:
    """Each pair of names for one concept where some command does not take the common name."""
    takes: dict[str, set[str]] = {}
    for command, options in table.items():
        for names in options:
            for name in names:
                takes.setdefault(name, set()).add(command)
    primaries = sorted({names[0] for options in table.values() for names in options})
    pairs = {frozenset(p) for p in itertools.combinations(primaries, 2) if look_alike(*p)}
    pairs |= {frozenset(p) for group in SYNONYMS for p in itertools.combinations(sorted(group), 2)}
    findings = []
    for pair in sorted(pairs - set(DISTINCT), key=sorted):
        a, b = sorted(pair)
        common = max((a, b), key=lambda n: (len(takes.get(n, ())), n == b))
        other = b if common == a else a
        lacking = sorted(c for c in takes.get(other, ()) if c not in takes.get(common, set()))
        if lacking:
            findings.append(f"{other} on {', '.join(lacking)}: the others say {common}")
    return findings


def test_every_command_is_listed() -> None:
    table = option_table()
    assert {"check-tasks", "audit", "difficulty", "train", "agent run", "serve", "tasks list"} <= set(table)
    assert sum(len(v) for v in table.values()) > 150


def test_no_concept_has_two_names() -> None:
    assert near_duplicates(option_table()) == []


def test_the_check_flags_what_the_commands_had() -> None:
    """Before issue 39: train said --grade-jobs and --no-visible-tests, audit --reruns, tasks --checks."""
    before = {"check-tasks": [("--repeats",), ("--jobs",)], "audit": [("--reruns",), ("--jobs",)],
              "train": [("--grade-jobs",), ("--no-visible-tests",)], "difficulty": [("--no-tests-in-prompt",),
                                                                                   ("--jobs",), ("--check",),
                                                                                   ("--check-report",)],
              "tasks list": [("--checks",)]}
    found = near_duplicates(before)
    assert any(f.startswith("--grade-jobs on train") for f in found), found
    assert any("--reruns" in f and "--repeats" in f for f in found), found
    assert any("--no-visible-tests" in f and "--no-tests-in-prompt" in f for f in found), found
    assert any("--checks" in f and "--check-report" in f for f in found), found


def short_flags(command_params: dict[str, list[Any]]) -> dict[str, set[str]]:
    """short flag -> the primary long names it stands for, over every command."""
    flags: dict[str, set[str]] = {}
    for params in command_params.values():
        for p in params:
            longs = [o for o in p.opts if o.startswith("--")]
            for short in (o for o in p.opts if not o.startswith("--")):
                flags.setdefault(short, set()).add(longs[0] if longs else short)
    return flags


def test_a_short_flag_means_one_option_everywhere() -> None:
    params = {path: [p for p in command.params if p.param_type_name == "option"]
              for path, command in _leaves(typer.main.get_command(app), [])}
    clashes = {flag: names for flag, names in short_flags(params).items()
               if len(names) > 1 and names != SHORT_FLAG_EXCEPTIONS.get(flag)}
    assert clashes == {}


def test_backend_names_the_model_backend_and_sandbox_the_sandbox() -> None:
    """``--backend`` is the model backend wherever it is a command's own name for an option (sandbox
    doctor said --backend for a sandbox backend; it says --sandbox, as every other command does)."""
    for command, options in option_table().items():
        primaries = {names[0] for names in options}
        if "--backend" in primaries:
            assert "--model" in primaries, command


def test_commands_that_sample_a_model_take_the_same_model_options() -> None:
    table = option_table()
    for command, options in table.items():
        names = {n for names in options for n in names}
        if {"--backend", "--model"} <= names:
            assert set(MODEL_OPTIONS) <= names, (command, sorted(set(MODEL_OPTIONS) - names))
