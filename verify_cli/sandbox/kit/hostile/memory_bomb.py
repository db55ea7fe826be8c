"""Allocate and touch ten times the memory limit (``VERIFY_CONFORMANCE_MEMORY_MB``)."""

import os

CHUNK = 16 * 1024 * 1024


def main() -> None:
    target = 10 * int(os.environ.get("VERIFY_CONFORMANCE_MEMORY_MB", "256")) * 1024 * 1024
    blocks = []
    held = 0
    while held < target:
        blocks.append(b"\x01" * CHUNK)  # bytes filled with data: every page is touched
        held += CHUNK
    print(f"ESCAPED: held {held} bytes", flush=True)


if __name__ == "__main__":
    main()
