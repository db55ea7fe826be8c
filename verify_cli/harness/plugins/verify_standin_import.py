"""The trusted side's importer of two-process grading: candidate modules become stand-ins.

Stdlib only. A module named among the candidate's becomes the stand-in ``make_module`` gives
(``verify_standin.CandidateModule``); any other module that would load from the work folder
(outside the test folders) is refused, so the test process never imports candidate code.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import types
from collections.abc import Callable
from typing import Any


class _StandInLoader(importlib.abc.Loader):
    def __init__(self, make_module: Callable[[str], Any]) -> None:
        self.make_module = make_module

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module: types.ModuleType = self.make_module(spec.name)
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module._verify_load()


class StandInFinder(importlib.abc.MetaPathFinder):
    """Candidate modules become stand-ins; nothing else may load from the work folder."""

    def __init__(self, modules: list[str], workdir: str, allowed: list[str],
                 make_module: Callable[[str], Any]) -> None:
        self.modules = set(modules)
        self.packages = {m.rsplit(".", i)[0] for m in modules for i in range(1, m.count(".") + 1)}
        self.workdir = os.path.realpath(workdir)
        self.allowed = [os.path.join(self.workdir, a) + os.sep for a in allowed]
        self._loader = _StandInLoader(make_module)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname in self.modules or fullname in self.packages:
            return importlib.util.spec_from_loader(fullname, self._loader,
                                                   is_package=fullname in self.packages)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = getattr(spec, "origin", None) or ""
        locations = list(getattr(spec, "submodule_search_locations", None) or [])
        for where in [origin, *locations]:
            real = os.path.realpath(where) if where else ""
            if real.startswith(self.workdir + os.sep) and not any(real.startswith(a) for a in self.allowed):
                raise ImportError(f"{fullname} would load from the work folder ({real}), which only "
                                  "the candidate process may run; list it among the editable files "
                                  "or move it under tests/")
        return None


def place_finder(module_class: type) -> StandInFinder | None:
    """Put a run's stand-in importer first on ``sys.meta_path`` (replacing an earlier run's), when
    the run grades two-process (``$VERIFY_CHANNEL``): the candidate's modules
    (``$VERIFY_CANDIDATE_MODULES``) import as ``module_class`` stand-ins, and the work folder
    leaves ``sys.path``. The process is made not dumpable too."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, StandInFinder)]
    if not os.environ.get("VERIFY_CHANNEL"):
        return None
    try:
        modules = [str(m) for m in json.loads(os.environ.get("VERIFY_CANDIDATE_MODULES", "[]"))]
    except ValueError:
        modules = []
    workdir = os.environ.get("VERIFY_WORKDIR") or os.getcwd()
    dirs = [d for d in os.environ.get("VERIFY_TEST_DIRS", "tests,hidden_tests").split(",") if d]
    real = os.path.realpath(workdir)
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != real]
    finder = StandInFinder(modules, workdir, dirs, module_class)
    sys.meta_path.insert(0, finder)
    importlib.invalidate_caches()
    _no_core_dumps()
    return finder


def _no_core_dumps() -> None:
    """Not dumpable: a process of the same user cannot read this one's memory (the seal key)
    through /proc, should a test start one here."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except Exception:
        pass
