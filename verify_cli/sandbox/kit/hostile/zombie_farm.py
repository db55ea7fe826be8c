"""Leave children unreaped (zombies) and orphans that keep running, then exit 0."""

import os
import time

ZOMBIES = 16
ORPHANS = 12


def main() -> None:
    for _ in range(ZOMBIES):
        if os.fork() == 0:
            os._exit(0)
    for _ in range(ORPHANS):
        if os.fork() == 0:
            if os.fork() == 0:
                time.sleep(120)
            os._exit(0)
    time.sleep(0.5)
    print("farm planted", flush=True)


if __name__ == "__main__":
    main()
