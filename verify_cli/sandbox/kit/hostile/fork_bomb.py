"""Fork as fast as possible, retry failed forks, never exit (a wall-clock timeout must end it).

Bounded for the host's sake: every process makes at most two children and the tree is at most
seven levels deep (255 processes), far above the 64-process limit the suite sets.
"""

import os
import time

FANOUT = 2
DEPTH = 7


def main() -> None:
    depth = 0
    made = 0
    while True:
        if depth < DEPTH and made < FANOUT:
            try:
                pid = os.fork()
            except OSError:
                time.sleep(0.001)
                continue
            if pid == 0:
                depth += 1
                made = 0
                continue
            made += 1
            continue
        time.sleep(0.05)


if __name__ == "__main__":
    main()
