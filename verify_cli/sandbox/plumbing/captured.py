"""A bounded capture of one output stream (a head and a tail), shared by runs and sessions."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CapturedOutput:
    """A stream kept as a bounded head and tail; ``total_bytes`` counts everything written."""

    head: bytes = b""
    tail: bytes = b""
    total_bytes: int = 0
    truncated: bool = False

    @property
    def text(self) -> str:
        body = self.head.decode("utf-8", "replace")
        if self.truncated:
            omitted = self.total_bytes - len(self.head) - len(self.tail)
            body += f"\n[... {omitted} bytes omitted ...]\n"
        return body + self.tail.decode("utf-8", "replace")

    def to_dict(self) -> dict[str, object]:
        return {"text": self.text, "total_bytes": self.total_bytes, "truncated": self.truncated}


__all__ = ["CapturedOutput"]
