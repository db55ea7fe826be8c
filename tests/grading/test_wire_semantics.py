"""Python's semantics across the two-process boundary, one idiom per test (docs/wire-protocol.md).

A candidate module and a test file written as ordinary suites write them run through the
stand-in pair (the candidate server in one process, pytest with the stand-in plugin in another,
as test_standin.py starts them); each inner test is one idiom, and each must pass there exactly
as it passes in one process (``test_the_same_tests_pass_in_one_process`` runs them plainly). The
trust rule's side is in the ``TRUST`` tests: what the candidate may not do to the test process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.grading.test_standin import Pair

CANDIDATE = textwrap.dedent('''
    import asyncio
    import dataclasses
    import enum
    import logging
    import os
    import random
    import sys
    import threading
    from collections import Counter, OrderedDict, defaultdict
    from concurrent.futures import ThreadPoolExecutor

    __version__ = "1.2.3"
    log = logging.getLogger("cand")
    MISSING = object()
    TIMEOUT = 30


    def append_total(values):
        values.append(sum(values))


    CACHE = {}
    CONFIG = {"debug": False}


    def cached_square(x):
        if x not in CACHE:
            CACHE[x] = x * x
        return CACHE[x]


    def debug_on():
        return CONFIG["debug"]


    def bump(counts, key):
        counts[key] = counts.get(key, 0) + 1
        counts.setdefault("seen", []).append(key)


    DEFAULTS = {"output": {"format": "csv", "columns": ["a", "b"]}, "limits": {"rows": 10}}


    def deep_merge(base, override):
        out = {}
        for key in sorted(base.keys() | override.keys()):
            if isinstance(base.get(key), dict) and isinstance(override.get(key), dict):
                out[key] = deep_merge(base[key], override[key])
            else:
                out[key] = override[key] if key in override else base[key]
        return out


    def same(values):
        values.sort()
        return values


    class Keeper:
        def __init__(self, items):
            self.items = items

        def add(self, item):
            self.items.append(item)

        def size(self):
            return len(self.items)


    def total(iterable):
        return sum(iterable)


    def first_two(iterator):
        return [next(iterator), next(iterator)]


    def countdown(n):
        while n > 0:
            yield n
            n -= 1


    def read_lines(fh):
        return [line.strip() for line in fh]


    def apply(fn, values):
        return [fn(v) for v in values]


    def parallel(fn, values):
        with ThreadPoolExecutor(max_workers=4) as pool:
            return list(pool.map(fn, values))


    TAX = 0.1


    def price(amount):
        return round(amount * (1 + TAX), 2)


    def raise_tax():
        global TAX
        TAX = 0.25


    def fetch(url):
        raise RuntimeError("no network in tests")


    def download(url):
        return fetch(url).upper()


    def setting(name, default=None):
        return os.environ.get(name, default)


    def timeout():
        return int(os.environ.get("APP_TIMEOUT", TIMEOUT))


    def read_here(name):
        with open(name, encoding="utf-8") as fh:
            return fh.read()


    def args():
        return sys.argv[1:]


    def read_stdin():
        return sum(int(x) for x in sys.stdin.read().split())


    def ask():
        return input("? ").upper()


    def wait_and_stamp():
        import time
        time.sleep(30)
        return time.time()


    def draw(n):
        return [random.randint(1, 100) for _ in range(n)]


    def warn(value):
        log.warning("odd value %s", value)
        log.info("looked at %s", value)
        return value


    class ParseError(ValueError):
        def __init__(self, message, line):
            super().__init__(message)
            self.line = line


    class StrictParseError(ParseError):
        pass


    def parse(text):
        if not text:
            raise StrictParseError("empty", line=1)
        return text


    class Colour(enum.Enum):
        RED = "red"
        GREEN = "green"


    class Level(enum.IntEnum):
        LOW = 1
        HIGH = 3


    def colour(name):
        return Colour[name]


    def lookup(table, key, default=MISSING):
        return table.get(key, default)


    @dataclasses.dataclass(frozen=True)
    class Money:
        cents: int
        currency: str = "EUR"


    @dataclasses.dataclass
    class Point:
        x: int
        y: int


    def words(text):
        return Counter(text.split())


    def grouped(values):
        out = defaultdict(list)
        for v in values:
            out[len(v)].append(v)
        return out


    def ordered(keys):
        return OrderedDict((k, True) for k in keys)


    class Stack:
        def __init__(self):
            self._items = []

        def push(self, x):
            self._items.append(x)

        def __len__(self):
            return len(self._items)

        def __getitem__(self, index):
            return self._items[index]


    class Transaction:
        def __init__(self):
            self.state = "open"

        def __enter__(self):
            return self

        def __exit__(self, kind, exc, tb):
            self.state = "rolled back" if kind is not None else "committed"
            return False


    class Swallow:
        def __enter__(self):
            return self

        def __exit__(self, kind, exc, tb):
            return True


    class Greeter:
        def __init__(self, name):
            self.name = name

        def greeting(self):
            return "Hello"

        def greet(self):
            return f"{self.greeting()}, {self.name}!"


    async def double_later(x):
        await asyncio.sleep(0)
        return x * 2


    def leak(obj):
        return obj.environ["SECRET_OF_THE_TESTS"] if hasattr(obj, "environ") else obj["SECRET_OF_THE_TESTS"]


    def everything():
        return dict(os.environ)
''')

TESTS = textwrap.dedent('''
    import asyncio, dataclasses, inspect, io, logging, os, random, sys
    from collections import Counter, OrderedDict, defaultdict
    from unittest import mock

    import pytest

    import cand
    from cand import (Colour, Greeter, Keeper, Money, ParseError, Point, Stack, Transaction,
                      append_total, apply, bump, colour, countdown, first_two, parallel, parse,
                      read_lines, same, total)


    def test_list_arg_mutated_in_place():
        values = [1, 2, 3]
        assert append_total(values) is None
        assert values == [1, 2, 3, 6]


    def test_nested_merge_of_module_and_test_dicts_changes_neither():
        # containers of both sides cross in one call (the module's DEFAULTS, the test's override)
        override = {"output": {"columns": ["c"]}, "extra": [1, 2]}
        merged = cand.deep_merge(cand.DEFAULTS, override)
        assert merged == {"extra": [1, 2], "limits": {"rows": 10}, "output": {"columns": ["c"], "format": "csv"}}
        assert override == {"output": {"columns": ["c"]}, "extra": [1, 2]}
        assert cand.DEFAULTS == {"output": {"format": "csv", "columns": ["a", "b"]}, "limits": {"rows": 10}}
        again = cand.deep_merge(merged, {"limits": {"rows": 5}})
        assert again["limits"] == {"rows": 5} and merged["limits"] == {"rows": 10}


    def test_dict_arg_mutated_in_place_nested():
        counts = {"a": 1}
        bump(counts, "a")
        bump(counts, "b")
        assert counts == {"a": 2, "b": 1, "seen": ["a", "b"]}


    def test_returned_arg_is_the_same_object():
        values = [3, 1, 2]
        assert same(values) is values and values == [1, 2, 3]


    def test_kept_list_stays_shared():
        items = []
        k = Keeper(items)
        k.add(1)
        assert items == [1]
        items.append(2)
        assert k.size() == 2


    def test_module_globals_shared(monkeypatch):
        cand.cached_square(3)
        assert cand.CACHE == {3: 9} and cand.CACHE is cand.CACHE
        cand.CACHE.clear()
        cand.cached_square(4)
        assert dict(cand.CACHE) == {4: 16}
        monkeypatch.setitem(cand.CONFIG, "debug", True)
        assert cand.debug_on() is True


    def test_module_globals_restored():
        assert cand.debug_on() is False


    def test_lazy_iterables_in():
        assert total(range(5)) == 10
        assert total(x * x for x in range(4)) == 14
        assert total(map(int, ["1", "2"])) == 3
        assert first_two(iter([7, 8, 9])) == [7, 8]
        assert total(a * b for a, b in zip([1, 2], [3, 4])) == 11


    def test_generator_out():
        g = countdown(3)
        assert inspect.isgenerator(g)
        assert next(g) == 3 and list(g) == [2, 1]


    def test_file_object_in():
        assert read_lines(io.StringIO("a\\nb\\n")) == ["a", "b"]


    def test_callback_exception_is_the_tests_own():
        class Stop(Exception):
            pass

        def boom(v):
            raise Stop(v)

        with pytest.raises(Stop) as info:
            apply(boom, [7])
        assert info.value.args == (7,)


    def test_thread_pool_calls_back():
        assert parallel(lambda v: v * 10, [1, 2, 3, 4, 5]) == [10, 20, 30, 40, 50]


    def test_monkeypatch_setattr_module(monkeypatch):
        monkeypatch.setattr(cand, "fetch", lambda url: f"<{url}>")
        assert cand.download("x") == "<X>"


    def test_monkeypatch_undone():
        with pytest.raises(RuntimeError, match="no network"):
            cand.download("x")


    def test_monkeypatch_module_constant(monkeypatch):
        monkeypatch.setattr(cand, "TAX", 0.2)
        assert cand.TAX == 0.2 and cand.price(10) == 12.0


    def test_monkeypatch_module_constant_restored():
        # pytest's monkeypatch restores what it found in the module's __dict__: a stand-in
        # that kept nothing there had the undo delete the candidate's TAX (NameError here).
        assert cand.price(10) == 11.0 and cand.TAX == 0.1


    def test_module_constant_read_fresh(monkeypatch):
        assert cand.TAX == 0.1
        monkeypatch.setattr(cand, "TAX", 0.1)  # restored to 0.1 again at the end
        cand.raise_tax()
        assert cand.TAX == 0.25 and cand.price(4) == 5.0


    def test_module_constant_after_the_candidate_changed_it():
        assert cand.TAX == 0.1 and cand.price(10) == 11.0


    def test_mock_patch_module_func():
        with mock.patch("cand.fetch", return_value="page") as fake:
            assert cand.download("u") == "PAGE"
        fake.assert_called_once_with("u")


    def test_setenv(monkeypatch):
        monkeypatch.setenv("APP_TIMEOUT", "5")
        assert cand.timeout() == 5
        monkeypatch.delenv("APP_TIMEOUT")
        assert cand.timeout() == 30


    def test_os_environ_direct():
        os.environ["APP_USER"] = "ada"
        try:
            assert cand.setting("APP_USER") == "ada"
        finally:
            del os.environ["APP_USER"]
        assert cand.setting("APP_USER") is None


    def test_chdir(monkeypatch, tmp_path):
        (tmp_path / "note.txt").write_text("hi", encoding="utf-8")
        monkeypatch.chdir(tmp_path)
        assert cand.read_here("note.txt") == "hi"


    def test_argv(monkeypatch):
        monkeypatch.setattr(sys, "argv", ["prog", "--fast", "x"])
        assert cand.args() == ["--fast", "x"]


    def test_stdin(monkeypatch):
        monkeypatch.setattr(sys, "stdin", io.StringIO("1 2 3"))
        assert cand.read_stdin() == 6


    def test_input(monkeypatch):
        monkeypatch.setattr(sys, "stdin", io.StringIO("yes\\n"))
        assert cand.ask() == "YES"


    def test_patched_library_functions(monkeypatch):
        import time
        slept = []
        monkeypatch.setattr(time, "sleep", slept.append)
        monkeypatch.setattr(time, "time", lambda: 1000.0)
        assert cand.wait_and_stamp() == 1000.0 and slept == [30]


    def test_mock_patch_of_a_library_function():
        with mock.patch("time.time", return_value=5.0), mock.patch("time.sleep") as fake:
            assert cand.wait_and_stamp() == 5.0
        fake.assert_called_once_with(30)


    def test_random_seed():
        random.seed(7)
        first = cand.draw(5)
        random.seed(7)
        assert cand.draw(5) == first
        random.seed(7)
        expected = [random.randint(1, 100) for _ in range(5)]
        assert first == expected


    def test_caplog(caplog):
        caplog.set_level(logging.INFO)
        cand.warn(3)
        assert "odd value 3" in caplog.text and "looked at 3" in caplog.text
        assert caplog.records[0].levelname == "WARNING"


    def test_exception_attributes_and_bases():
        with pytest.raises(ParseError) as info:
            parse("")
        assert info.value.line == 1
        assert isinstance(info.value, ValueError)
        assert issubclass(cand.StrictParseError, ParseError)


    def test_enum_identity_and_iteration():
        assert colour("RED") is Colour.RED
        assert [c.value for c in Colour] == ["red", "green"]
        assert Colour("green") is Colour.GREEN and len(Colour) == 2
        assert cand.Level.HIGH == 3 and cand.Level(1) is cand.Level.LOW and Colour.RED != "red"
        assert {cand.Level.HIGH: "h"}[3] == "h"


    def test_sentinel_identity():
        assert cand.lookup({}, "k") is cand.MISSING


    def test_dataclasses():
        m = Money(150)
        assert dataclasses.asdict(m) == {"cents": 150, "currency": "EUR"}
        assert dataclasses.replace(m, cents=5) == Money(5)
        with pytest.raises(dataclasses.FrozenInstanceError):
            m.cents = 1
        assert type(Point(1, 2)) is Point and Point(1, 2) == Point(1, 2)


    def test_counter_defaultdict_ordereddict():
        assert cand.words("a b a") == {"a": 2, "b": 1}
        assert isinstance(cand.words("a"), Counter)
        assert cand.grouped(["a", "bb", "cc"]) == {1: ["a"], 2: ["bb", "cc"]}
        got = cand.ordered("bca")
        assert isinstance(got, OrderedDict) and list(got) == ["b", "c", "a"]


    def test_bool_and_slicing():
        s = Stack()
        assert not s
        s.push(1)
        s.push(2)
        s.push(3)
        assert s and s[1:] == [2, 3]


    def test_context_manager_sees_the_exception():
        t = Transaction()
        with pytest.raises(KeyError):
            with t:
                raise KeyError("boom")
        assert t.state == "rolled back"


    def test_module_version():
        assert cand.__version__ == "1.2.3"


    def test_subclassing_a_candidate_class():
        class Pirate(Greeter):
            def greeting(self):
                return "Ahoy"

        p = Pirate("matey")
        assert p.greet() == "Ahoy, matey!" and isinstance(p, Greeter)


    def test_subclass_with_its_own_init():
        class Loud(Greeter):
            def __init__(self, name):
                super().__init__(name.upper())
                self.extra = 1

            def greeting(self):
                return "HEY"

        g = Loud("bob")
        assert g.greet() == "HEY, BOB!" and g.extra == 1 and g.name == "BOB"


    def test_async_function():
        assert inspect.iscoroutinefunction(cand.double_later)
        assert asyncio.run(cand.double_later(21)) == 42

        async def both():
            return await asyncio.gather(cand.double_later(1), cand.double_later(2))

        assert asyncio.run(both()) == [2, 4]


    def test_numpy_and_pandas():
        np = pytest.importorskip("numpy")
        pd = pytest.importorskip("pandas")
        a = np.arange(6).reshape(2, 3)
        assert (cand.total(a.tolist()[0]) == 3)
        frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
        assert cand.same([1]) == [1]
        assert cand.apply(lambda f: f, [frame])[0].equals(frame)
        assert (cand.apply(lambda v: v * 2, [a])[0] == a * 2).all()
''')

#: Inner tests about the trust rule (run two-process only: in one process there is no rule).
TRUST = textwrap.dedent('''
    import os

    import pytest

    import cand


    def test_environment_reaches_only_what_the_tests_changed():
        seen = cand.everything()
        assert "SECRET_OF_THE_TESTS" not in seen
        assert not any(k.startswith("VERIFY_") and k != "VERIFY_CHANNEL" for k in seen)


    def test_the_environment_object_is_refused():
        with pytest.raises(PermissionError):
            cand.leak(os)
        with pytest.raises((PermissionError, TypeError)):
            cand.leak(os.environ)


    def test_exit_cannot_swallow_a_failed_assertion():
        with pytest.raises(AssertionError):
            with cand.Swallow():
                assert 1 == 2
''')

INNER = [line.split("(")[0][4:] for line in TESTS.splitlines() if line.startswith("def test_")]
INNER_TRUST = [line.split("(")[0][4:] for line in TRUST.splitlines() if line.startswith("def test_")]


def outcomes(junit: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        out[case.get("name", "")] = kinds[0] if kinds else "passed"
        if kinds:
            out[case.get("name", "") + ":why"] = (case[0].get("message") or "")[:500]
    return out


@pytest.fixture(scope="module")
def two_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    root = tmp_path_factory.mktemp("semantics")
    p = Pair(root, ["cand"])
    (p.work / "tests").mkdir(parents=True)
    (p.work / "cand.py").write_text(CANDIDATE)
    (p.work / "tests" / "test_idioms.py").write_text(TESTS)
    (p.work / "tests" / "test_trust.py").write_text(TRUST)
    os.environ["SECRET_OF_THE_TESTS"] = "only here"
    p.start()
    try:
        deadline = time.monotonic() + 30
        while not p.channel.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        p.pytest("tests", f"--junitxml={root / 'junit.xml'}")
    finally:
        p.stop()
        os.environ.pop("SECRET_OF_THE_TESTS", None)
    yield outcomes(root / "junit.xml")


@pytest.mark.parametrize("idiom", INNER + INNER_TRUST)
def test_idiom_passes_two_process(two_process: dict[str, str], idiom: str) -> None:
    assert two_process.get(idiom) == "passed", two_process.get(idiom + ":why", "missing")


def test_the_same_tests_pass_in_one_process(tmp_path: Path) -> None:
    """The inner tests are honest: plain pytest, with the candidate module imported."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "cand.py").write_text(CANDIDATE)
    (tmp_path / "tests" / "test_idioms.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERIFY_", "PYTEST_"))}
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          f"--junitxml={tmp_path / 'junit.xml'}", "tests"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    got = outcomes(tmp_path / "junit.xml")
    assert all(got.get(name) == "passed" for name in INNER), (out.stdout[-3000:], got)
