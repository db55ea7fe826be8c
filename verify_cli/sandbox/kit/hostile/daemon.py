"""Daemonise a grandchild (double fork, setsid, fds closed) and exit 0 at once.

The grandchild sleeps, then tries to leave a marker in every writable place it knows, and sleeps
on; the conformance check looks for it among the host's processes after the run.
"""

import os
import sys
import time


def grandchild() -> None:
    os.closerange(0, 1024)
    time.sleep(1.0)
    for var in ("VERIFY_WORKDIR", "VERIFY_RESULTS_DIR", "TMPDIR"):
        folder = os.environ.get(var)
        if folder:
            try:
                with open(os.path.join(folder, "daemon-was-here"), "w") as fh:
                    fh.write("survived\n")
            except OSError:
                pass
    time.sleep(120)


def main() -> None:
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            grandchild()
        os._exit(0)
    os.waitpid(pid, 0)
    print("daemonised", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
