"""The wire codec of two-process grading (docs/wire-protocol.md): frames and by-value values.

Stdlib only: the trusted test process and the candidate server both import this file, each in
its own sandbox. The decoder can build nothing but plain data (None, bool, int, float, str,
bytes, bytearray, list, tuple, dict, set, frozenset), the documented standard-library value
types, and whatever the caller's ``handle`` function makes of a handle descriptor; anything
else in a frame is a :class:`WireError`, never "repaired".

Encoding checks exact types (``type(v) is str``), so a subclass of a plain type (a ``str``
whose ``__eq__`` is always true) never crosses as the plain type: it becomes a handle.
"""

from __future__ import annotations

import base64
import datetime as _dt
import decimal
import fractions
import json
import json.encoder
import json.scanner
import pathlib
import re
import socket
import struct
import uuid
from collections.abc import Callable
from typing import Any

MAX_FRAME = 64 * 1024 * 1024
MAX_DEPTH = 100
#: Most values (nodes) in one frame.
MAX_NODES = 2_000_000
SAFE_INT = 2 ** 53

_HEADER = struct.Struct(">I")
_FLOAT = re.compile(r"\A(?:nan|inf|-inf|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)\Z")
_BIGINT = re.compile(r"\A-?\d{1,4300}\Z")

HandleFor = Callable[[Any], dict[str, Any]]
MakeHandle = Callable[[dict[str, Any]], Any]
#: ``share(container, encode_body)``: the ``$mut`` form of a list, dict, set or bytearray that
#: crosses as a shared container, or None for a plain copy (``encode_body()`` is its plain form).
Share = Callable[[Any, Callable[[], Any]], Any]
#: ``make_shared(id, owner, value_or_MISSING, decode)``: the object a ``$mut`` value stands for.
MakeShared = Callable[[int, str, Any, Callable[[Any], Any]], Any]
MISSING: Any = object()


class WireError(Exception):
    """A frame or value outside the protocol (too big, too deep, malformed, an unknown tag)."""


# --------------------------------------------------------------------------------------------
# Frames


#: One encoder and one decoder for every frame: ``json.dumps``/``json.loads`` with options
#: build a new one per call, which cost more than the rest of a small frame's work.
_JSON_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_JSON_ENCODE: Callable[[Any], str] = _JSON_ENCODER.encode


def _not_json(value: Any) -> Any:
    raise WireError(f"{type(value).__name__} in a frame (values go through encode first)")


def _c_encoder() -> Callable[[Any], str] | None:
    """The C encoder behind ``_JSON_ENCODER``, made once: ``encode`` makes one per call. It
    keeps no state between calls (no cycle markers: a frame is built by ``encode``, which
    turns a container that holds itself into a handle; json's recursion limit stops the rest)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    # encode_basestring is the C function when there is one (ensure_ascii=False's fast path).
    encoder = make(None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False,
                   False)

    def encode(message: Any) -> str:
        return "".join(encoder(message, 0))

    return encode


_JSON_ENCODE = _c_encoder() or _JSON_ENCODE


def _refuse_constant(name: str) -> Any:
    raise WireError(f"bare JSON constant {name} (floats travel as $float)")


def _refuse_float(text: str) -> Any:
    raise WireError(f"bare JSON number {text} (floats travel as $float)")


_JSON_DECODER = json.JSONDecoder(parse_float=_refuse_float, parse_constant=_refuse_constant)
_JSON_DECODE = _JSON_DECODER.decode
_JSON_SCAN = json.scanner.make_scanner(_JSON_DECODER)  # type: ignore[arg-type]


def _json_object(text: str) -> Any:
    """``_JSON_DECODE(text)``, through the scanner alone when the frame starts with its value
    and ends with it (what every side sends); anything else takes the full decoder, which
    accepts or refuses it exactly as ``json.loads`` would."""
    try:
        value, end = _JSON_SCAN(text, 0)
    except StopIteration:
        return _JSON_DECODE(text)
    return value if end == len(text) else _JSON_DECODE(text)


def pack_frame(message: dict[str, Any]) -> bytes:
    body = _JSON_ENCODE(message).encode()
    if len(body) > MAX_FRAME:
        raise WireError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME}-byte limit")
    return _HEADER.pack(len(body)) + body


def parse_frame_body(body: bytes | bytearray) -> dict[str, Any]:
    try:
        msg = _json_object(body.decode("utf-8"))
    except WireError:
        raise
    except (ValueError, RecursionError) as e:
        raise WireError(f"malformed frame: {e}") from None
    if type(msg) is not dict:
        raise WireError("a frame must hold one JSON object")
    return msg


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frame(sock: socket.socket) -> dict[str, Any]:
    """The next message on ``sock``; EOFError when the peer closed, WireError when it broke
    the protocol. Reads exactly one frame's bytes (for a connection that carries one request
    and its answer); a connection that carries many reads through a :class:`FrameReader`."""
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    if size > MAX_FRAME:
        raise WireError(f"frame of {size} bytes exceeds the {MAX_FRAME}-byte limit")
    return parse_frame_body(_recv_exact(sock, size))


def write_frame(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(pack_frame(message))  # header and body in one write


class FrameReader:
    """Frames off one connection, through a buffer: one ``recv_into`` per frame when a frame
    fits in it (header and body together), instead of one ``recv`` for each."""

    CHUNK = 1 << 16

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._pending = bytearray()
        self._chunk = bytearray(self.CHUNK)
        self._view = memoryview(self._chunk)

    def buffered(self) -> bool:
        """True when bytes of a next frame have already been read off the socket."""
        return bool(self._pending)

    def read(self) -> dict[str, Any]:
        """The next message; EOFError when the peer closed, WireError when it broke the protocol."""
        pending = self._pending
        while True:
            have = len(pending)
            if have >= 4:
                size = int.from_bytes(pending[:4], "big")
                if size > MAX_FRAME:
                    raise WireError(f"frame of {size} bytes exceeds the {MAX_FRAME}-byte limit")
                end = 4 + size
                if have >= end:
                    body = pending[4:end]
                    del pending[:end]
                    return parse_frame_body(body)
                if end - have > self.CHUNK:  # a big frame: read the rest straight into place
                    start = have
                    pending.extend(bytes(end - have))
                    view = memoryview(pending)
                    try:
                        while start < end:
                            n = self.sock.recv_into(view[start:end])
                            if not n:
                                raise EOFError("the other side closed the channel")
                            start += n
                    finally:
                        view.release()
                    continue
            n = self.sock.recv_into(self._view)
            if not n:
                raise EOFError("the other side closed the channel")
            pending += self._view[:n]


# --------------------------------------------------------------------------------------------
# Values

_STD_ENCODERS: dict[type, Callable[[Any], dict[str, Any] | None]] = {
    _dt.datetime: lambda v: ({"$datetime": v.isoformat()}
                             if v.tzinfo is None or type(v.tzinfo) is _dt.timezone else None),
    _dt.date: lambda v: {"$date": v.isoformat()},
    _dt.time: lambda v: {"$time": v.isoformat()} if v.tzinfo is None else None,
    _dt.timedelta: lambda v: {"$timedelta": [v.days, v.seconds, v.microseconds]},
    decimal.Decimal: lambda v: {"$decimal": str(v)},
    fractions.Fraction: lambda v: {"$fraction": f"{v.numerator}/{v.denominator}"},
    pathlib.PosixPath: lambda v: {"$path": str(v)},
    pathlib.PurePosixPath: lambda v: {"$path": str(v)},
    complex: lambda v: {"$complex": [_float(v.real), _float(v.imag)]},
    uuid.UUID: lambda v: {"$uuid": str(v)},
    range: lambda v: {"$range": [_int(v.start), _int(v.stop), _int(v.step)]},
}


def _float(v: float) -> dict[str, str]:
    return {"$float": repr(v)}


def _int(v: int) -> Any:
    return v if -SAFE_INT < v < SAFE_INT else {"$int": str(v)}


class Encoder:
    """Turns a value into JSON-ready data. Values that are not plain go to ``handle_for`` (which
    returns a handle descriptor), or raise WireError when there is none."""

    def __init__(self, handle_for: HandleFor | None = None, share: Share | None = None) -> None:
        self.handle_for = handle_for
        self.share = share
        self._nodes = 0

    def encode(self, value: Any) -> Any:
        self._nodes = 0
        return self._enc(value, 0, set())

    def _other(self, value: Any, why: str) -> Any:
        if self.handle_for is None:
            raise WireError(f"{why}: {type(value).__name__} cannot cross by value")
        return self.handle_for(value)

    def _enc(self, v: Any, depth: int, path: set[int]) -> Any:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise WireError(f"value has more than {MAX_NODES} parts")
        if depth > MAX_DEPTH:
            raise WireError(f"value nested deeper than {MAX_DEPTH}")
        t = type(v)
        if t is str or t is bool or v is None:
            return v
        if t is int:
            return v if -SAFE_INT < v < SAFE_INT else {"$int": str(v)}
        if t is float:
            return {"$float": repr(v)}
        if t is list or t is tuple or t is dict or t is set or t is frozenset:
            if id(v) in path:
                return self._other(v, "a container that holds itself")
            path.add(id(v))
            try:
                d = depth + 1
                if self.share is not None and t is not tuple and t is not frozenset:
                    shared = self.share(v, lambda: self._plain_container(v, t, d, path))
                    if shared is not None:
                        return shared
                return self._plain_container(v, t, d, path)
            finally:
                path.discard(id(v))
        if t is bytes:
            return {"$bytes": base64.b64encode(v).decode("ascii")}
        if t is bytearray:
            body = {"$bytearray": base64.b64encode(bytes(v)).decode("ascii")}
            if self.share is not None:
                shared = self.share(v, lambda: body)
                if shared is not None:
                    return shared
            return body
        std = _STD_ENCODERS.get(t)
        if std is not None:
            out = std(v)
            if out is not None:
                return out
        if t is slice:
            return {"$slice": [self._enc(v.start, depth + 1, path), self._enc(v.stop, depth + 1, path),
                               self._enc(v.step, depth + 1, path)]}
        codec = CODECS.encoder_for(t)
        if codec is not None:
            out = codec(v, lambda x: self._enc(x, depth + 1, path))
            if out is not None:
                return out
        return self._other(v, "not plain data")

    def _plain_container(self, v: Any, t: type, d: int, path: set[int]) -> Any:
        if t is dict:
            return {"$dict": [[self._enc(k, d, path), self._enc(x, d, path)] for k, x in v.items()]}
        items = self._items(v, d, path)
        if t is list:
            return items
        return {"$tuple" if t is tuple else "$set" if t is set else "$frozenset": items}

    def _items(self, values: Any, depth: int, path: set[int]) -> list[Any]:
        """The items of a list, tuple or set; strings, bools, None and small ints inline (the
        common case), anything else through ``_enc``."""
        out: list[Any] = []
        append = out.append
        if depth > MAX_DEPTH and values:
            raise WireError(f"value nested deeper than {MAX_DEPTH}")
        for x in values:
            t = type(x)
            if t is str or t is bool or x is None or (t is int and -SAFE_INT < x < SAFE_INT):
                self._nodes += 1
                append(x)
            else:
                append(self._enc(x, depth, path))
        if self._nodes > MAX_NODES:
            raise WireError(f"value has more than {MAX_NODES} parts")
        return out


def encode(value: Any, handle_for: HandleFor | None = None) -> Any:
    return Encoder(handle_for).encode(value)


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise WireError(what)


def _text(v: Any, tag: str) -> str:
    _need(type(v) is str, f"{tag} needs a string")
    return v


def _tz_time(text: str) -> _dt.time:
    return _dt.time.fromisoformat(text)


_STD_DECODERS: dict[str, Callable[[Any], Any]] = {
    "$datetime": lambda v: _dt.datetime.fromisoformat(_text(v, "$datetime")),
    "$date": lambda v: _dt.date.fromisoformat(_text(v, "$date")),
    "$time": lambda v: _tz_time(_text(v, "$time")),
    "$decimal": lambda v: decimal.Decimal(_text(v, "$decimal")),
    "$path": lambda v: pathlib.Path(_text(v, "$path")),
    "$uuid": lambda v: uuid.UUID(_text(v, "$uuid")),
}


class Decoder:
    """Builds plain data back from JSON data; handle descriptors go to ``make_handle``."""

    def __init__(self, make_handle: MakeHandle | None = None,
                 make_shared: MakeShared | None = None) -> None:
        self.make_handle = make_handle
        self.make_shared = make_shared
        self._nodes = 0

    def decode(self, data: Any) -> Any:
        self._nodes = 0
        try:
            return self._dec(data, 0)
        except WireError:
            raise
        except (ValueError, TypeError, ArithmeticError, OverflowError) as e:
            raise WireError(f"malformed value: {e}") from None

    def _dec(self, v: Any, depth: int) -> Any:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise WireError(f"value has more than {MAX_NODES} parts")
        if depth > MAX_DEPTH:
            raise WireError(f"value nested deeper than {MAX_DEPTH}")
        t = type(v)
        if t is str or t is bool or v is None:
            return v
        if t is int:
            if -SAFE_INT < v < SAFE_INT:
                return v
            raise WireError("an integer this large travels as $int")
        if t is list:
            return self._items(v, depth + 1)
        _need(t is dict, f"unexpected JSON {t.__name__}")
        if "$handle" in v:
            _need(self.make_handle is not None, "a handle where only plain data may cross")
            return self.make_handle(self._descriptor(v, depth))  # type: ignore[misc]
        if "$mut" in v:
            hid, owner = v.get("$mut"), v.get("owner")
            _need(self.make_shared is not None, "a shared container where only plain data may cross")
            _need(type(hid) is int and 0 < hid < SAFE_INT and owner in ("candidate", "trusted")
                  and set(v) <= {"$mut", "owner", "value"}, "bad $mut")
            d = depth + 1
            return self.make_shared(hid, owner, v.get("value", MISSING),  # type: ignore[misc]
                                    lambda x: self._dec(x, d))
        _need(len(v) == 1, f"unknown value object with keys {sorted(v)[:5]}")
        (tag, body), = v.items()
        if tag == "$float":
            if type(body) is not str or _FLOAT.match(body) is None:
                raise WireError(f"bad $float {str(body)[:40]!r}")
            return float(body)
        d = depth + 1
        if tag in ("$tuple", "$set", "$frozenset"):
            _need(type(body) is list, f"{tag} needs a list")
            items = self._items(body, d)
            return tuple(items) if tag == "$tuple" else set(items) if tag == "$set" else frozenset(items)
        if tag == "$dict":
            _need(type(body) is list, "$dict needs a list of pairs")
            out: dict[Any, Any] = {}
            for pair in body:
                _need(type(pair) is list and len(pair) == 2, "$dict needs [key, value] pairs")
                out[self._dec(pair[0], d)] = self._dec(pair[1], d)
            return out
        if tag == "$int":
            text = _text(body, tag)
            _need(bool(_BIGINT.match(text)), "bad $int")
            return int(text)
        if tag in ("$bytes", "$bytearray"):
            raw = base64.b64decode(_text(body, tag).encode("ascii"), validate=True)
            return raw if tag == "$bytes" else bytearray(raw)
        if tag == "$timedelta":
            _need(type(body) is list and len(body) == 3 and all(type(x) is int for x in body),
                  "$timedelta needs [days, seconds, microseconds]")
            return _dt.timedelta(days=body[0], seconds=body[1], microseconds=body[2])
        if tag == "$fraction":
            num, _, den = _text(body, tag).partition("/")
            _need(bool(_BIGINT.match(num)) and bool(_BIGINT.match(den)), "bad $fraction")
            return fractions.Fraction(int(num), int(den))
        if tag == "$complex":
            _need(type(body) is list and len(body) == 2, "$complex needs [re, im]")
            re_, im = (self._dec(x, d) for x in body)
            _need(type(re_) is float and type(im) is float, "$complex parts are $float")
            return complex(re_, im)
        if tag == "$range" or tag == "$slice":
            _need(type(body) is list and len(body) == 3, f"{tag} needs [start, stop, step]")
            parts = [self._dec(x, d) for x in body]
            if tag == "$range":
                _need(all(type(x) is int for x in parts), "$range needs integers")
                return range(*parts)
            _need(all(x is None or type(x) in (int, float) for x in parts), "$slice needs numbers")
            return slice(*parts)
        std = _STD_DECODERS.get(tag)
        if std is None:
            codec = CODECS.decoder_for(tag)
            _need(codec is not None, f"unknown tag {tag[:40]!r}")
            return codec(body, lambda x: self._dec(x, d))  # type: ignore[misc]
        return std(body)

    def _items(self, data: list[Any], depth: int) -> list[Any]:
        """The items of a JSON array at ``depth``; strings, bools, null and safe integers
        inline (the common case), anything else through ``_dec`` (which refuses what is not
        a documented value)."""
        if depth > MAX_DEPTH and data:
            raise WireError(f"value nested deeper than {MAX_DEPTH}")
        out: list[Any] = []
        append = out.append
        for x in data:
            t = type(x)
            if t is str or t is bool or x is None or (t is int and -SAFE_INT < x < SAFE_INT):
                self._nodes += 1
                append(x)
            else:
                append(self._dec(x, depth))
        if self._nodes > MAX_NODES:
            raise WireError(f"value has more than {MAX_NODES} parts")
        return out

    def _descriptor(self, v: dict[str, Any], depth: int) -> dict[str, Any]:
        hid = v.get("$handle")
        if len(v) == 2:  # a reference to an object of the receiver's: {"$handle": id, "owner": side}
            owner = v.get("owner")
            if type(hid) is int and 0 < hid < SAFE_INT and (owner == "candidate" or owner == "trusted"):
                return {"$handle": hid, "owner": owner, "kind": "", "type": "", "module": "",
                        "eq": "identity"}
        _need(type(hid) is int and 0 < hid < SAFE_INT, "bad $handle id")
        out: dict[str, Any] = {"$handle": hid}
        for key in ("owner", "kind", "type", "module"):
            val = v.get(key, "")
            _need(type(val) is str and len(val) <= 1000, f"bad handle {key}")
            out[key] = val
        _need(out["owner"] in ("candidate", "trusted"), "bad handle owner")
        fields = v.get("fields")
        if fields is not None:
            _need(type(fields) is dict, "handle fields must be an object")
            out["fields"] = {str(k): self._dec(x, depth + 1) for k, x in fields.items()}
        for key in ("bases", "methods", "names"):
            names = v.get(key)
            if names is not None:
                _need(type(names) is list and len(names) <= 100_000
                      and all(type(b) is str and len(b) <= 1000 for b in names), f"bad handle {key}")
                out[key] = list(names)
        eq = v.get("eq", "identity")
        _need(eq in ("identity", "fields"), "bad handle eq")
        out["eq"] = eq
        if v.get("async") is True:
            out["async"] = True
        if "plain" in v:
            plain = self._dec(v["plain"], depth + 1)
            _need(type(plain) in (int, str, float), "handle plain must be an int, str or float")
            out["plain"] = plain
        cls = v.get("class")
        if cls is not None:
            _need(type(cls) is dict and "$handle" in cls, "handle class must be a handle")
            out["class"] = self._dec(cls, depth + 1)
        fields_list = v.get("dataclass")
        if fields_list is not None:
            _need(type(fields_list) is list and len(fields_list) <= 10_000 and all(
                type(f) is list and len(f) == 2 and type(f[0]) is str and type(f[1]) is bool
                for f in fields_list), "bad handle dataclass")
            out["dataclass"] = fields_list
            out["frozen"] = v.get("frozen") is True
        classes = v.get("classes")
        if classes is not None:
            _need(type(classes) is list and len(classes) <= 1000 and all(
                type(c) is list and len(c) == 3 and type(c[0]) is str and type(c[1]) is str
                and type(c[2]) is list and all(type(b) is str for b in c[2]) for c in classes),
                "bad handle classes")
            out["classes"] = classes
        return out


# --------------------------------------------------------------------------------------------
# The codec registry: more value types by value (collections, numpy, pandas; a task's own)

EncodeCodec = Callable[[Any, Callable[[Any], Any]], Any]
DecodeCodec = Callable[[Any, Callable[[Any], Any]], Any]


class CodecRegistry:
    """Value types beyond the built-in ones, each under a tag ``$name``. An encoder gets the
    value and the encoder of its parts, and returns ``{tag: body}`` (or None: not by value);
    a decoder gets the body and the decoder of its parts and may build only plain data or
    objects of the type it owns. Types register by class, or by ``module.QualName`` (``lazy``)
    so that a module nobody imported is never imported to encode."""

    def __init__(self) -> None:
        self._encoders: dict[type, EncodeCodec] = {}
        self._lazy: dict[str, EncodeCodec] = {}
        self._decoders: dict[str, DecodeCodec] = {}

    def register(self, cls: type | str, tag: str, encode: EncodeCodec, decode: DecodeCodec) -> None:
        if not tag.startswith("$") or tag in _RESERVED_TAGS:
            raise ValueError(f"codec tag {tag!r} must start with $ and not be a protocol tag")
        if isinstance(cls, str):
            self._lazy[cls] = encode
        else:
            self._encoders[cls] = encode
        self._decoders[tag] = decode

    def encoder_for(self, t: type) -> EncodeCodec | None:
        found = self._encoders.get(t)
        if found is None and self._lazy:
            found = self._lazy.get(f"{t.__module__}.{t.__qualname__}")
        return found

    def decoder_for(self, tag: str) -> DecodeCodec | None:
        return self._decoders.get(tag)


_RESERVED_TAGS = {"$float", "$int", "$bytes", "$bytearray", "$tuple", "$dict", "$set", "$frozenset",
                  "$handle", "$mut", "$range", "$slice", *_STD_DECODERS, "$timedelta", "$fraction",
                  "$complex"}
CODECS = CodecRegistry()


def register_codec(cls: type | str, tag: str, encode: EncodeCodec, decode: DecodeCodec) -> None:
    """Cross values of ``cls`` by value under ``tag`` (both sides must register it)."""
    CODECS.register(cls, tag, encode, decode)


def decode(data: Any, make_handle: MakeHandle | None = None) -> Any:
    return Decoder(make_handle).decode(data)


# --------------------------------------------------------------------------------------------
# Exceptions

#: Built-in exception classes an error may arrive as (the nearest one in ``bases`` wins).
BUILTIN_EXCEPTIONS: dict[str, type[BaseException]] = {
    name: obj for name, obj in vars(__import__("builtins")).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
}


def error_payload(exc: BaseException, encode_arg: Callable[[Any], Any] | None = None) -> dict[str, Any]:
    """The ``error`` object of a response for ``exc`` (raised on this side): its type, the
    built-in bases, the classes outside ``builtins`` with their direct bases (``classes``), its
    arguments and its instance attributes (``fields``), by value where they are plain."""
    enc = encode_arg or encode
    bases = [c.__name__ for c in type(exc).__mro__
             if c.__module__ == "builtins" and issubclass(c, BaseException)]
    args: list[Any] = []
    for a in getattr(exc, "args", ()):
        try:
            args.append(enc(a))
        except Exception:
            args.append(_safe_str(a))
    try:
        message = str(exc)
    except Exception:
        message = f"<{type(exc).__name__} whose str() failed>"
    try:
        import traceback

        trace = "".join(traceback.format_exception(exc)[-20:])[-20_000:]
    except Exception:
        trace = ""
    out = {"type": type(exc).__name__, "module": getattr(type(exc), "__module__", ""),
           "bases": bases, "message": message[:100_000], "args": args, "traceback": trace}
    classes = []
    for klass in type(exc).__mro__:
        if klass.__module__ == "builtins":
            continue
        classes.append([str(klass.__module__), str(klass.__qualname__),
                        [b.__name__ if b.__module__ == "builtins" else f"{b.__module__}.{b.__qualname__}"
                         for b in klass.__bases__]])
    if classes:
        out["classes"] = classes
    fields: dict[str, Any] = {}
    state = getattr(exc, "__dict__", None)
    if isinstance(state, dict):
        for key, value in list(state.items())[:100]:
            if type(key) is not str or key.startswith("_"):
                continue
            try:
                fields[key] = enc(value)
            except Exception:
                continue
    if fields:
        out["fields"] = fields
    ref = getattr(exc, "_verify_ref", None)
    if type(ref) is dict:
        out["value"] = ref
    return out


def _safe_str(value: Any) -> str:
    try:
        return str(value)[:10_000]
    except Exception:
        return f"<{type(value).__name__}>"
