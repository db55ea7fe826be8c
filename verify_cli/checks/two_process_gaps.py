"""Why a reference fails two-process but passes in-process: the idiom the test uses.

Two-process grading carries Python's semantics across the boundary only as far as the boundary
goes; a test that relies on something it does not carry (an iterator passed in, an environment
variable set for the code under test, ``is`` on an enum member...) fails two-process although the
reference is correct. check-tasks re-runs such a reference once in-process and compares per test
(:func:`find_gaps`): a test that passes there and fails only two-process is a *gap*, reported as
"not gradeable two-process: the test uses X" with the remedy, never as "reference fails".

The idiom is recognised from the failure's message first (the boundary's own words, such as
``'TrustedHandle' object is not iterable``), then from the failing test's source and, for a run
that hit its wall limit, from the reference's source (a thread pool calling back into the test).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verify_cli.grading.grader import GradeResult, GradeStatus
from verify_cli.grading.junit import TestOutcome
from verify_cli.sandbox.base import Verdict
from verify_cli.tasks.model import Task

IN_PROCESS_REMEDY = 'set isolation = "in-process" in task.toml (its tests then trust the candidate\'s code)'
CODEC_REMEDY = ("register a by-value codec for the type with the two-process boundary, or "
                + IN_PROCESS_REMEDY)


@dataclass(frozen=True)
class Gap:
    """One test that passes in-process and fails only two-process."""

    test_id: str
    idiom: str
    remedy: str
    #: The two-process failure, as the author reads it (first line and the candidate's frame).
    failure: str = ""

    def describe(self) -> str:
        return f"{self.test_id}: the test uses {self.idiom}"

    def to_dict(self) -> dict[str, str]:
        return {"test_id": self.test_id, "idiom": self.idiom, "remedy": self.remedy,
                "failure": self.failure}


_ITERATE = "an iterable or iterator passed to the candidate (range, iter(), a generator expression, map, zip)"
_FILE = "a file object passed to the candidate (open(), io.StringIO)"

#: (pattern over the two-process failure message, idiom, remedy): the boundary's own words.
_MESSAGE_IDIOMS: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(p, re.S), idiom, remedy) for p, idiom, remedy in (
        (r"_CandidateClassMeta' object is not iterable|iter\(\) returned non-iterator .*Enum",
         "iteration over a candidate class (an Enum's members)", IN_PROCESS_REMEDY),
        (r"should be called on dataclass instances|must be called with a dataclass",
         "dataclasses functions (asdict, astuple, replace, fields) on a candidate dataclass",
         IN_PROCESS_REMEDY),
        (r"FrozenInstanceError", "dataclasses.FrozenInstanceError from a frozen candidate dataclass",
         IN_PROCESS_REMEDY),
        (r"a coroutine was expected|coroutine or an awaitable is required|iscoroutine|was never awaited",
         "a candidate async def function awaited by the test", IN_PROCESS_REMEDY),
        (r"isgenerator", "inspect.isgenerator on a generator the candidate returns", IN_PROCESS_REMEDY),
        (r"CandidateObject' object has no attribute '_desc'|pickl",
         "pickling a candidate object", IN_PROCESS_REMEDY),
        (r"CandidateObject", "the type of a candidate object (type(x) is Class)", IN_PROCESS_REMEDY),
        (r"slices, not TrustedHandle|slice indices must be integers",
         "slicing a candidate container (the slice crosses as a reference)", IN_PROCESS_REMEDY),
        (r"(?m)^(?:AssertionError: )?assert (<.+>) is (\1)$",
         "identity (`is`) of candidate objects: enum members, singletons, sentinels, a returned self",
         IN_PROCESS_REMEDY),
        (r"\bCounter\(|defaultdict\(|OrderedDict\b",
         "a collections type (Counter, defaultdict, OrderedDict) returned by the candidate",
         IN_PROCESS_REMEDY),
        (r"AttributeError: '?__\w+__'?$|AttributeError: __\w+__",
         "a module attribute of the candidate such as __version__", IN_PROCESS_REMEDY),
    ))

#: (pattern over the failing test's source, idiom, remedy), in order: the first match names it.
_SOURCE_IDIOMS: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(p, re.S), idiom, remedy) for p, idiom, remedy in (
        (r"os\.getpid|os\.getppid|threading\.get_ident",
         "the test's own process identity (os.getpid) compared with the candidate's", IN_PROCESS_REMEDY),
        (r"\bnp\.|numpy", "numpy arrays passed to or returned by the candidate", CODEC_REMEDY),
        (r"\bpd\.|pandas", "pandas objects (DataFrame, Series) passed to or returned by the candidate",
         CODEC_REMEDY),
        (r"setenv|delenv|os\.environ|putenv",
         "environment variables set by the test (monkeypatch.setenv, os.environ)", IN_PROCESS_REMEDY),
        (r"chdir", "the working directory set by the test (monkeypatch.chdir)", IN_PROCESS_REMEDY),
        (r"random\.seed|random\.setstate", "random's state seeded by the test (random.seed)",
         IN_PROCESS_REMEDY),
        (r"sys\.stdin|sys,\s*[\"']stdin", "sys.stdin patched by the test", IN_PROCESS_REMEDY),
        (r"sys\.argv|sys,\s*[\"']argv", "sys.argv patched by the test", IN_PROCESS_REMEDY),
        (r"\bcaplog\b", "caplog capturing the candidate module's logging", IN_PROCESS_REMEDY),
        (r"mock\.patch|\bpatch\(|patch\.object|monkeypatch\.setattr",
         "a patch of the candidate module's names (monkeypatch.setattr, mock.patch)", IN_PROCESS_REMEDY),
        (r"\bcapsys\b|\bcapfd\b", "the candidate's output captured by capsys", IN_PROCESS_REMEDY),
        (r"\btmp_path\b|\btmpdir\b", "files under tmp_path shared with the candidate", IN_PROCESS_REMEDY),
        (r"\basyncio\b|\bawait\b", "a candidate async def function awaited by the test", IN_PROCESS_REMEDY),
        (r"with [^\n]*:\s*\n\s*with |raises[^\n]*\n\s*with ",
         "a candidate context manager's __exit__ on an exception", IN_PROCESS_REMEDY),
        (r"\bassert not\b|\bbool\(", "the truth value (bool()) of a candidate object", IN_PROCESS_REMEDY),
        (r"\bis\b(?! None| not None| True| False)",
         "identity (`is`) of candidate objects: enum members, singletons, sentinels, a returned self",
         IN_PROCESS_REMEDY),
    ))


def _message_idiom(message: str, source: str) -> tuple[str, str] | None:
    if re.search(r"TrustedHandle' object is not (iterable|an iterator)", message):
        if re.search(r"\bopen\(|StringIO|BytesIO", source):
            return _FILE, IN_PROCESS_REMEDY
        return _ITERATE, IN_PROCESS_REMEDY
    for pattern, idiom, remedy in _MESSAGE_IDIOMS:
        if pattern.search(message):
            return idiom, remedy
    if "TrustedHandle" in message:
        for pattern, idiom, remedy in _SOURCE_IDIOMS[1:3]:  # numpy, pandas
            if pattern.search(source):
                return idiom, remedy
        return ("an object of the test that the candidate reads as plain data (it crosses as a "
                "reference)", IN_PROCESS_REMEDY)
    return None


def _mutation_idiom(source: str) -> str | None:
    """A list or dict the test builds, hands to a call, and then asserts on: mutated in place."""
    for name in re.findall(r"(?m)^\s*(\w+)\s*=\s*[\[{]", source):
        if re.search(rf"\w\((?:[^()]*,\s*)?{name}\b", source) and re.search(rf"assert\s+{name}\b", source):
            return "a list or dict argument the candidate changes in place"
    return None


def _subclass_idiom(module_source: str, test_source: str) -> str | None:
    """A class of the test module derived from an imported (candidate) class and used by the test."""
    try:
        tree = ast.parse(module_source)
    except SyntaxError:
        return None
    imported = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                for a in node.names}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and re.search(rf"\b{node.name}\(", test_source) and any(
                isinstance(b, ast.Name) and b.id in imported for b in node.bases):
            return "a test class subclassing a candidate class (the override stays on the test's side)"
    return None


def _exception_idiom(message: str, module_source: str, test_source: str) -> str | None:
    """The test's own exception class raised through a candidate callback, or an attribute of a
    candidate exception the test reads."""
    try:
        tree = ast.parse(module_source)
    except SyntaxError:
        return None
    own = {node.name for node in tree.body if isinstance(node, ast.ClassDef)
           and any(isinstance(b, ast.Name) and b.id.endswith(("Exception", "Error")) for b in node.bases)}
    if any(re.search(rf"raises\(\s*{name}\b|except\s+{name}\b", test_source) for name in own):
        return "the test's own exception raised through a candidate callback"
    imported = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                for a in node.names}
    m = re.search(r"AttributeError: '(\w+)' object has no attribute", message)
    if m and m[1] in imported:
        return "attributes of a candidate exception (e.line) or of a candidate object"
    return None


def _test_source(task: Task, test_id: str) -> tuple[str, str]:
    """The failing test function's source and its module's, found from the JUnit id
    (``tests.test_x::test_y[param]`` or ``tests.test_x.TestC::test_y``); ``("", "")`` if not."""
    classname, _, name = test_id.partition("::")
    name = name.split("[", 1)[0].split(" #", 1)[0]
    files = task.test_files()
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        rel = "/".join(parts[:cut]) + ".py"
        path: Path | None = files.get(rel)
        if path is None:
            continue
        module = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(module)
        except SyntaxError:
            return module, module
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                return ast.get_source_segment(module, node) or module, module
        return module, module
    return "", ""


def _solution_source(task: Task) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace")
                     for rel, p in sorted(task.solution_files().items()) if rel.endswith(".py"))


def recognise_idiom(task: Task, test_id: str, message: str, *, timed_out: bool = False) -> tuple[str, str]:
    """The idiom a two-process-only failure of ``test_id`` comes from, and the remedy."""
    source, module = _test_source(task, test_id)
    found = _message_idiom(message, source)
    if found:
        return found
    if timed_out and re.search(r"threading|ThreadPool|concurrent\.futures", _solution_source(task)):
        return ("callbacks into the test from the candidate's threads (the run hit its wall limit)",
                IN_PROCESS_REMEDY)
    special = _exception_idiom(message, module, source) or _subclass_idiom(module, source)
    if special:
        return special, IN_PROCESS_REMEDY
    for pattern, idiom, remedy in _SOURCE_IDIOMS:
        if pattern.search(source):
            return idiom, remedy
    mutation = _mutation_idiom(source)
    if mutation:
        return mutation, IN_PROCESS_REMEDY
    if timed_out:
        return "something that made the two-process run hit its wall limit", IN_PROCESS_REMEDY
    first = message.splitlines()[0] if message.strip() else "no message"
    return f"something two-process grading does not carry ({first})", IN_PROCESS_REMEDY


def _failure_text(t: TestOutcome | None) -> str:
    if t is None or not t.message:
        return "absent from the results"
    lines = [ln for ln in t.message.splitlines() if ln.strip()]
    keep = lines[:1] + [ln for ln in lines[1:] if ln.startswith(("in the candidate's", "in the test:"))]
    return " | ".join(keep)


@dataclass(frozen=True)
class GapFindings:
    """The per-test comparison of a reference's two-process runs against its in-process run."""

    gaps: tuple[Gap, ...]
    #: Tests that fail in-process too: the reference's own failures.
    still_failing: tuple[str, ...]
    #: Tests that passed in some two-process run and failed in another: flaky, not a gap.
    inconsistent: tuple[str, ...] = ()

    @property
    def idioms(self) -> list[str]:
        return sorted({g.idiom for g in self.gaps})


def find_gaps(task: Task, two_process: Sequence[GradeResult], in_process: GradeResult) -> GapFindings:
    """Compare per test: a test that failed (or was absent) in every graded two-process run and
    passes ``in_process`` is a gap; one that fails there too is the reference's own failure, and
    one that passed in some two-process run is flaky (neither)."""
    graded = [r for r in two_process if r.status is GradeStatus.GRADED]
    passes_in_process = {t.id for t in in_process.tests if t.outcome.ok}
    passed_two_process = {t.id for r in graded for t in r.tests if t.outcome.ok}
    inconsistent: set[str] = set()
    in_process_ids = {t.id for t in in_process.tests}
    gaps: dict[str, Gap] = {}
    still: set[str] = set()
    for run in graded:
        have = {t.id: t for t in run.tests}
        timed_out = run.run.verdict is Verdict.TIMEOUT
        for tid in sorted(in_process_ids | set(have)):
            outcome = have.get(tid)
            if outcome is not None and outcome.outcome.ok:
                continue
            if tid in passed_two_process:
                inconsistent.add(tid)
            elif tid in passes_in_process:
                if tid not in gaps:
                    message = outcome.message if outcome is not None else ""
                    idiom, remedy = recognise_idiom(task, tid, message, timed_out=timed_out)
                    gaps[tid] = Gap(tid, idiom, remedy, _failure_text(outcome) if outcome else
                                    f"absent from the results ({run.run.verdict.value})")
            else:
                still.add(tid)
    if in_process.status is GradeStatus.GRADED and not in_process.tests:
        still.add("(the in-process run reported no test)")
    return GapFindings(tuple(gaps[k] for k in sorted(gaps)), tuple(sorted(still)), tuple(sorted(inconsistent)))


