"""Fill every writable place the sandbox names (work folder, temp folder, results folder).

Ignores SIGXFSZ and starts a new file on EFBIG, so a per-file size limit alone does not stop it.
Exits 1 once every place is full (ENOSPC or out of quota). Bounded for the host's sake: it stops
after writing ``32 x VERIFY_CONFORMANCE_FILE_BYTES`` and exits 0, printing ESCAPED.
"""

import errno
import json
import os
import signal
import sys

BLOCK = b"\xa5" * (1024 * 1024)


def main() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    cap = 32 * int(os.environ.get("VERIFY_CONFORMANCE_FILE_BYTES", str(16 << 20)))
    places = [os.getcwd()]
    for var in ("TMPDIR", "VERIFY_RESULTS_DIR"):
        if os.environ.get(var) and os.environ[var] not in places:
            places.append(os.environ[var])
    written = dict.fromkeys(places, 0)
    open_places = list(places)
    total = 0
    serial = 0
    while open_places and total < cap:
        for place in list(open_places):
            serial += 1
            path = os.path.join(place, f"fill-{serial}.bin")
            try:
                with open(path, "wb", buffering=0) as fh:
                    while total < cap:
                        fh.write(BLOCK)
                        written[place] += len(BLOCK)
                        total += len(BLOCK)
            except OSError as e:
                if e.errno != errno.EFBIG:  # full (ENOSPC, quota) or closed to writing
                    open_places.remove(place)
    print(json.dumps({"written": written, "total": total}), flush=True)
    if total >= cap:
        print("ESCAPED: wrote past the cap", flush=True)
        sys.exit(0)
    sys.exit(1)


if __name__ == "__main__":
    main()
