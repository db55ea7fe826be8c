"""The trusted side's importer of two-process grading: candidate modules become stand-ins.

Stdlib only. A module named among the candidate's becomes the stand-in ``make_module`` gives
(``verify_standin.CandidateModule``); any other module that would load from the work folder
(outside the test folders) is refused, so the test process never imports candidate code.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
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
