"""vLLM's own log, kept in a file, and the one line that says why its engine died.

vLLM logs from every process it starts (the engine core, its workers) to the terminal, and when
the engine dies the main process sees only ``EngineDeadError: ... See stack trace (above)``: the
cause is in a worker's log. The ``vllm`` backend points vLLM's logging at a file (through
``VLLM_LOGGING_CONFIG_PATH``, which the spawned processes inherit), so that library code prints
nothing, and reads the cause back from that file when the engine dies.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

#: Where vLLM reads its logging configuration (its environment variable).
LOGGING_CONFIG_ENV = "VLLM_LOGGING_CONFIG_PATH"

_TRACEBACK = "Traceback (most recent call last):"
#: ``RuntimeError: message`` (an exception's last line), after any log prefix.
_EXCEPTION_LINE = re.compile(r"(?:^|[\]\s])((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit)): (.+)$")
_GENERIC = ("EngineDeadError", "please check the stack trace above", "See stack trace (above)")


def logging_config(log_file: Path) -> dict[str, object]:
    """A ``logging.config.dictConfig`` for vLLM that writes every record to ``log_file``."""
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {"vllm": {"format": "%(levelname)s %(asctime)s %(process)d [%(filename)s:%(lineno)d] "
                                          "%(message)s"}},
        "handlers": {"vllm_file": {"class": "logging.FileHandler", "filename": str(log_file),
                                   "formatter": "vllm", "level": "INFO", "encoding": "utf-8"}},
        "loggers": {"vllm": {"handlers": ["vllm_file"], "level": "INFO", "propagate": False}},
    }


def log_to_file(folder: Path | None = None) -> Path | None:
    """Point vLLM's logging at a new file (in ``folder``, else the temp folder) and return it;
    None when the user configures vLLM's logging already (their choice stands). Call it before
    the engine starts: its processes read the setting when they start."""
    if os.environ.get(LOGGING_CONFIG_ENV) or os.environ.get("VLLM_CONFIGURE_LOGGING") == "0":
        return None
    folder = Path(folder or tempfile.gettempdir())
    folder.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="verify-cli-vllm-", suffix=".log", dir=folder)
    os.close(fd)
    log_file = Path(name)
    config_file = log_file.with_suffix(".logging.json")
    config_file.write_text(json.dumps(logging_config(log_file)), encoding="utf-8")
    os.environ[LOGGING_CONFIG_ENV] = str(config_file)
    return log_file


def engine_cause(log_text: str) -> str | None:
    """The first exception a traceback in ``log_text`` ends with (``RuntimeError: CPU Generator
    does not use offset``): the root cause, not the engine's later "see the stack trace above".
    None when the log holds no traceback."""
    seen_traceback = False
    fallback: str | None = None
    for line in log_text.splitlines():
        if _TRACEBACK in line:
            seen_traceback = True
            continue
        if not seen_traceback:
            continue
        m = _EXCEPTION_LINE.search(line.rstrip())
        if m is None:
            continue
        found = f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2).strip()}"
        if not any(g in found for g in _GENERIC):
            return found
        fallback = fallback or found
    return fallback


def read_engine_cause(log_file: Path | None) -> str | None:
    """:func:`engine_cause` of a log file (None when it cannot be read)."""
    if log_file is None:
        return None
    try:
        return engine_cause(log_file.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


__all__ = ["LOGGING_CONFIG_ENV", "engine_cause", "log_to_file", "logging_config", "read_engine_cause"]
