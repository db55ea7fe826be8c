"""Try to reach the network: an unroutable TEST-NET address and a loopback server on the host.

Only ``192.0.2.1`` (RFC 5737 TEST-NET-1, never routed) is tried outside this machine. The host's
loopback server listens on ``VERIFY_CONFORMANCE_LOOPBACK_PORT``; on connecting the program sends
its token. Prints one JSON object: for each target ``connected``, ``timeout`` or an errno name.
"""

import errno
import json
import os
import socket
import sys


def attempt(host: str, port: int, payload: bytes) -> str:
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(payload)
            return "connected"
    except TimeoutError:
        return "timeout"
    except OSError as e:
        return errno.errorcode.get(e.errno or 0, str(e))


def main() -> None:
    token = (sys.argv[1] if len(sys.argv) > 1 else "").encode()
    report = {"testnet": attempt("192.0.2.1", 80, b"")}
    port = os.environ.get("VERIFY_CONFORMANCE_LOOPBACK_PORT")
    if port:
        report["loopback"] = attempt("127.0.0.1", int(port), token + b"\n")
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
