"""The ``command`` kind: the task's own test command, run as it stands (any language, any test
runner that writes JUnit XML). Nothing is sealed, nothing runs warm, the candidate's code runs in
the test process; audit reports such a task as trusting its candidate."""

from __future__ import annotations

from typing import ClassVar

from verify_cli.kinds.base import Kind
from verify_cli.kinds.registry import register_kind


class CommandKind(Kind):
    name: ClassVar[str] = "command"
    summary: ClassVar[str] = "the task's own test command, writing JUnit XML (unsealed, in-process)"
    legacy_framework: ClassVar[str | None] = "other"


register_kind(CommandKind())
