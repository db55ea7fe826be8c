"""Try to create a file outside the work folder: system folders, /tmp, the host's checkout.

Extra host folders come colon-separated in ``VERIFY_CONFORMANCE_HOST_PATHS``. Prints one JSON
object: the paths it managed to create.
"""

import json
import os
import sys


def main() -> None:
    token = sys.argv[1] if len(sys.argv) > 1 else "x"
    folders = ["/etc", "/usr", "/usr/local/bin", "/tmp", "/var/tmp", "/root", "/home", "/"]
    folders += [p for p in os.environ.get("VERIFY_CONFORMANCE_HOST_PATHS", "").split(":") if p]
    created = []
    for folder in folders:
        path = os.path.join(folder, f"verify-cli-escape-{token}")
        try:
            with open(path, "w") as fh:
                fh.write("escaped\n")
            created.append(path)
        except OSError:
            pass
    print(json.dumps({"created": created}), flush=True)


if __name__ == "__main__":
    main()
