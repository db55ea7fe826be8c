"""Start a trusted harness module isolated from the run's folders (verify_cli/sandbox/plumbing/trusted_launch.py).

``python -s verify_launch.py MODULE ARGS...`` runs ``MODULE`` as ``python -m MODULE ARGS...``
would, except that ``sys.path`` starts with this folder (the read-only harness), never the
working folder (the shared work folder: ``-m`` would put it first), and ``-s`` leaves out the
user site in ``$HOME``. A module the candidate plants in the work folder is never imported.
(Started ``-I`` it works the same, the harness folder put first here.)
"""

import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -I verify_launch.py MODULE [ARGS...]\n")
        sys.exit(2)
    sys.path[:] = [HERE] + [p for p in sys.path if p not in ("", ".", os.getcwd(), HERE)]
    module = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
