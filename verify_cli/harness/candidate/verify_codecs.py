"""By-value codecs beyond the protocol's core values (docs/wire-protocol.md, "Codecs").

Imported by both sides' peers. ``collections`` types always; numpy arrays and scalars and pandas
DataFrames and Series register by name, so neither library is imported unless a value of its
types crosses (or arrives: the decoder imports it then). Decoders build only the library's own
containers from plain data (a vetted dtype, bytes, plain values); an object dtype crosses as a
list of plain values. A task adds its own with ``verify_wire.register_codec`` in a module named
by ``VERIFY_WIRE_CODECS`` (a comma-separated list of importable modules, imported on both sides).
"""

from __future__ import annotations

import base64
import collections
import importlib
import os
import re
from collections.abc import Callable
from typing import Any

from verify_wire import WireError, register_codec

Part = Callable[[Any], Any]
_DTYPE = re.compile(r"\A[<>|=]?[biufcMmUS]\d*(?:\[\w+\])?\Z")
_NAMED_DTYPE = re.compile(r"\A[A-Za-z][\w\[\], :/]{0,60}\Z")
#: Default factories of a defaultdict that cross by name (any other crosses as None).
_FACTORIES: dict[str, Any] = {"list": list, "int": int, "set": set, "dict": dict, "str": str,
                              "float": float, "tuple": tuple, "bool": bool}


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise WireError(what)


def _pairs(body: Any, part: Part, tag: str) -> list[tuple[Any, Any]]:
    _need(type(body) is list and all(type(p) is list and len(p) == 2 for p in body), f"{tag} needs pairs")
    return [(part(k), part(v)) for k, v in body]


# -- collections --------------------------------------------------------------------------------

register_codec(collections.Counter, "$counter",
               lambda v, part: {"$counter": [[part(k), part(x)] for k, x in v.items()]},
               lambda body, part: collections.Counter(dict(_pairs(body, part, "$counter"))))
register_codec(collections.OrderedDict, "$ordereddict",
               lambda v, part: {"$ordereddict": [[part(k), part(x)] for k, x in v.items()]},
               lambda body, part: collections.OrderedDict(_pairs(body, part, "$ordereddict")))


def _enc_defaultdict(v: Any, part: Part) -> Any:
    factory = v.default_factory
    name = factory.__name__ if factory in _FACTORIES.values() else None
    return {"$defaultdict": [name, [[part(k), part(x)] for k, x in v.items()]]}


def _dec_defaultdict(body: Any, part: Part) -> Any:
    _need(type(body) is list and len(body) == 2 and (body[0] is None or body[0] in _FACTORIES),
          "$defaultdict needs [factory name, pairs]")
    return collections.defaultdict(_FACTORIES.get(body[0]), _pairs(body[1], part, "$defaultdict"))


register_codec(collections.defaultdict, "$defaultdict", _enc_defaultdict, _dec_defaultdict)


def _dec_deque(body: Any, part: Part) -> Any:
    _need(type(body) is list and len(body) == 2 and type(body[0]) is list
          and (body[1] is None or type(body[1]) is int), "$deque needs [items, maxlen]")
    return collections.deque([part(x) for x in body[0]], body[1])


register_codec(collections.deque, "$deque",
               lambda v, part: {"$deque": [[part(x) for x in v], v.maxlen]}, _dec_deque)


# -- numpy ----------------------------------------------------------------------------------------

def _np() -> Any:
    try:
        return importlib.import_module("numpy")
    except ImportError:
        raise WireError("a numpy value arrived but numpy is not installed on this side") from None


def _enc_ndarray(v: Any, part: Part) -> Any:
    kind = v.dtype.kind
    if kind == "O":
        return {"$ndarray": {"object": [part(x) for x in v.ravel().tolist()], "shape": list(v.shape)}}
    if kind not in "biufcMmUS" or v.dtype.fields is not None:
        return None
    data = v.tobytes(order="C")
    return {"$ndarray": {"dtype": v.dtype.str, "shape": list(v.shape),
                         "data": base64.b64encode(data).decode("ascii")}}


def _dec_ndarray(body: Any, part: Part) -> Any:
    np = _np()
    _need(type(body) is dict and type(body.get("shape")) is list
          and all(type(n) is int and n >= 0 for n in body["shape"]), "$ndarray needs a shape")
    shape = tuple(body["shape"])
    if "object" in body:
        _need(type(body["object"]) is list, "$ndarray object needs a list")
        out = np.empty(len(body["object"]), dtype=object)
        for i, x in enumerate(body["object"]):
            out[i] = part(x)
        return out.reshape(shape)
    dtype = body.get("dtype")
    _need(type(dtype) is str and _DTYPE.match(dtype) is not None, "$ndarray needs a plain dtype")
    raw = base64.b64decode(str(body.get("data", "")).encode("ascii"), validate=True)
    return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()


def _enc_npscalar(v: Any, part: Part) -> Any:
    if v.dtype.kind not in "biufcMm":
        return None
    return {"$npscalar": [v.dtype.str, base64.b64encode(v.tobytes()).decode("ascii")]}


def _dec_npscalar(body: Any, part: Part) -> Any:
    np = _np()
    _need(type(body) is list and len(body) == 2 and type(body[0]) is str
          and _DTYPE.match(body[0]) is not None, "$npscalar needs [dtype, data]")
    raw = base64.b64decode(str(body[1]).encode("ascii"), validate=True)
    return np.frombuffer(raw, dtype=np.dtype(body[0]))[0]


register_codec("numpy.ndarray", "$ndarray", _enc_ndarray, _dec_ndarray)
for _name in ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "longdouble", "complex64", "complex128",
              "datetime64", "timedelta64"):
    register_codec(f"numpy.{_name}", "$npscalar", _enc_npscalar, _dec_npscalar)


# -- pandas ---------------------------------------------------------------------------------------

def _pd() -> Any:
    try:
        return importlib.import_module("pandas")
    except ImportError:
        raise WireError("a pandas value arrived but pandas is not installed on this side") from None


def _enc_column(values: Any, part: Part) -> Any:
    dtype = values.dtype
    if getattr(dtype, "kind", "O") in "biufcMm" and type(dtype).__module__.startswith("numpy"):
        return {"array": _enc_ndarray(values.to_numpy(), part)["$ndarray"]}
    return {"values": [part(x) for x in values.tolist()], "dtype": str(dtype)}


def _dec_column(body: Any, part: Part) -> Any:
    _need(type(body) is dict, "a pandas column needs an object")
    if "array" in body:
        return _dec_ndarray(body["array"], part)
    _need(type(body.get("values")) is list and type(body.get("dtype")) is str
          and _NAMED_DTYPE.match(body["dtype"]) is not None, "a pandas column needs values and a dtype")
    return [part(x) for x in body["values"]], body["dtype"]


def _series(pd: Any, column: Any, index: Any, name: Any) -> Any:
    if isinstance(column, tuple):
        values, dtype = column
        return pd.Series(values, index=index, name=name, dtype=None if dtype == "object" else dtype)
    return pd.Series(column, index=index, name=name)


def _enc_index(index: Any, part: Part) -> Any:
    if type(index).__name__ == "RangeIndex" and index.name is None:
        return {"range": [index.start, index.stop, index.step]}
    return {"column": _enc_column(index, part), "name": part(index.name)}


def _dec_index(pd: Any, body: Any, part: Part) -> Any:
    _need(type(body) is dict, "a pandas index needs an object")
    if "range" in body:
        _need(type(body["range"]) is list and len(body["range"]) == 3
              and all(type(x) is int for x in body["range"]), "bad range index")
        return pd.RangeIndex(*body["range"])
    column = _dec_column(body.get("column"), part)
    if isinstance(column, tuple):
        values, dtype = column
        return pd.Index(values, dtype=None if dtype == "object" else dtype, name=part(body.get("name")))
    return pd.Index(column, name=part(body.get("name")))


def _enc_dataframe(v: Any, part: Part) -> Any:
    if not v.columns.is_unique or type(v.columns).__name__ == "MultiIndex":
        return None
    return {"$dataframe": {"index": _enc_index(v.index, part), "columns": _enc_index(v.columns, part),
                           "data": [_enc_column(v.iloc[:, i], part) for i in range(v.shape[1])]}}


def _dec_dataframe(body: Any, part: Part) -> Any:
    pd = _pd()
    _need(type(body) is dict and type(body.get("data")) is list, "$dataframe needs columns")
    index = _dec_index(pd, body.get("index"), part)
    columns = _dec_index(pd, body.get("columns"), part)
    _need(len(columns) == len(body["data"]), "$dataframe columns and data differ in length")
    frame = pd.DataFrame({i: _series(pd, _dec_column(c, part), index, None)
                          for i, c in enumerate(body["data"])}, index=index)
    frame.columns = columns
    return frame


def _enc_series(v: Any, part: Part) -> Any:
    if type(v.index).__name__ == "MultiIndex":
        return None
    return {"$series": {"index": _enc_index(v.index, part), "name": part(v.name),
                        "data": _enc_column(v, part)}}


def _dec_series(body: Any, part: Part) -> Any:
    pd = _pd()
    _need(type(body) is dict, "$series needs an object")
    return _series(pd, _dec_column(body.get("data"), part), _dec_index(pd, body.get("index"), part),
                   part(body.get("name")))


def _enc_timestamp(v: Any, part: Part) -> Any:
    return {"$timestamp": [v.isoformat(), str(v.tz) if v.tz is not None else None]}


def _dec_timestamp(body: Any, part: Part) -> Any:
    _need(type(body) is list and len(body) == 2 and type(body[0]) is str
          and (body[1] is None or type(body[1]) is str), "$timestamp needs [iso, tz]")
    return _pd().Timestamp(body[0])


register_codec("pandas.DataFrame", "$dataframe", _enc_dataframe, _dec_dataframe)
register_codec("pandas.Series", "$series", _enc_series, _dec_series)
register_codec("pandas.Timestamp", "$timestamp", _enc_timestamp, _dec_timestamp)


def load_task_codecs() -> None:
    """Import the task's codec modules named in ``VERIFY_WIRE_CODECS`` (installed modules: the
    trusted side never imports from the work folder)."""
    for name in filter(None, (n.strip() for n in os.environ.get("VERIFY_WIRE_CODECS", "").split(","))):
        importlib.import_module(name)
