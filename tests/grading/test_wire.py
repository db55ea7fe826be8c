"""The two-process wire codec (docs/wire-protocol.md): what crosses by value, and what is refused."""

from __future__ import annotations

import datetime as dt
import decimal
import fractions
import json
import math
import pathlib
import socket
import threading
import uuid
from collections import OrderedDict, namedtuple
from typing import Any

import pytest

from verify_cli.harness.candidate.verify_wire import (
    MAX_DEPTH,
    MAX_FRAME,
    FrameReader,
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
    if not isinstance(value, (set, frozenset)):  # a set's repr follows its insertion order and hashes
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


# -- the fast paths (one reused JSON encoder/decoder, a buffered frame reader, inline scalars) --


def _frames(*messages: dict[str, Any]) -> bytes:
    return b"".join(pack_frame(m) for m in messages)


def test_frame_reader_splits_frames_that_arrive_together_or_in_pieces() -> None:
    messages = [{"id": i, "ok": encode(v)} for i, v in enumerate(PLAIN)]
    messages.append({"id": 999, "ok": encode("x" * (3 * FrameReader.CHUNK + 5))})  # over one buffer
    data = _frames(*messages)
    for piece in (len(data), 1, 3, 4097):  # all at once, byte by byte, odd sizes
        a, b = socket.socketpair()
        with a, b:
            reader = FrameReader(b)

            def send(a: socket.socket = a, data: bytes = data, piece: int = piece) -> None:
                for i in range(0, len(data), piece):
                    a.sendall(data[i:i + piece])
                a.close()

            t = threading.Thread(target=send)
            t.start()
            got = [reader.read() for _ in messages]
            t.join()
            for msg, sent in zip(got, messages, strict=True):
                assert msg["id"] == sent["id"]
                back = decode(msg["ok"])
                assert repr(back) == repr(decode(sent["ok"]))
            assert not reader.buffered()
            with pytest.raises(EOFError):
                reader.read()


def test_frame_reader_refuses_what_read_frame_refuses() -> None:
    for raw, error in (((MAX_FRAME + 1).to_bytes(4, "big") + b"{}", WireError),
                      (b"\x00\x00\x00\x05{\"a\"", EOFError),  # closed mid-frame
                      (b"\x00\x00\x00\x02[]", WireError), (b"\x00\x00\x00\x03{1}", WireError),
                      (b"\x00\x00\x00\x02\xff\xfe", WireError),  # not UTF-8
                      (b"\x00\x00\x00\x0a{\"ok\":1.5}", WireError)):
        a, b = socket.socketpair()
        with a, b:
            a.sendall(raw)
            a.close()
            with pytest.raises(error):
                FrameReader(b).read()


@pytest.mark.parametrize("text", [
    '{"ok":1}', ' {"ok":1}', '{"ok":1} ', '\n{"ok":1}\n', '{"ok":1}{"ok":2}', '{"ok":1} x', '{"ok":',
    '{"ok":1.0}', '{"ok":NaN}', '{"ok":-Infinity}', '{"ok":1e5}', '{"ok":"\\ud800"}', '', ' ', '1',
    '{"ok":[1,2,]}', "{'ok':1}", '{"ok":01}', '{"a":1,"a":2}',
])
def test_frame_bodies_parse_exactly_as_json_loads_with_the_float_rules(text: str) -> None:
    def refuse(s: str) -> Any:
        raise WireError(s)

    try:
        expected: Any = json.loads(text, parse_float=refuse, parse_constant=refuse)
    except (ValueError, WireError):
        expected = WireError
    if type(expected) is not dict and expected is not WireError:
        expected = WireError
    if expected is WireError:
        with pytest.raises(WireError):
            parse_frame_body(text.encode("utf-8", "surrogatepass"))
    else:
        assert parse_frame_body(text.encode("utf-8", "surrogatepass")) == expected


def test_frames_are_compact_utf8_and_refuse_what_is_not_json() -> None:
    assert pack_frame({"ok": ["é", 1, None, True]})[4:] == '{"ok":["é",1,null,true]}'.encode()
    for bad in ({"ok": float("nan")}, {"ok": object()}, {"ok": b"x"}, {"ok": {1, 2}}):
        with pytest.raises((WireError, ValueError, TypeError)):
            pack_frame(bad)


def test_inline_scalars_keep_their_checks() -> None:
    assert decode([1, True, None, "s", False, 0]) == [1, True, None, "s", False, 0]
    assert [type(x) for x in decode([1, True])] == [int, bool]
    for data in ([1, 2 ** 53], [-(2 ** 53)], ["a", 1.5], [[1], {"$float": 2}], [{"x": 1}]):
        with pytest.raises(WireError):
            decode(data)
    assert encode([1, 2 ** 53, True, None, "s"]) == [1, {"$int": str(2 ** 53)}, True, None, "s"]
    assert encode((1, "a")) == {"$tuple": [1, "a"]}
    assert encode({1}) == {"$set": [1]} and encode(frozenset()) == {"$frozenset": []}


def test_depth_limit_is_exact_for_scalars_inside_lists() -> None:
    for leaf in (1, "s", None, 1.5):
        ok: Any = leaf
        for _ in range(MAX_DEPTH):
            ok = [ok]
        assert through_json(ok) == ok  # the leaf at depth MAX_DEPTH
        with pytest.raises(WireError):
            encode([ok])
        with pytest.raises(WireError):
            decode([encode(ok)])


def test_the_node_limit_holds_on_the_inline_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import verify_cli.harness.candidate.verify_wire as wire

    monkeypatch.setattr(wire, "MAX_NODES", 50)
    assert len(decode(list(range(49)))) == 49
    for value in (list(range(60)), [list(range(30)), list(range(30))]):
        with pytest.raises(WireError):
            encode(value)
        with pytest.raises(WireError):
            decode(value)


def test_a_handle_reference_decodes_as_the_full_descriptor_would() -> None:
    seen: list[dict[str, Any]] = []
    decode([{"$handle": 5, "owner": "trusted"}, {"$handle": 5, "owner": "trusted", "kind": ""}],
           lambda d: seen.append(d))
    assert seen[0] == seen[1] == {"$handle": 5, "owner": "trusted", "kind": "", "type": "",
                                  "module": "", "eq": "identity"}
    for bad in ({"$handle": 0, "owner": "trusted"}, {"$handle": 2 ** 53, "owner": "trusted"},
                {"$handle": True, "owner": "trusted"}, {"$handle": 1.5, "owner": "trusted"},
                {"$handle": 1, "owner": "root"}, {"$handle": 1, "owner": None},
                {"$handle": 1, "kind": "object"}):
        with pytest.raises(WireError):
            decode(bad, lambda d: d)
