"""Close stdin, stdout and stderr, then keep running: the harness must still time it out."""

import os
import time


def main() -> None:
    for fd in (0, 1, 2):
        os.close(fd)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
