"""The two-process wire codec (docs/wire-protocol.md): what crosses by value, and what is refused."""

from __future__ import annotations

import datetime as dt
import decimal
import fractions
import json
import math
import pathlib
import socket
import uuid
from collections import OrderedDict, namedtuple
from typing import Any

import pytest

from verify_cli.harness.candidate.verify_wire import (
    MAX_DEPTH,
    MAX_FRAME,
    WireError,
    decode,
    encode,
    error_payload,
    pack_frame,
    parse_frame_body,
    read_frame,
    write_frame,
)


def through_json(value: Any) -> Any:
    """Encode, serialise as a frame would, parse, decode."""
    return decode(parse_frame_body(json.dumps({"ok": encode(value)}).encode())["ok"])


PLAIN = [
    None, True, False, 0, 1, -1, 2 ** 53 - 1, -(2 ** 53) + 1, 2 ** 53, -(2 ** 53), 10 ** 40, -(10 ** 40),
    0.0, -0.0, 1.0, 1.5, -2.25e-300, 1e308, float("inf"), float("-inf"),
    "", "héllo\u0000\n", b"", b"\x00\xff raw", bytearray(b"ab"),
    [], [1, [2, [3]]], (), (1,), (1, (2.0, "x")), {}, {"a": 1, 2: "b", (1, 2): [3], None: b"x"},
    set(), {1, 2, 3}, frozenset({"a", (1, 2)}), {frozenset({1}): {2}} ,
    dt.datetime(2024, 3, 1, 8, 30, 15, 123456), dt.datetime(2024, 3, 1, 8, 30, tzinfo=dt.UTC),
    dt.datetime(2024, 3, 1, tzinfo=dt.timezone(dt.timedelta(hours=-2))), dt.date(1999, 12, 31),
    dt.time(23, 59, 1, 5), dt.timedelta(days=-1, seconds=5, microseconds=7),
    decimal.Decimal("0.10"), decimal.Decimal("-1E+3"), fractions.Fraction(-3, 7),
    pathlib.Path("/tmp/x y/z.ini"), complex(1.5, -2.0), uuid.UUID(int=12345),
]


@pytest.mark.parametrize("value", PLAIN, ids=lambda v: type(v).__name__)
def test_plain_values_round_trip_with_their_exact_type(value: Any) -> None:
    back = through_json(value)
    assert type(back) is type(value)
    assert back == value
    assert repr(back) == repr(value)  # -0.0 vs 0.0, Decimal('0.10') vs Decimal('0.1')


def test_int_and_float_stay_distinct() -> None:
    assert type(through_json(1)) is int
    assert type(through_json(1.0)) is float
    assert type(through_json(True)) is bool
    assert through_json([1, 1.0, True]) == [1, 1.0, True]
    assert [type(x) for x in through_json([1, 1.0, True])] == [int, float, bool]


def test_nan_round_trips_as_nan() -> None:
    back = through_json(float("nan"))
    assert type(back) is float and math.isnan(back)


def test_big_ints_travel_as_decimal_text() -> None:
    assert encode(2 ** 53) == {"$int": str(2 ** 53)}
    assert encode(2 ** 53 - 1) == 2 ** 53 - 1
    assert through_json(-(7 ** 300)) == -(7 ** 300)


def test_bare_json_floats_and_constants_are_refused() -> None:
    for body in (b'{"id": 1, "ok": 1.5}', b'{"id": 1, "ok": NaN}', b'{"id": 1, "ok": Infinity}',
                 b'{"id": 1, "ok": 1e3}'):
        with pytest.raises(WireError):
            parse_frame_body(body)


@pytest.mark.parametrize("data", [
    {"$float": "1.0; import os"}, {"$float": 1.0}, {"$int": "12a"}, {"$int": 5}, {"$bytes": "!!"},
    {"$tuple": "ab"}, {"$dict": [[1]]}, {"$dict": {"a": 1}}, {"$set": [[1]]},  # list is unhashable
    {"$object": []}, {"$pickle": "gASV"}, {"__class__": "os.system"}, {"a": 1, "b": 2},
    {"$timedelta": [1, 2]}, {"$fraction": "1/x"}, {"$complex": [1, 2]}, 2 ** 60, -(2 ** 53),
    {"$handle": 1, "owner": "candidate", "kind": "object", "type": "X", "module": "m"},
    {"$datetime": 5}, {"$path": None},
])
def test_anything_else_is_refused(data: Any) -> None:
    with pytest.raises(WireError):
        decode(data)


def test_handles_go_to_the_callers_factory_and_nowhere_else() -> None:
    seen: list[dict[str, Any]] = []

    def make(desc: dict[str, Any]) -> str:
        seen.append(desc)
        return f"proxy-{desc['$handle']}"

    data = [{"$handle": 7, "owner": "candidate", "kind": "object", "type": "Point", "module": "geo",
             "fields": {"x": 1, "y": {"$float": "2.5"}}, "ignored": "extra keys are dropped"}]
    assert decode(data, make) == ["proxy-7"]
    assert seen == [{"$handle": 7, "owner": "candidate", "kind": "object", "type": "Point",
                     "module": "geo", "fields": {"x": 1, "y": 2.5}, "eq": "identity"}]
    with pytest.raises(WireError):
        decode({"$handle": 7, "owner": "root", "kind": "object"}, make)
    with pytest.raises(WireError):
        decode({"$handle": "7", "owner": "candidate"}, make)
    with pytest.raises(WireError):
        decode({"$handle": 7, "owner": "candidate", "fields": [1]}, make)


class Weird:
    pass


class AlwaysEqualStr(str):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = str.__hash__


def test_subclasses_and_objects_are_not_plain() -> None:
    Pair = namedtuple("Pair", "a b")
    for value in (Weird(), AlwaysEqualStr("x"), OrderedDict(a=1), Pair(1, 2), print, lambda: 1,
                  dt.datetime(2024, 1, 1, tzinfo=dt.UTC).astimezone(_ZoneLike())):
        with pytest.raises(WireError):
            encode(value)
        handled = encode([value], lambda v: {"$handle": 1, "owner": "candidate", "kind": "object",
                                             "type": type(v).__name__, "module": "m"})
        assert handled[0]["$handle"] == 1


class _ZoneLike(dt.tzinfo):
    def utcoffset(self, d: dt.datetime | None) -> dt.timedelta:
        return dt.timedelta(hours=1)

    def dst(self, d: dt.datetime | None) -> dt.timedelta:
        return dt.timedelta(0)


def test_depth_limit_both_ways() -> None:
    deep: Any = 1
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(WireError):
        encode(deep)
    data: Any = 1
    for _ in range(MAX_DEPTH + 5):
        data = [data]
    with pytest.raises(WireError):
        decode(data)
    ok: Any = 1
    for _ in range(MAX_DEPTH - 1):
        ok = [ok]
    assert through_json(ok) == ok
    with pytest.raises(WireError):  # json's own recursion limit is a protocol error too
        parse_frame_body(b'{"ok": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")


def test_cycles_become_handles_or_are_refused() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(WireError):
        encode(loop)
    out = encode(loop, lambda v: {"$handle": 3, "owner": "candidate", "kind": "object", "type": "list",
                                  "module": "builtins"})
    assert out == [1, {"$handle": 3, "owner": "candidate", "kind": "object", "type": "list",
                       "module": "builtins"}]
    shared = [1]
    assert through_json([shared, shared]) == [[1], [1]]  # shared, not cyclic: by value twice


def test_frames_over_a_socket_and_their_size_limit() -> None:
    a, b = socket.socketpair()
    with a, b:
        write_frame(a, {"id": 1, "ok": encode({"k": (1.0, b"x")})})
        msg = read_frame(b)
        assert msg["id"] == 1 and decode(msg["ok"]) == {"k": (1.0, b"x")}
        a.sendall((MAX_FRAME + 1).to_bytes(4, "big"))
        with pytest.raises(WireError):
            read_frame(b)
        a.close()
        with pytest.raises(EOFError):
            read_frame(b)
    with pytest.raises(WireError):
        pack_frame({"ok": "x" * (MAX_FRAME + 1)})
    with pytest.raises(WireError):
        parse_frame_body(b"[1, 2]")


def test_error_payload_names_builtin_bases() -> None:
    class ParseError(ValueError):
        pass

    err = error_payload(ParseError("bad input", 3))
    assert err["type"] == "ParseError"
    assert err["bases"] == ["ValueError", "Exception", "BaseException"]
    assert err["message"] == "('bad input', 3)"
    assert [decode(a) for a in err["args"]] == ["bad input", 3]
    assert error_payload(KeyError("k"))["bases"][:2] == ["KeyError", "LookupError"]
