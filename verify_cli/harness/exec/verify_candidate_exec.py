"""The candidate-exec runner: run a program in the candidate's sandbox, from a test.

``python verify_candidate_exec.py --channel SOCKET -- PROGRAM ARGS...`` (the command prefix in
``VERIFY_CANDIDATE_EXEC``; started ``python -I -S``, so neither the working folder nor a user site
in ``$HOME`` reaches its ``sys.path``) sends one ``exec`` request (docs/wire-protocol.md) with this
process's environment, working folder and standard input, writes the program's output to its
own streams and exits with the program's status (128 + N when a signal N ended it).
"""

from __future__ import annotations

import os
import socket
import sys
import time

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "candidate"))

from verify_wire import decode, encode, read_frame, write_frame

#: How long to wait for the candidate's server to listen (a cold start takes well under a second;
#: ``$VERIFY_EXEC_CONNECT_SECONDS`` overrides it).
CONNECT_SECONDS = 10.0
#: Mirrored in verify_cli/sandbox/plumbing/trusted_launch.py.
TRUSTED_HOME_ENV = "VERIFY_TRUSTED_HOME"


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--channel" or argv[2] != "--":
        print("usage: verify_candidate_exec.py --channel SOCKET -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    channel, program = argv[1], argv[3:]
    stdin = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # A cold candidate's server may still be starting (its socket not bound yet) when a test that
    # never imported the candidate runs its first program: wait for it to appear (a server binds
    # it under another name and renames it once listening); a refused connection (bound, not yet
    # listening, or a server that died) is retried for a second at most.
    deadline = time.monotonic() + float(os.environ.get("VERIFY_EXEC_CONNECT_SECONDS") or CONNECT_SECONDS)
    refused_until = min(deadline, time.monotonic() + 1.0)
    while True:
        try:
            sock.connect(channel)
            break
        except OSError as e:
            refused_late = isinstance(e, ConnectionRefusedError) and time.monotonic() > refused_until
            if time.monotonic() > deadline or refused_late or not isinstance(e, (FileNotFoundError,
                                                                                 ConnectionRefusedError)):
                print(f"verify_candidate_exec: cannot reach the candidate sandbox: {e}", file=sys.stderr)
                return 125
            time.sleep(0.005)
    env = dict(os.environ)
    if env.get("HOME") and env.get("HOME") == env.get(TRUSTED_HOME_ENV):
        # The trusted side's home is not in the candidate's sandbox: the program gets its own.
        env["HOME"] = env.get("VERIFY_WORKDIR") or os.getcwd()
    env.pop(TRUSTED_HOME_ENV, None)
    write_frame(sock, {"id": 1, "op": "exec", "argv": encode(program), "env": encode(env),
                       "cwd": encode(os.getcwd()), "stdin": encode(stdin), "timeout": None})
    try:
        reply = read_frame(sock)
    except EOFError:
        print("verify_candidate_exec: the candidate sandbox closed the channel", file=sys.stderr)
        return 125
    if "error" in reply:
        err = reply["error"]
        print(f"verify_candidate_exec: {err.get('type')}: {err.get('message')}", file=sys.stderr)
        return 126 if err.get("type") in ("FileNotFoundError", "PermissionError") else 125
    result = decode(reply.get("ok"))
    sys.stdout.buffer.write(result["stdout"])
    sys.stdout.flush()
    sys.stderr.buffer.write(result["stderr"])
    sys.stderr.flush()
    code = int(result["returncode"])
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
