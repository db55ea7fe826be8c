"""Try to read the host user's secrets and the project checkout.

``VERIFY_CONFORMANCE_HOST_HOME`` names the host's home folder and ``VERIFY_CONFORMANCE_READ_PATHS``
(colon-separated) files worth reading. Prints what it could read: secrets' text, other files'
SHA-256 digests.
"""

import hashlib
import json
import os


def main() -> None:
    found: dict[str, str] = {}
    home = os.environ.get("VERIFY_CONFORMANCE_HOST_HOME", "")
    candidates = [p for p in os.environ.get("VERIFY_CONFORMANCE_READ_PATHS", "").split(":") if p]
    for folder in (home, "/root", "/home"):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        candidates += [os.path.join(folder, n) for n in names if n.startswith(".verify-cli")]
    for path in candidates:
        try:
            with open(path, "rb") as fh:
                data = fh.read(1 << 16)
        except OSError:
            continue
        found[path] = hashlib.sha256(data).hexdigest() + " " + data[:200].decode("utf-8", "replace")
    print(json.dumps({"read": found}), flush=True)


if __name__ == "__main__":
    main()
