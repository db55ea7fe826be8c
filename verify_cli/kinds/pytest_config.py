"""pytest's configuration comes from the pristine task only, never from a candidate's files.

pytest reads its settings (``addopts``, ``python_files``, ``testpaths``, ``pythonpath``, ...)
from the first of ``pytest.ini``, ``.pytest.ini``, ``pyproject.toml``, ``tox.ini`` and
``setup.cfg`` it finds. Where a task's editable globs admit one of those (``**/*``, common in
repository tasks), a candidate could write ``addopts = --ignore-glob=*hidden*`` into it and the
hidden tests would never be collected. So every pytest run is told which file to read
(``PYTEST_ADDOPTS=-c .verify-pytest.ini``): :data:`TRUSTED_INI`, written by the grader into the
work folder after the candidate's files, holding the pytest section of the configuration the
pristine task (its starter with the reference solution over it) would use, or nothing. The
candidate's ``pyproject.toml`` still configures its own package; it no longer configures pytest.
"""

from __future__ import annotations

import configparser
import functools
import tomllib
from pathlib import Path
from typing import Any

from verify_cli.tasks.model import Task

#: The trusted configuration's name in the work folder (a name pytest never looks for itself).
TRUSTED_INI = ".verify-pytest.ini"
#: The option every pytest run of a task gets (``PYTEST_ADDOPTS``): read that file and no other.
#: Relative to the run's working folder, the work folder (the rootdir is then the work folder).
TRUSTED_ADDOPTS = f"-c {TRUSTED_INI}"

#: pytest's own order of precedence within one folder: (file, section, format).
_CANDIDATES = (("pytest.ini", "pytest", "ini"), (".pytest.ini", "pytest", "ini"),
               ("pyproject.toml", "tool.pytest.ini_options", "toml"), ("tox.ini", "pytest", "ini"),
               ("setup.cfg", "tool:pytest", "ini"))


def _ini_value(value: Any) -> str:
    """A TOML value as pytest would read the same setting from an ini file."""
    if isinstance(value, list):
        return "\n" + "\n".join(str(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _section(data: bytes, section: str, fmt: str) -> dict[str, str] | None:
    """The settings of ``section`` in a config file, or None where the file has no such section
    (pytest then goes on to the next file; ``pytest.ini`` counts even without one)."""
    text = data.decode("utf-8", "replace")
    if fmt == "toml":
        try:
            doc: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return None
        for part in section.split("."):
            doc = doc.get(part) if isinstance(doc, dict) else None
        return {str(k): _ini_value(v) for k, v in doc.items()} if isinstance(doc, dict) else None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    if not parser.has_section(section):
        return None
    return dict(parser.items(section))


def pristine_settings(files: dict[str, Path]) -> dict[str, str]:
    """The pytest settings of the root configuration among ``files`` (work-folder path to
    file), found as pytest finds it; empty where there is none."""
    for name, section, fmt in _CANDIDATES:
        path = files.get(name)
        if path is None:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        settings = _section(data, section, fmt)
        if settings is not None:
            return settings
        if name in ("pytest.ini", ".pytest.ini"):  # pytest takes these even without [pytest]
            return {}
    return {}


def render_ini(settings: dict[str, str]) -> str:
    """``settings`` as a ``[pytest]`` ini file."""
    lines = ["# Written by verify-cli: the pristine task's pytest configuration (the only one read).",
             "[pytest]"]
    for key, value in settings.items():
        body = value.replace("\n", "\n    ")
        lines.append(f"{key} = {body}")
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=256)
def _trusted_ini_cached(files: tuple[tuple[str, str, int, int], ...]) -> bytes:
    return render_ini(pristine_settings({rel: Path(p) for rel, p, _, _ in files})).encode()


def trusted_ini(task: Task) -> bytes:
    """The content of :data:`TRUSTED_INI` for ``task``: its pristine configuration's pytest
    section (the starter's files with the reference solution's over them)."""
    files = {**task.starter_files(), **task.solution_files()}
    names = {name for name, _, _ in _CANDIDATES}
    chosen: list[tuple[str, str, int, int]] = []
    for rel, path in sorted(files.items()):
        if rel in names:
            try:
                st = path.stat()
            except OSError:
                continue
            chosen.append((rel, str(path), st.st_mtime_ns, st.st_size))  # edited: read again
    return _trusted_ini_cached(tuple(chosen))


__all__ = ["TRUSTED_ADDOPTS", "TRUSTED_INI", "pristine_settings", "render_ini", "trusted_ini"]
