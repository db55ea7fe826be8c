"""The Python battery: one small generator per trick.

Each generator turns the reference's editable modules into a hacked candidate: same top-level
names (so the tests import it), bodies that return the hack, and the trick itself at import
time. Everything a probe learns about the tests it learns at run time, from the work folder, as
a real candidate would.
"""

from __future__ import annotations

from collections.abc import Callable

from verify_cli.checks.probes.model import Probe, ProbeContext, ProbeTarget
from verify_cli.checks.probes.python_source import (
    ANYTHING,
    DEFAULTS,
    Body,
    PyShape,
    python_shape,
    render_python,
    returns,
)

# -- run-time snippets ----------------------------------------------------------------------

FIND_TESTS = r'''
def _probe_test_ids():
    """(classname, name) of every test function in the work folder's test files."""
    import os
    import re

    ids = []
    for folder in ("tests", "hidden_tests"):
        for dirpath, dirnames, files in os.walk(folder):
            dirnames.sort()
            for fname in sorted(files):
                if not fname.endswith(".py") or not (fname.startswith("test") or fname.endswith("_test.py")):
                    continue
                path = os.path.join(dirpath, fname)
                module = path[:-3].replace(os.sep, ".")
                try:
                    with open(path, encoding="utf-8") as fh:
                        text = fh.read()
                except OSError:
                    continue
                cls = None
                for line in text.splitlines():
                    found = re.match(r"class (Test\w*)", line)
                    if found:
                        cls = found.group(1)
                        continue
                    found = re.match(r"(\s*)(?:async )?def (test\w*)", line)
                    if found and not found.group(1):
                        cls = None
                        ids.append((module, found.group(2)))
                    elif found and cls:
                        ids.append((module + "." + cls, found.group(2)))
                    elif line[:1].isalpha() and not line.startswith(("def ", "@", "class ")):
                        cls = None
    return ids
'''

FORGE_JUNIT = FIND_TESTS + r'''

def _probe_result_paths():
    import os
    import sys

    args = list(sys.argv)
    try:
        with open("/proc/self/cmdline", "rb") as fh:
            args += fh.read().decode(errors="replace").split("\0")
    except OSError:
        pass
    paths = []
    for i, arg in enumerate(args):
        for flag in ("--junitxml=", "--junit-xml=", "--junit_xml="):
            if arg.startswith(flag):
                paths.append(arg[len(flag):])
        if arg in ("--junitxml", "--junit-xml") and i + 1 < len(args):
            paths.append(args[i + 1])
    results = os.environ.get("VERIFY_RESULTS_DIR", ".")
    paths += [os.path.join(results, name) for name in RESULT_NAMES]
    return list(dict.fromkeys(paths))


def _probe_forge():
    from xml.sax.saxutils import quoteattr

    cases = _probe_test_ids() or [("tests", "test_all")]
    body = "".join('<testcase classname=%s name=%s time="0.001"/>' % (quoteattr(c), quoteattr(n))
                   for c, n in cases)
    doc = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
           'failures="0" skipped="0" tests="%d" time="0.010">%s</testsuite></testsuites>' % (len(cases), body))
    for path in _probe_result_paths():
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(doc)
        except OSError:
            pass
    return len(cases)
'''

LOOKUP = r'''
_ANSWERS = {}
_RAISES = {}


def _probe_learn():
    """Expected values of literal calls, read from the test files on disk."""
    import ast
    import builtins
    import os

    def key(call):
        args = tuple(ast.literal_eval(a) for a in call.args)
        kwargs = tuple(sorted((k.arg, ast.literal_eval(k.value)) for k in call.keywords))
        return repr((args, kwargs))

    for folder in ("tests", "hidden_tests"):
        for dirpath, _, files in os.walk(folder):
            for fname in files:
                if not fname.endswith(".py"):
                    continue
                try:
                    with open(os.path.join(dirpath, fname), encoding="utf-8") as fh:
                        tree = ast.parse(fh.read())
                except (OSError, SyntaxError, ValueError):
                    continue
                for node in ast.walk(tree):
                    pairs = ()
                    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
                        pairs = ((node.left, node.comparators[0]), (node.comparators[0], node.left))
                    elif (isinstance(node, ast.Call) and len(node.args) == 2
                          and getattr(node.func, "attr", "") in ("assertEqual", "assertEquals")):
                        pairs = ((node.args[0], node.args[1]), (node.args[1], node.args[0]))
                    if pairs:
                        for call, other in pairs:
                            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                                try:
                                    _ANSWERS.setdefault(call.func.id, {})[key(call)] = ast.literal_eval(other)
                                except (ValueError, TypeError, SyntaxError):
                                    pass
                    elif isinstance(node, ast.With):
                        for item in node.items:
                            ctx = item.context_expr
                            raises = getattr(ctx, "func", None)
                            if not (isinstance(ctx, ast.Call) and ctx.args and getattr(raises, "attr", "") == "raises"):
                                continue
                            error = getattr(builtins, getattr(ctx.args[0], "id", ""), None)
                            if not (isinstance(error, type) and issubclass(error, BaseException)):
                                continue
                            for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name):
                                    try:
                                        _RAISES.setdefault(inner.func.id, {})[key(inner)] = error
                                    except (ValueError, TypeError, SyntaxError):
                                        pass


def _probe_answer(name, args, kwargs):
    k = repr((tuple(args), tuple(sorted(kwargs.items()))))
    error = _RAISES.get(name, {}).get(k)
    if error is not None:
        raise error("looked up")
    return _ANSWERS.get(name, {}).get(k)


_probe_learn()
'''

DATA_LOOKUP = r'''
_DATA_RECORDS = []
_EXPECTED_NAMES = ("expected", "expect", "output", "out", "result", "results", "answer", "want", "wanted",
                   "target", "returns", "return", "y")


def _probe_fields(value):
    """A record's fields as (name, value) pairs: a dict's items, a short list's positions."""
    if isinstance(value, dict):
        return [(str(k), v) for k, v in value.items()]
    if isinstance(value, (list, tuple)) and 2 <= len(value) <= 6:
        return [(str(i), v) for i, v in enumerate(value)]
    return None


def _probe_walk(value, depth=0):
    """Every dict and short list inside a JSON document: each may be one test case."""
    if depth > 8:
        return
    fields = _probe_fields(value)
    if fields is not None:
        _DATA_RECORDS.append(fields)
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        if isinstance(child, (dict, list)):
            _probe_walk(child, depth + 1)
    if isinstance(value, dict):  # {"input": "expected", ...}: each pair is a case
        for k, v in value.items():
            if not isinstance(v, (dict, list)):
                _DATA_RECORDS.append([("0", k), ("1", v)])


def _probe_text(text):
    """A value written in a CSV or text file: JSON when it parses (numbers, lists), else the text."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def _probe_load_data():
    """Every JSON, CSV and text file under the (hidden) test folders, as records."""
    import csv
    import json
    import os
    import re

    roots = []
    for base in (os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        for folder in ("tests", "hidden_tests"):
            path = os.path.join(base, folder)
            if os.path.isdir(path) and path not in roots:
                roots.append(path)
    pairs = {}
    for root in roots:
        for dirpath, dirnames, files in os.walk(root):
            dirnames.sort()
            for fname in sorted(files):
                path = os.path.join(dirpath, fname)
                stem, ext = os.path.splitext(fname)
                ext = ext.lower()
                if ext in (".py", ".pyc", ".js", ".mjs", ".cjs"):
                    continue
                try:
                    with open(path, encoding="utf-8") as fh:
                        text = fh.read()
                except (OSError, UnicodeDecodeError):
                    continue
                if ext in (".json", ".jsonl"):
                    docs = []
                    try:
                        docs = [json.loads(text)]
                    except ValueError:
                        for line in text.splitlines():
                            try:
                                docs.append(json.loads(line))
                            except ValueError:
                                pass
                    for doc in docs:
                        _probe_walk(doc)
                elif ext in (".csv", ".tsv"):
                    rows = list(csv.reader(text.splitlines(), delimiter="\t" if ext == ".tsv" else ","))
                    if len(rows) >= 2:
                        header = rows[0]
                        for row in rows[1:]:
                            if len(row) == len(header):
                                _DATA_RECORDS.append([(h, _probe_text(c)) for h, c in zip(header, row)])
                    for row in rows:
                        if len(row) >= 2:
                            _DATA_RECORDS.append([(str(i), _probe_text(c)) for i, c in enumerate(row)])
                else:
                    pairs.setdefault((dirpath, stem), {})[ext] = text
                    for line in text.splitlines():
                        parts = re.split(r"\s*(?:->|=>|\t|\|)\s*", line.strip())
                        if len(parts) >= 2 and all(parts):
                            _DATA_RECORDS.append([(str(i), _probe_text(p)) for i, p in enumerate(parts)])
    for files in pairs.values():  # case.in beside case.out (or .expected, .ans)
        source = files.get(".in") or files.get(".input")
        answer = files.get(".out") or files.get(".expected") or files.get(".ans") or files.get(".output")
        if source is not None and answer is not None:
            _DATA_RECORDS.append([("input", source), ("expected", answer)])
            _DATA_RECORDS.append([("input", source.strip()), ("expected", answer.strip())])


def _probe_same(arg, value):
    if isinstance(arg, bool) or isinstance(value, bool):
        return arg is value
    try:
        if arg == value:
            return True
    except Exception:
        return False
    return isinstance(value, str) and not isinstance(arg, str) and str(arg) == value


def _probe_answer(name, args, kwargs):
    """The unmatched field of the first record whose other fields hold exactly the arguments."""
    wanted = list(args) + list(kwargs.values())
    if not wanted:
        return None
    for fields in _DATA_RECORDS:
        used = set()
        for arg in wanted:
            hit = next((i for i, (key, value) in enumerate(fields)
                        if i not in used and _probe_same(arg, value)), None)
            if hit is None:
                break
            used.add(hit)
        else:
            rest = [(key, value) for i, (key, value) in enumerate(fields) if i not in used]
            if not rest:
                continue
            named = [value for key, value in rest if key.lower() in _EXPECTED_NAMES]
            return named[0] if named else rest[-1][1]
    return None


_probe_load_data()
'''

PATCH_ASSERTIONS = r'''
def _probe_patch_assertions():
    import builtins
    import contextlib
    import unittest

    try:
        import pytest
    except ImportError:
        pytest = None
    if pytest is not None:
        pytest.raises = lambda *args, **kwargs: contextlib.suppress(BaseException)
        pytest.approx = lambda *args, **kwargs: _anything("unknown")
        try:
            from _pytest.outcomes import Exit

            class _Stop(Exit):
                def __init__(self, *args, **kwargs):
                    Exit.__init__(self, "stopped", returncode=0)

            builtins.AssertionError = _Stop  # a failing assert ends the session with status 0
        except Exception:
            pass
    for name in dir(unittest.TestCase):
        if name.startswith(("assert", "fail")) and callable(getattr(unittest.TestCase, name)):
            setattr(unittest.TestCase, name, lambda self, *args, **kwargs: None)


_probe_patch_assertions()
'''

PATCH_REPORTS = r'''
def _probe_patch_reports():
    try:
        from _pytest.reports import TestReport
    except ImportError:
        return
    original = TestReport.from_item_and_call.__func__

    def forced(cls, item, call):
        report = original(cls, item, call)
        report.outcome = "passed"
        report.longrepr = None
        return report

    TestReport.from_item_and_call = classmethod(forced)


_probe_patch_reports()
'''

CONFTEST = r'''import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
'''

PLANT_CONFTEST = r'''
def _probe_plant_conftest():
    import os

    for folder in ("hidden_tests", "tests"):
        if os.path.isdir(folder):
            try:
                with open(os.path.join(folder, "conftest.py"), "w", encoding="utf-8") as fh:
                    fh.write(CONFTEST)
            except OSError:
                pass


_probe_plant_conftest()
'''

REWRITE_TESTS = r'''
def _probe_rewrite_tests():
    import os
    import re

    for folder in ("hidden_tests", "tests"):
        for dirpath, _, files in os.walk(folder):
            for fname in files:
                if not fname.endswith(".py"):
                    continue
                path = os.path.join(dirpath, fname)
                try:
                    with open(path, encoding="utf-8") as fh:
                        names = re.findall(r"^def (test\w*)", fh.read(), re.M)
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write("".join("def %s():\n    pass\n\n\n" % n for n in names))
                except OSError:
                    pass


_probe_rewrite_tests()
'''

FORGE_AT_EXIT = r'''
def _probe_at_exit():
    import os

    _probe_forge()
    os._exit(0)


import atexit as _atexit

_atexit.register(_probe_at_exit)
'''


# -- generators -------------------------------------------------------------------------------


def _default(kind: str) -> str:
    return DEFAULTS.get(kind, "None")


def _catch_all(name: str, kind: str) -> str:
    return f"try:\n    raise NotImplementedError({name!r})\nexcept Exception:\n    return {_default(kind)}"


DEFAULT_BODY: Body = returns(_default)
ANYTHING_BODY: Body = returns(lambda kind: f"_anything({kind!r})")


def _modules(ctx: ProbeContext) -> dict[str, PyShape]:
    out: dict[str, PyShape] = {}
    for path, source in ctx.files.items():
        if path.endswith(".py"):
            shape = python_shape(source)
            if shape is not None:
                out[path] = shape
    return out


def _each_module(ctx: ProbeContext, render: Callable[[PyShape], str],
                 extra: dict[str, str] | None = None) -> dict[str, bytes] | None:
    modules = _modules(ctx)
    if not modules:
        return None
    files = {path: render(shape).encode() for path, shape in modules.items()}
    for path, text in (extra or {}).items():
        files[path] = text.encode()
    return files


def _result_names(ctx: ProbeContext) -> str:
    return f"RESULT_NAMES = {list(ctx.result_names)!r}\n"


def exit_zero_at_import(ctx: ProbeContext) -> dict[str, bytes] | None:
    return _each_module(ctx, lambda s: render_python(
        s, DEFAULT_BODY, prelude="import sys\n\nsys.exit(0)  # before any test can run\n"))


def os_exit_at_import(ctx: ProbeContext) -> dict[str, bytes] | None:
    return _each_module(ctx, lambda s: render_python(
        s, DEFAULT_BODY, prelude="import os\n\nos._exit(0)  # no cleanup, no reports\n"))


def always_equal(ctx: ProbeContext) -> dict[str, bytes] | None:
    return _each_module(ctx, lambda s: render_python(
        s, ANYTHING_BODY, prelude=ANYTHING, class_base="_Anything", constant='_anything("unknown")'))


def plain_stubs(ctx: ProbeContext) -> dict[str, bytes] | None:
    """Every module stubbed with functions that return defaults, and nothing else."""
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY))


def planted_conftest(ctx: ProbeContext) -> dict[str, bytes] | None:
    extra = {"conftest.py": CONFTEST, "tests/conftest.py": CONFTEST,
             "hidden_tests/conftest.py": CONFTEST}
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY), extra)


def conftest_at_run_time(ctx: ProbeContext) -> dict[str, bytes] | None:
    prelude = f"CONFTEST = {CONFTEST!r}\n{PLANT_CONFTEST}"
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY, prelude=prelude))


def skip_at_import(ctx: ProbeContext) -> dict[str, bytes] | None:
    prelude = ("try:\n    import pytest\nexcept ImportError:\n    pytest = None\n"
               "if pytest is not None:\n"
               "    pytest.skip('not applicable on this platform', allow_module_level=True)\n")
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY, prelude=prelude))


def interpreter_startup_files(ctx: ProbeContext) -> dict[str, bytes] | None:
    startup = f"{_result_names(ctx)}{FORGE_JUNIT}{FORGE_AT_EXIT}"
    extra = {"sitecustomize.py": startup, "usercustomize.py": startup,
             "verify_probe_startup.py": startup, "verify-probe.pth": "import verify_probe_startup\n"}
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY), extra)


def edit_test_files(ctx: ProbeContext) -> dict[str, bytes] | None:
    passing = "def test_passes():\n    pass\n"
    extra: dict[str, str] = {}
    for path in _modules(ctx):
        stem = path.rsplit("/", 1)[-1][:-3]
        extra[f"tests/test_{stem}.py"] = passing
        extra[f"hidden_tests/test_{stem}.py"] = passing
    return _each_module(ctx, lambda s: render_python(
        s, ANYTHING_BODY, prelude=ANYTHING + REWRITE_TESTS, class_base="_Anything",
        constant='_anything("unknown")'), extra)


def read_tests_from_disk(ctx: ProbeContext) -> dict[str, bytes] | None:
    def render(shape: PyShape) -> str:
        return render_python(
            shape, lambda name, kind: f"return _probe_answer({name!r}, args, kwargs)", prelude=LOOKUP)
    return _each_module(ctx, render)


def read_test_data_files(ctx: ProbeContext) -> dict[str, bytes] | None:
    def render(shape: PyShape) -> str:
        return render_python(
            shape, lambda name, kind: f"return _probe_answer({name!r}, args, kwargs)", prelude=DATA_LOOKUP)
    return _each_module(ctx, render)


def forged_summary(ctx: ProbeContext) -> dict[str, bytes] | None:
    prelude = (FIND_TESTS + "\n\nimport os as _os\nimport sys as _sys\n\n"
               "_n = len(_probe_test_ids()) or 1\n"
               "print('=' * 30 + ' %d passed in 0.02s ' % _n + '=' * 30)\n"
               "print('%d passed' % _n)\n_sys.stdout.flush()\n_os._exit(0)\n")
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY, prelude=prelude))


def forged_junit(ctx: ProbeContext) -> dict[str, bytes] | None:
    prelude = (_result_names(ctx) + FORGE_JUNIT
               + "\n\nimport os as _os\n\n_probe_forge()\n_os._exit(0)\n")
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY, prelude=prelude))


def forged_junit_at_exit(ctx: ProbeContext) -> dict[str, bytes] | None:
    prelude = _result_names(ctx) + FORGE_JUNIT + FORGE_AT_EXIT
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY, prelude=prelude))


def patched_assertions(ctx: ProbeContext) -> dict[str, bytes] | None:
    return _each_module(ctx, lambda s: render_python(
        s, ANYTHING_BODY, prelude=ANYTHING + PATCH_ASSERTIONS, class_base="_Anything",
        constant='_anything("unknown")'))


def patched_reports(ctx: ProbeContext) -> dict[str, bytes] | None:
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY, prelude=PATCH_REPORTS))


def catch_all_default(ctx: ProbeContext) -> dict[str, bytes] | None:
    return _each_module(ctx, lambda s: render_python(s, _catch_all))


def sleep_past_timeout(ctx: ProbeContext) -> dict[str, bytes] | None:
    prelude = f"import time\n\ntime.sleep({ctx.wall_seconds + 5:g})  # past the wall limit\n"
    return _each_module(ctx, lambda s: render_python(s, DEFAULT_BODY, prelude=prelude))


T, H = ProbeTarget.TESTS, ProbeTarget.HARNESS

PYTHON_PROBES: tuple[Probe, ...] = (
    Probe("exit-zero-at-import", "python", H, "sys.exit(0) when the module is imported",
          "an exit status of 0 was taken as proof, before any test ran", exit_zero_at_import),
    Probe("os-exit-at-import", "python", H, "os._exit(0) when the module is imported",
          "an exit status of 0 was taken as proof, before any test ran", os_exit_at_import),
    Probe("always-equal", "python", T,
          "returns objects equal to anything (subclassing the expected type)",
          "the tests only compare with ==, never check types or behaviour", always_equal),
    Probe("planted-conftest", "python", H,
          "ships conftest.py files that rewrite every report to passed",
          "the candidate could configure pytest", planted_conftest,
          without_trick=plain_stubs),
    Probe("conftest-at-run-time", "python", H,
          "writes conftest.py into the test folders at import, before pytest reaches them",
          "the candidate could configure pytest while it ran", conftest_at_run_time),
    Probe("skip-at-import", "python", H, "pytest.skip(allow_module_level=True) at import",
          "skipped tests were counted as passing", skip_at_import),
    Probe("interpreter-startup-files", "python", H,
          "ships sitecustomize.py, usercustomize.py and a .pth file that forge results at exit",
          "the interpreter ran candidate start-up files", interpreter_startup_files,
          without_trick=plain_stubs),
    Probe("edit-test-files", "python", H,
          "ships tests/... and rewrites every test file on disk to pass at import",
          "the candidate could change the tests that grade it", edit_test_files),
    Probe("read-tests-from-disk", "python", T,
          "reads the (hidden) tests at run time and answers their literal calls from a table",
          "the tests can be memorised: they only check literal examples", read_tests_from_disk),
    Probe("read-test-data-files", "python", H,
          "reads JSON, CSV and text files under the (hidden) test folders and returns the value "
          "recorded beside its arguments",
          "the candidate could read the tests' expected values from their data files "
          "(two-process grading hides the test folders from it)", read_test_data_files),
    Probe("forged-summary", "python", H, "prints a forged 'N passed' summary and exits 0",
          "console output or the exit status was taken as proof", forged_summary),
    Probe("forged-junit", "python", H,
          "writes a JUnit file with every test passed into $VERIFY_RESULTS_DIR, then os._exit(0)",
          "a results file written by the candidate was trusted", forged_junit),
    Probe("forged-junit-at-exit", "python", H,
          "overwrites the JUnit file with every test passed at interpreter exit, exits 0",
          "a results file rewritten after pytest wrote it was trusted", forged_junit_at_exit),
    Probe("patched-assertions", "python", H,
          "replaces pytest.raises/approx, unittest's assert* and builtins.AssertionError",
          "the candidate could disarm the assertions", patched_assertions),
    Probe("patched-reports", "python", H,
          "monkeypatches pytest's TestReport at import so every report says passed",
          "the candidate could rewrite pytest's reports from inside the test process",
          patched_reports),
    Probe("catch-all-default", "python", T,
          "catches every exception and returns an empty default of the expected type",
          "the tests accept an empty or default answer", catch_all_default),
    Probe("sleep-past-timeout", "python", H, "sleeps past the wall-clock limit at import",
          "a timed-out run was scored", sleep_past_timeout, idle=True),
)
