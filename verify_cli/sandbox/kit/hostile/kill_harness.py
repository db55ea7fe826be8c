"""Try to kill the harness, whose pid comes in ``VERIFY_HARNESS_PID``: SIGTERM, SIGKILL, killpg."""

import json
import os
import signal


def main() -> None:
    pid = int(os.environ.get("VERIFY_HARNESS_PID", "0"))
    outcome = {}
    attempts = [("SIGTERM", lambda: os.kill(pid, signal.SIGTERM)),
                ("SIGKILL", lambda: os.kill(pid, signal.SIGKILL)),
                ("killpg", lambda: os.killpg(pid, signal.SIGKILL))]
    for name, attempt in attempts:
        if pid <= 1:
            outcome[name] = "no pid"
            continue
        try:
            attempt()
            outcome[name] = "sent"
        except OSError as e:
            outcome[name] = type(e).__name__
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
