"""A candidate's removal and mode markers stay what they are across a process boundary (Ray,
the executors' pickles, a session's Snapshot) and compare as the bytes they hold."""

from __future__ import annotations

import copy
import pickle

from verify_cli.sandbox.sessions.base import Snapshot
from verify_cli.tasks.file_states import REMOVED_FILE, ModedFile, is_removed, stated_executable


def test_markers_survive_pickling_and_copying() -> None:
    files = Snapshot({"old.py": REMOVED_FILE, "run.sh": ModedFile(b"#!/bin/sh\n", executable=True),
                      "plain.py": b"x = 1\n"})
    for crossed in (pickle.loads(pickle.dumps(files)), copy.deepcopy(files), dict(files)):
        assert is_removed(crossed["old.py"]) and not is_removed(crossed["plain.py"])
        assert stated_executable(crossed["run.sh"]) is True and stated_executable(crossed["plain.py"]) is None
        assert crossed["run.sh"] == b"#!/bin/sh\n"


def test_an_empty_file_is_not_a_removal() -> None:
    assert REMOVED_FILE == b"" and not is_removed(b"") and not is_removed(ModedFile(b"", executable=False))
    assert repr(REMOVED_FILE) == "REMOVED_FILE"
