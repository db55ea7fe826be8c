"""Equivalent mutants: changes proven to leave a module's behaviour as it was.

A Python mutant is equivalent when it compiles to the same code as the original once positions
are set aside: the same instructions, constants (compared with their types, so ``1`` is not
``1.0`` and ``0.0`` is not ``-0.0``), names, arguments, flags and exception tables, recursively
through every nested function and class body. Line and column tables and the first line number
are ignored, since the mutation itself may move code between lines. Instructions are compared by
the values they refer to, not by their indices into the constant and name tables. The compiler's own folding
and dead-code removal is what makes such mutants appear (``if False:`` bodies, a change after
``return``, a constant expression that folds to the same value).

Nothing is executed. For other languages no mutant is proven equivalent.
"""

from __future__ import annotations

import dis
import inspect
import math
import warnings
from functools import lru_cache
from types import CodeType
from typing import Any

#: The parts of a code object that decide how it is called and what it binds.
_CODE_FIELDS = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_freevars",
                "co_cellvars", "co_name", "co_qualname", "co_exceptiontable")


def _normal_constant(value: Any) -> Any:
    """A hashable, comparable form that keeps each constant's type (and float sign and NaN)."""
    if isinstance(value, CodeType):
        return ("code", _normal_known(value))
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value.hex())
    if isinstance(value, complex):
        return ("complex", _normal_constant(value.real), _normal_constant(value.imag))
    if isinstance(value, tuple):
        return ("tuple", tuple(_normal_constant(v) for v in value))
    if isinstance(value, frozenset):
        return ("frozenset", tuple(sorted((_normal_constant(v) for v in value), key=repr)))
    return (type(value).__name__, value)


def normal_code(code: CodeType) -> tuple[Any, ...]:
    """What ``code`` does, without where it sits in its file: its signature and flags, and each
    instruction with the value it refers to (so constants and names that only dead code used,
    which the compiler leaves in its tables, do not count)."""
    arguments = code.co_argcount + code.co_kwonlyargcount
    arguments += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    instructions = tuple(
        (ins.opname, _normal_constant(ins.argval) if ins.opcode in dis.hasconst else ins.argval)
        for ins in dis.get_instructions(code))
    fields = tuple(getattr(code, name, None) for name in _CODE_FIELDS)
    return (*fields, code.co_varnames[:arguments], instructions)


#: Normal forms by position-free code object. A mutant leaves every function but the one it
#: changed as the original compiled it, so only that one is disassembled again (a module of
#: hundreds of functions cost 0.3 s a mutant before).
_KNOWN: dict[CodeType, tuple[Any, ...]] = {}
_KNOWN_MAX = 50_000


def _positionless(code: CodeType) -> CodeType:
    """``code`` and its nested code without line numbers or positions: equal exactly when
    everything but where they sit in the file is equal."""
    consts = tuple(_positionless(c) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_firstlineno=1, co_linetable=b"", co_consts=consts)


def _normal_known(code: CodeType) -> tuple[Any, ...]:
    known = _KNOWN.get(code)
    if known is None:
        if len(_KNOWN) >= _KNOWN_MAX:
            _KNOWN.clear()
        known = _KNOWN[code] = normal_code(code)
    return known


def _compiled(path: str, source: str) -> CodeType | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _positionless(compile(source, path, "exec", dont_inherit=True))
        except (SyntaxError, ValueError):
            return None


@lru_cache(maxsize=64)
def _normal_module(path: str, source: str) -> tuple[CodeType, tuple[Any, ...]] | None:
    code = _compiled(path, source)
    return None if code is None else (code, _normal_known(code))


def python_equivalent(path: str, original: str, mutated: str) -> bool:
    """Whether ``mutated`` compiles to the same code as ``original`` (positions aside)."""
    before = _normal_module(path, original)
    after = _compiled(path, mutated)
    if before is None or after is None:
        return False
    return after == before[0] or _normal_known(after) == before[1]
