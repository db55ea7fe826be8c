"""Look for secrets in the environment: its own and every process's it can see in /proc."""

import json
import os

WORDS = ("SECRET", "TOKEN", "KEY", "PASSWORD")


def interesting(name: str) -> bool:
    return any(w in name.upper() for w in WORDS)


def main() -> None:
    found = {k: v for k, v in os.environ.items() if interesting(k)}
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                entries = fh.read().split(b"\0")
        except OSError:
            continue
        for entry in entries:
            name, _, value = entry.decode("utf-8", "replace").partition("=")
            if interesting(name):
                found[f"{pid}:{name}"] = value
    print(json.dumps({"found": found}), flush=True)


if __name__ == "__main__":
    main()
