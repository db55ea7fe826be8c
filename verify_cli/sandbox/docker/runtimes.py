"""Whether an image holds the runtime a run names, asked once per image and runtime.

A Python task on an image without Python (``verify-cli/node:20``, say) cannot start its test
command: the shell answers ``python: not found`` with status 127, which read as the command's
own failure would grade a correct reference 0. The runtime is the image's business, never the
candidate's, so a run whose image lacks it is a ``setup_error`` naming the image (unscored),
before any of the run happens. The answer is kept per image digest and runtime.
"""

from __future__ import annotations

import contextlib
import shlex
import threading
import uuid
from typing import Any

from verify_cli.sandbox.docker.containers import LABEL, OWNER_LABEL, RUN_ID_LABEL, hardened_container, owner
from verify_cli.sandbox.docker.errors import DAEMON_ERRORS

#: The programs each runtime's runs start (one of them must be on the image's PATH): the test
#: commands' and the two-process candidate servers' interpreters.
RUNTIME_PROGRAMS: dict[str, tuple[str, ...]] = {"python": ("python", "python3"), "node": ("node",)}
#: The check's exit status where none of the programs is there.
MISSING_STATUS = 3
CHECK_TIMEOUT_S = 60


def check_script(programs: tuple[str, ...]) -> str:
    found = " || ".join(f"command -v {shlex.quote(p)} >/dev/null 2>&1" for p in programs)
    return f"{found} || exit {MISSING_STATUS}"


def missing_message(image: str, runtime: str) -> str:
    programs = " or ".join(repr(p) for p in RUNTIME_PROGRAMS[runtime])
    return (f"image {image!r} has no {runtime} runtime (none of {programs} is on its PATH): the "
            f"run could not start its command; name an image that has it, or build the task's "
            f"environment")


class RuntimeCheck:
    """Asks the daemon, once per (image digest, runtime), whether an image has a runtime."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self._known: dict[tuple[str, str], bool] = {}
        self._lock = threading.Lock()

    def missing(self, image: str, digest: str, runtime: str | None) -> str | None:
        """Why a run of ``runtime`` cannot start in ``image`` (whose content digest is
        ``digest``), or None when it can or cannot be told (a daemon failure is the run's to
        meet and report)."""
        programs = RUNTIME_PROGRAMS.get(runtime or "")
        if not programs or runtime is None:
            return None
        key = (digest, runtime)
        with self._lock:
            known = self._known.get(key)
        if known is None:
            known = self._ask(digest, programs)
            if known is None:
                return None
            with self._lock:
                self._known[key] = known
        return None if known else missing_message(image, runtime)

    def _ask(self, digest: str, programs: tuple[str, ...]) -> bool | None:
        labels = {LABEL: "1", RUN_ID_LABEL: uuid.uuid4().hex, OWNER_LABEL: owner()}
        try:
            cid = self._api.create_container(**hardened_container(
                self._api, digest, ["/bin/sh", "-c", check_script(programs)], memory_mb=64, pids_limit=16,
                tmpfs={}, ulimits=[], labels=labels, working_dir="/"))["Id"]
        except DAEMON_ERRORS:
            return None
        try:
            self._api.start(cid)
            status = self._api.wait(cid, timeout=CHECK_TIMEOUT_S)
            code = int(status.get("StatusCode", -1)) if isinstance(status, dict) else -1
        except DAEMON_ERRORS:
            return None
        finally:
            with contextlib.suppress(*DAEMON_ERRORS):
                self._api.remove_container(cid, force=True)
        if code == 0:
            return True
        if code == MISSING_STATUS:
            return False
        return None


__all__ = ["MISSING_STATUS", "RUNTIME_PROGRAMS", "RuntimeCheck", "check_script", "missing_message"]
