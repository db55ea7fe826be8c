"""One end of a two-process grading connection (docs/wire-protocol.md), stdlib only.

A :class:`Peer` owns the objects it handed out as handles, sends requests and, while it waits
for the answer to its own request, serves the requests the other side sends (callbacks
re-enter to any depth). What a side serves, and what a handle of the other side becomes, is up
to the side: the candidate server and the trusted stand-in importer build on this class.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Callable
from typing import Any

from verify_wire import Decoder, Encoder, FrameReader, WireError, error_payload, pack_frame

Dispatch = Callable[[str, dict[str, Any]], Any]


class RemoteError(Exception):
    """The other side answered a request with an error (``payload`` as in the protocol)."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(str(payload.get("message", "")))
        self.payload = payload


class ChannelClosed(Exception):
    """The other side closed the channel or broke the protocol; no call can cross any more."""


class Peer:
    """``owner`` is this side's name ("candidate" or "trusted")."""

    def __init__(self, sock: socket.socket, owner: str, *, describe: Callable[[Any], dict[str, Any]],
                 make_remote: Callable[[dict[str, Any]], Any], dispatch: Dispatch,
                 reply_extras: Callable[[], dict[str, Any]] | None = None,
                 on_answer: Callable[[dict[str, Any]], None] | None = None,
                 remote_ref: Callable[[Any], dict[str, Any] | None] | None = None) -> None:
        self.sock = sock
        self._reader = FrameReader(sock)
        self._sendall = sock.sendall
        self.owner = owner
        self._describe = describe
        self._make_remote = make_remote
        self._dispatch = dispatch
        #: Extra fields of each answer this side sends (the candidate's printed output), and
        #: what to do with those of each answer it receives.
        self._reply_extras = reply_extras
        self._on_answer = on_answer
        #: The reference of a stand-in for one of the other side's objects (sent back as that
        #: object, never as a new handle of this side), or None for this side's own objects.
        self._remote_ref = remote_ref
        self._owned: dict[int, Any] = {}
        self._ids: dict[int, int] = {}
        self._next_handle = itertools.count(1)
        self._next_request = itertools.count(1)
        self._lock = threading.RLock()
        self.broken: str | None = None

    # -- handles ----------------------------------------------------------------------------
    def handle_for(self, obj: Any) -> dict[str, Any]:
        """A descriptor for ``obj`` (kept alive here until released)."""
        if self._remote_ref is not None:
            ref = self._remote_ref(obj)
            if ref is not None:
                return ref
        hid = self._ids.get(id(obj))
        if hid is None or self._owned.get(hid) is not obj:
            hid = next(self._next_handle)
            self._owned[hid] = obj
            self._ids[id(obj)] = hid
        desc = {"$handle": hid, "owner": self.owner}
        desc.update(self._describe(obj))
        return desc

    def owned(self, hid: int) -> Any:
        try:
            return self._owned[hid]
        except KeyError:
            raise WireError(f"no object with handle {hid} here (released or never sent)") from None

    def release(self, ids: list[int]) -> None:
        for hid in ids:
            obj = self._owned.pop(hid, None)
            if obj is not None:
                self._ids.pop(id(obj), None)

    def _make_handle(self, desc: dict[str, Any]) -> Any:
        if desc["owner"] == self.owner:
            return self.owned(desc["$handle"])
        return self._make_remote(desc)

    def encode(self, value: Any) -> Any:
        return Encoder(self.handle_for).encode(value)

    def decode(self, data: Any) -> Any:
        return Decoder(self._make_handle).decode(data)

    # -- requests -----------------------------------------------------------------------------
    def request(self, op: str, **fields: Any) -> Any:
        """Send a request and return its decoded result; serve the other side meanwhile.

        Raises RemoteError for an error answer, ChannelClosed when the channel is gone.
        """
        with self._lock:
            if self.broken:
                raise ChannelClosed(self.broken)
            rid = next(self._next_request)
            self._send({"id": rid, "op": op, **fields})
            while True:
                msg = self._receive()
                if "op" in msg:
                    self._serve(msg)
                    continue
                if self._on_answer is not None:
                    self._on_answer(msg)
                if msg.get("id") != rid:
                    raise self._break(f"an answer to request {msg.get('id')!r} while waiting for {rid}")
                if "error" in msg:
                    err = msg["error"]
                    if type(err) is not dict:
                        raise self._break("an error answer that is not an object")
                    raise RemoteError(err)
                if "ok" not in msg:
                    raise self._break("an answer with neither ok nor error")
                try:
                    return self.decode(msg["ok"])
                except WireError as e:
                    raise self._break(f"undecodable answer: {e}") from None

    def serve_forever(self) -> None:
        """Serve requests until the other side closes the channel."""
        with self._lock:
            while True:
                try:
                    msg = self._receive()
                except ChannelClosed:
                    return
                if "op" not in msg:
                    self._break("an answer to no request")
                    return
                self._serve(msg)

    def _serve(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        op = msg.get("op")
        try:
            if type(op) is not str or type(rid) is not int:
                raise WireError("a request needs an int id and a str op")
            result = self._dispatch(op, msg)
            reply = {"id": rid, "ok": self.encode(result)}
        except BaseException as e:
            if isinstance(e, ChannelClosed):
                raise
            reply = {"id": rid, "error": error_payload(e, self._encode_arg)}
        if self._reply_extras is not None:
            reply.update(self._reply_extras())
        self._send(reply)

    def _encode_arg(self, value: Any) -> Any:
        return self.encode(value)

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self._sendall(pack_frame(message))
        except WireError:
            raise
        except OSError as e:
            raise self._break(f"cannot write to the channel: {e}") from None

    def _receive(self) -> dict[str, Any]:
        try:
            return self._reader.read()
        except EOFError:
            raise self._break("the other side closed the channel") from None
        except WireError as e:
            raise self._break(f"protocol error: {e}") from None
        except OSError as e:
            raise self._break(f"channel error: {e}") from None

    def _break(self, why: str) -> ChannelClosed:
        self.broken = self.broken or why
        with contextlib.suppress(OSError):
            self.sock.close()
        return ChannelClosed(why)
