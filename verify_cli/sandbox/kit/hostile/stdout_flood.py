"""Write 1 GB to stdout as fast as possible."""

import sys

LINE = b"flood " + b"x" * 1017 + b"\n"  # 1 KiB a line
BLOCK = LINE * 1024  # 1 MiB


def main() -> None:
    out = sys.stdout.buffer
    for _ in range(1024):
        out.write(BLOCK)
    out.flush()


if __name__ == "__main__":
    main()
