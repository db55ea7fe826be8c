"""One end of a two-process grading connection (docs/wire-protocol.md), stdlib only.

A :class:`Peer` owns the objects it handed out as handles, sends requests and, while it waits
for the answer to its own request, serves the requests the other side sends (callbacks
re-enter to any depth). What a side serves, and what a handle of the other side becomes, is up
to the side: the candidate server and the trusted stand-in importer build on this class.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

import verify_codecs
from verify_wire import MISSING, Decoder, Encoder, FrameReader, WireError, error_payload, pack_frame

Dispatch = Callable[[str, dict[str, Any]], Any]

# The by-value codecs beyond the core values (collections, numpy, pandas), and the task's own.
verify_codecs.load_task_codecs()


class RemoteError(Exception):
    """The other side answered a request with an error (``payload`` as in the protocol)."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(str(payload.get("message", "")))
        self.payload = payload


class ChannelClosed(Exception):
    """The other side closed the channel or broke the protocol; no call can cross any more."""


class Peer:
    """``owner`` is this side's name ("candidate" or "trusted").

    Any thread may send requests: one waiting thread at a time reads the connection and hands
    each answer to the thread that waits for it, and each request to the thread it is nested in
    (``within``, the id of the request being served when it was sent), so a candidate's thread
    pool calling back into the tests is served, and callbacks re-enter on their own thread.

    With ``share_containers`` the lists, dicts, sets and bytearrays this side sends cross as
    shared containers (``$mut``): the other side's copy is kept in step with this side's object
    both ways (a request or answer carries the changes), until the other side reports that it
    holds its copy no longer."""

    def __init__(self, sock: socket.socket, owner: str, *, describe: Callable[[Any], dict[str, Any]],
                 make_remote: Callable[[dict[str, Any]], Any], dispatch: Dispatch,
                 reply_extras: Callable[[], dict[str, Any]] | None = None,
                 on_answer: Callable[[dict[str, Any]], None] | None = None,
                 remote_ref: Callable[[Any], dict[str, Any] | None] | None = None,
                 request_extras: Callable[[], dict[str, Any]] | None = None,
                 on_request: Callable[[dict[str, Any]], None] | None = None,
                 share_containers: bool = False) -> None:
        self.sock = sock
        self._reader = FrameReader(sock)
        self._sendall = sock.sendall
        self.owner = owner
        self.other = "candidate" if owner == "trusted" else "trusted"
        self._describe = describe
        self._make_remote = make_remote
        self._dispatch = dispatch
        #: Extra fields of each answer this side sends (the candidate's printed output), and
        #: what to do with those of each answer it receives; the same for requests (the tests'
        #: process state, sent before a call).
        self._reply_extras = reply_extras
        self._on_answer = on_answer
        self._request_extras = request_extras
        self._on_request = on_request
        #: The reference of a stand-in for one of the other side's objects (sent back as that
        #: object, never as a new handle of this side), or None for this side's own objects.
        self._remote_ref = remote_ref
        self._owned: dict[int, Any] = {}
        self._ids: dict[int, int] = {}
        self._next_handle = itertools.count(1)
        self._next_request = itertools.count(1)
        self.broken: str | None = None
        # Shared containers: this side's own (id -> object, last value sent) and its copies of
        # the other side's (id -> [object, last value seen]).
        self._share = share_containers
        self._shared: dict[int, list[Any]] = {}
        self._shared_ids: dict[int, int] = {}
        self._replicas: dict[int, list[Any]] = {}
        self._replica_ids: dict[int, int] = {}
        #: This side's containers whose value the message being built already carries.
        self._fresh: set[int] = set()
        self._share_lock = threading.RLock()
        # What the other side's last two reports dropped (the report's own message may name it).
        self._dropped: dict[int, list[Any]] = {}
        self._dropped_before: dict[int, list[Any]] = {}
        # Threads: who reads, what waits for whom.
        self._send_lock = threading.Lock()
        self._cond = threading.Condition(threading.Lock())
        self._reading = False
        self._waiting: set[int] = set()
        self._answers: dict[int, dict[str, Any]] = {}
        self._inbox: dict[int, list[dict[str, Any]]] = {}
        self._local = threading.local()
        self._sleepers = 0  # threads waiting on _cond

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
        return Encoder(self.handle_for, self._share_out).encode(value)

    def decode(self, data: Any) -> Any:
        return Decoder(self._make_handle, self._share_in).decode(data)

    def encode_call(self, args: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The ``args`` and ``kwargs`` fields of a call (the lists and dicts in them may be
        shared; the argument list itself never is)."""
        encoder = Encoder(self.handle_for, self._share_out)
        return {"args": [encoder.encode(a) for a in args],
                "kwargs": {"$dict": [[k, encoder.encode(v)] for k, v in kwargs.items()]}}

    # -- shared containers ----------------------------------------------------------------------
    def _share_out(self, obj: Any, body: Callable[[], Any]) -> Any:
        hid = self._replica_ids.get(id(obj))
        if hid is not None and self._replicas.get(hid, (None,))[0] is obj:
            entry = self._replicas[hid]
            value = body()
            out: dict[str, Any] = {"$mut": hid, "owner": self.other}
            if value != entry[1]:
                entry[1] = value
                out["value"] = value
            return out
        if not self._share and not getattr(self._local, "share_answer", False):
            return None
        hid = self._shared_ids.get(id(obj))
        if hid is None or self._shared.get(hid, (None,))[0] is not obj:
            hid = next(self._next_handle)
            self._shared_ids[id(obj)] = hid
            self._shared[hid] = [obj, None]
        value = body()
        self._shared[hid][1] = value
        self._fresh.add(hid)
        return {"$mut": hid, "owner": self.owner, "value": value}

    def _share_in(self, hid: int, owner: str, value: Any, decode: Callable[[Any], Any]) -> Any:
        if owner == self.owner:
            entry = self._shared.get(hid)
            if entry is None:  # the message that reports it dropped may still name it
                entry = self._dropped.get(hid) or self._dropped_before.get(hid)
            if entry is None:
                raise WireError(f"no shared container {hid} here")
            if value is not MISSING and value != entry[1]:
                entry[1] = value
                _assign(entry[0], decode(value))
            return entry[0]
        entry = self._replicas.get(hid)
        if entry is None:
            if value is MISSING:
                raise WireError(f"shared container {hid} arrived without its value")
            obj = decode(value)
            if type(obj) not in (list, dict, set, bytearray):
                raise WireError("a shared container must be a list, dict, set or bytearray")
            self._replicas[hid] = [obj, value]
            self._replica_ids[id(obj)] = hid
            return obj
        if value is not MISSING and value != entry[1]:
            entry[1] = value
            _assign(entry[0], decode(value))
        return entry[0]

    def _sync_fields(self) -> dict[str, Any]:
        """The changes to shared containers since they last crossed, and the copies this side
        no longer holds (nothing references them but this table)."""
        if not self._shared and not self._replicas:
            self._fresh.clear()
            return {}
        with self._share_lock:  # threads send at once
            return self._sync_fields_locked()

    def _sync_fields_locked(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        drop: list[int] = []
        sync: list[list[Any]] = []
        dropped = True
        while dropped and self._replicas:
            dropped = False
            for hid, entry in list(self._replicas.items()):
                if sys.getrefcount(entry[0]) <= _HELD_ONLY_HERE:
                    self._sync_one(hid, entry, sync, 0)  # its last changes still go back
                    self._replicas.pop(hid, None)
                    self._replica_ids.pop(id(entry[0]), None)
                    drop.append(hid)
                    dropped = True
        fresh, self._fresh = self._fresh, set()
        # Each side numbers its own containers: a sync item says whose number it is (1: the
        # sender's own container, 0: the receiver's, which the sender holds a replica of), or the
        # same number on both sides would reach the wrong container.
        for hid, entry in list(self._shared.items()):
            if hid not in fresh:
                self._sync_one(hid, entry, sync, 1)
        for hid, entry in list(self._replicas.items()):
            self._sync_one(hid, entry, sync, 0)
        if drop:
            out["drop"] = drop
        if sync:
            out["sync"] = sync
        return out

    def _sync_one(self, hid: int, entry: list[Any], sync: list[list[Any]], own: int) -> None:
        try:
            value = self._body(entry[0])
        except WireError:
            return
        if value != entry[1]:
            entry[1] = value
            sync.append([hid, own, value])

    def _body(self, obj: Any) -> Any:
        """The plain form of a shared container (what its ``$mut`` carries as ``value``)."""
        if type(obj) is bytearray:
            return {"$bytearray": base64.b64encode(bytes(obj)).decode("ascii")}
        return Encoder(self.handle_for, self._share_out)._plain_container(obj, type(obj), 1, {id(obj)})

    def _apply_sync(self, msg: dict[str, Any]) -> None:
        """The other side's changes to shared containers, then the copies it dropped."""
        with self._share_lock:
            self._apply_sync_locked(msg)

    def _apply_sync_locked(self, msg: dict[str, Any]) -> None:
        sync = msg.get("sync")
        if type(sync) is list:
            for item in sync:
                if type(item) is not list or len(item) != 3 or type(item[0]) is not int or item[1] not in (0, 1):
                    raise WireError("sync needs [id, whose, value] triples")
                hid, senders, value = item
                if senders and hid in self._replicas:  # the sender's container: a replica here
                    self._share_in(hid, self.other, value, self.decode)
                elif not senders and hid in self._shared:  # this side's container
                    self._share_in(hid, self.owner, value, self.decode)
        drop = msg.get("drop")
        if type(drop) is list:
            self._dropped_before, self._dropped = self._dropped, {}
            for hid in drop:
                entry = self._shared.pop(hid, None) if type(hid) is int else None
                if entry is not None:
                    self._shared_ids.pop(id(entry[0]), None)
                    self._dropped[hid] = entry

    # -- requests -----------------------------------------------------------------------------
    def request(self, op: str, **fields: Any) -> Any:
        """Send a request and return its decoded result; serve the other side meanwhile.

        Raises RemoteError for an error answer, ChannelClosed when the channel is gone.
        """
        if self.broken:
            raise ChannelClosed(self.broken)
        rid = next(self._next_request)
        message = {"id": rid, "op": op, **fields}
        serving = getattr(self._local, "serving", None)
        if serving:
            message["within"] = serving[-1]
        if self._request_extras is not None:
            message.update(self._request_extras())
        with self._cond:
            self._waiting.add(rid)
        try:
            self._send(message)
            msg = self._await(rid)
        finally:
            with self._cond:
                self._waiting.discard(rid)
                self._inbox.pop(rid, None)
        if self._on_answer is not None:
            self._on_answer(msg)
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

    def _wake(self) -> None:
        """Wake the threads waiting on the condition (its lock held), if any."""
        if self._sleepers:
            self._cond.notify_all()

    def _await(self, rid: int) -> dict[str, Any]:
        """The answer to request ``rid``, serving the requests nested in it meanwhile."""
        cond = self._cond
        while True:
            nested: dict[str, Any] | None = None
            reader = False
            # One try from taking the reader's role to giving it back: a signal (a calls
            # runner's per-call alarm) between the two never leaves the role taken.
            try:
                with cond:
                    while True:
                        if self.broken:
                            raise ChannelClosed(self.broken)
                        answer = self._answers.pop(rid, None)
                        if answer is not None:
                            return answer
                        box = self._inbox.get(rid)
                        if box:
                            nested = box.pop(0)
                            break
                        if not self._reading:
                            reader = True
                            self._reading = True
                            break
                        self._sleepers += 1
                        try:
                            cond.wait()
                        finally:
                            self._sleepers -= 1
                if reader:
                    msg = self._receive()
            finally:
                if reader:
                    with cond:
                        self._reading = False
                        self._wake()
            if nested is not None:
                self._serve(nested)
                continue
            if "op" in msg:
                within = msg.get("within")
                if within != rid and within in self._waiting:
                    with cond:
                        self._inbox.setdefault(within, []).append(msg)
                        self._wake()
                else:
                    self._serve(msg)
                continue
            aid = msg.get("id")
            if aid == rid:
                return msg
            with cond:
                if aid not in self._waiting:
                    raise self._break(f"an answer to request {aid!r}, which nobody waits for")
                self._answers[aid] = msg
                self._wake()

    def serve_forever(self) -> None:
        """Serve requests until the other side closes the channel (this thread reads whenever
        no request of this side's threads is waiting for its answer)."""
        cond = self._cond
        while True:
            with cond:
                while self._reading:
                    self._sleepers += 1
                    try:
                        cond.wait()
                    finally:
                        self._sleepers -= 1
                self._reading = True
            try:
                msg = self._receive()
            except ChannelClosed:
                with cond:
                    self._reading = False
                    self._wake()
                return
            with cond:
                self._reading = False
                self._wake()
            if "op" not in msg:
                aid = msg.get("id")
                with cond:
                    if aid in self._waiting:
                        self._answers[aid] = msg
                        self._wake()
                        continue
                self._break("an answer to no request")
                return
            within = msg.get("within")
            if within in self._waiting:
                with cond:
                    self._inbox.setdefault(within, []).append(msg)
                    self._wake()
                continue
            try:
                self._serve(msg)
            except ChannelClosed:
                return

    def _serve(self, msg: dict[str, Any]) -> None:
        rid = msg.get("id")
        op = msg.get("op")
        serving = getattr(self._local, "serving", None)
        if serving is None:
            serving = self._local.serving = []
        serving.append(rid)
        try:
            if type(op) is not str or type(rid) is not int:
                raise WireError("a request needs an int id and a str op")
            if self._on_request is not None:
                self._on_request(msg)
            result = self._dispatch(op, msg)
            try:
                reply = {"id": rid, "ok": self.encode(result)}
            finally:
                self._local.share_answer = False
            del result
        except BaseException as e:
            if isinstance(e, ChannelClosed):
                raise
            reply = {"id": rid, "error": self.error_payload(e)}
        finally:
            serving.pop()
        if self._reply_extras is not None:
            reply.update(self._reply_extras())
        self._send(reply)

    def share_answer(self) -> None:
        """Send the containers of the answer being served as shared ones (this side's own: a
        module's or class's list or dict the tests read, change and read again)."""
        self._local.share_answer = True

    def error_payload(self, exc: BaseException) -> dict[str, Any]:
        """An error answer for ``exc``; the trusted side also sends the exception itself as a
        handle (``value``), so that the test's own exception, let through by the candidate,
        reaches the test again as the very same object."""
        payload = error_payload(exc, self._encode_arg)
        if self.owner == "trusted" and "value" not in payload:
            payload["value"] = {"$handle": self.handle_for(exc)["$handle"], "owner": self.owner}
        return payload

    def _encode_arg(self, value: Any) -> Any:
        return self.encode(value)

    def _send(self, message: dict[str, Any]) -> None:
        message.update(self._sync_fields())
        try:
            frame = pack_frame(message)
        except WireError:
            raise
        try:
            with self._send_lock:
                self._sendall(frame)
        except OSError as e:
            raise self._break(f"cannot write to the channel: {e}") from None

    def _receive(self) -> dict[str, Any]:
        try:
            msg = self._reader.read()
        except EOFError:
            raise self._break("the other side closed the channel") from None
        except WireError as e:
            raise self._break(f"protocol error: {e}") from None
        except OSError as e:
            raise self._break(f"channel error: {e}") from None
        if "sync" in msg or "drop" in msg:
            try:
                self._apply_sync(msg)
            except WireError as e:
                raise self._break(f"protocol error: {e}") from None
        return msg

    def _break(self, why: str) -> ChannelClosed:
        self.broken = self.broken or why
        with contextlib.suppress(OSError):
            self.sock.close()
        with self._cond:
            self._cond.notify_all()
        return ChannelClosed(why)


#: ``sys.getrefcount`` of a shared container's copy that only the table holds (the table's
#: entry and the call's argument).
_HELD_ONLY_HERE = 2


def _assign(target: Any, value: Any) -> None:
    """Make ``target`` hold ``value``'s contents, in place (a shared container's update)."""
    if type(target) is not type(value):
        raise WireError(f"a shared {type(target).__name__} cannot become a {type(value).__name__}")
    if type(target) is dict:
        if target != value or list(target) != list(value):
            target.clear()
            target.update(value)
    elif type(target) is set:
        target.clear()
        target.update(value)
    else:
        target[:] = value
