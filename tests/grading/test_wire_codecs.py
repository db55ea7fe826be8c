"""The codec registry and the shared containers of the wire (docs/wire-protocol.md): what the
decoders build, what they refuse, and how two peers keep a shared list in step (threads too)."""

from __future__ import annotations

import collections
import json
import socket
import sys
import threading
from typing import Any

import pytest

from verify_cli.sandbox.environment import CANDIDATE_HARNESS_DIR

sys.path.insert(0, str(CANDIDATE_HARNESS_DIR))

import verify_codecs  # noqa: F401
import verify_peer
import verify_wire


def through_json(value: Any) -> Any:
    data = json.loads(json.dumps(verify_wire.encode(value)))
    return verify_wire.decode(data)


@pytest.mark.parametrize("value", [
    collections.Counter("abca"), collections.OrderedDict([("b", 1), ("a", 2)]),
    collections.defaultdict(list, {1: [2]}), collections.deque([1, 2], maxlen=3),
    range(1, 10, 3), slice(1, None, 2),
])
def test_collections_keep_their_types(value: Any) -> None:
    got = through_json(value)
    assert type(got) is type(value) and got == value
    if isinstance(value, collections.defaultdict):
        assert got.default_factory is list


def test_a_defaultdict_with_another_factory_loses_only_the_factory() -> None:
    got = through_json(collections.defaultdict(lambda: 0, {"a": 1}))
    assert type(got) is collections.defaultdict and got.default_factory is None and got == {"a": 1}


def test_numpy_and_pandas_values() -> None:
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    array = np.arange(6, dtype="int32").reshape(2, 3)
    got = through_json(array)
    assert got.dtype == array.dtype and got.shape == (2, 3) and (got == array).all()
    assert through_json(np.float64(1.5)) == 1.5 and type(through_json(np.float64(1.5))) is np.float64
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"], "t": pd.to_datetime(["2024-01-01", "2024-01-02"])},
                         index=["r1", "r2"])
    assert through_json(frame).equals(frame)
    series = pd.Series([1.5, None], name="s")
    assert through_json(series).equals(series)


@pytest.mark.parametrize("bad", [
    {"$ndarray": {"dtype": "O", "shape": [1], "data": ""}},
    {"$ndarray": {"dtype": "<f8", "shape": [-1], "data": ""}},
    {"$ndarray": {"dtype": "V8", "shape": [1], "data": "AAAAAAAAAAA="}},
    {"$defaultdict": ["os.system", []]},
    {"$counter": "abc"},
    {"$range": [1, 2.5, 1]},
    {"$mut": 1, "owner": "trusted", "value": []},  # no shared containers where plain data is due
    {"$unknown": 1},
])
def test_the_decoders_refuse_what_is_not_their_data(bad: dict[str, Any]) -> None:
    pytest.importorskip("numpy")
    with pytest.raises(verify_wire.WireError):
        verify_wire.decode(bad)


def test_a_task_registers_its_own_codec() -> None:
    class Money:
        def __init__(self, cents: int) -> None:
            self.cents = cents

    verify_wire.register_codec(Money, "$test_money", lambda v, part: {"$test_money": v.cents},
                               lambda body, part: Money(body))
    got = through_json(Money(5))
    assert type(got) is Money and got.cents == 5
    with pytest.raises(ValueError):
        verify_wire.register_codec(Money, "$dict", lambda v, p: None, lambda b, p: None)


def pair(dispatch: Any) -> tuple[verify_peer.Peer, verify_peer.Peer]:
    """A trusted peer and a candidate peer on a socket pair, the candidate serving ``dispatch``."""
    a, b = socket.socketpair()

    def describe(obj: Any) -> dict[str, Any]:
        return {"kind": "callable" if callable(obj) else "object", "type": type(obj).__name__,
                "module": "m"}

    holder: dict[str, verify_peer.Peer] = {}

    def remote(desc: dict[str, Any]) -> Any:
        def call(*args: Any) -> Any:
            peer = holder["candidate"]
            return peer.request("call", target={"$handle": desc["$handle"], "owner": "trusted"},
                                **peer.encode_call(args, {}))
        return call

    candidate = verify_peer.Peer(b, "candidate", describe=describe, make_remote=remote,
                                 dispatch=lambda op, msg: dispatch(holder["candidate"], msg))
    holder["candidate"] = candidate

    def serve_trusted(op: str, msg: dict[str, Any]) -> Any:
        target = trusted.decode(msg["target"])
        return target(*trusted.decode(msg["args"]))

    trusted = verify_peer.Peer(a, "trusted", describe=describe, make_remote=lambda d: d,
                               dispatch=serve_trusted, share_containers=True)
    threading.Thread(target=candidate.serve_forever, daemon=True).start()
    return trusted, candidate


def test_a_shared_list_stays_in_step_both_ways() -> None:
    kept: list[Any] = []

    def dispatch(peer: verify_peer.Peer, msg: dict[str, Any]) -> Any:
        args = peer.decode(msg["args"])
        if not kept:
            kept.append(args[0])  # the candidate keeps the test's list
        kept[0].append(len(kept[0]))
        return kept[0]

    trusted, _candidate = pair(dispatch)
    values = [10]
    got = trusted.request("call", target={"$handle": 1, "owner": "candidate"}, **trusted.encode_call([values], {}))
    assert got is values and values == [10, 1]
    values.append(99)  # the test changes it: the next call sees the change
    trusted.request("call", target={"$handle": 1, "owner": "candidate"}, **trusted.encode_call([[]], {}))
    assert kept[0] == [10, 1, 99, 3] and values == [10, 1, 99, 3]


def test_copies_the_candidate_no_longer_holds_are_dropped() -> None:
    def dispatch(peer: verify_peer.Peer, msg: dict[str, Any]) -> Any:
        peer.decode(msg["args"])[0].append(1)
        return None

    trusted, candidate = pair(dispatch)
    for _ in range(50):
        trusted.request("call", target={"$handle": 1, "owner": "candidate"}, **trusted.encode_call([[0]], {}))
    assert not trusted._shared and not candidate._replicas


def test_threads_of_the_candidate_call_back_at_once() -> None:
    def dispatch(peer: verify_peer.Peer, msg: dict[str, Any]) -> Any:
        callback = peer.decode(msg["args"])[0]
        results: list[Any] = [None] * 8
        barrier = threading.Barrier(8)

        def work(i: int) -> None:
            barrier.wait(timeout=10)  # all eight call back at the same time
            results[i] = callback(i)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=20)
        return results

    trusted, _candidate = pair(dispatch)
    got = trusted.request("call", target={"$handle": 1, "owner": "candidate"},
                          **trusted.encode_call([lambda i: i * i], {}))
    assert got == [i * i for i in range(8)]
