"""Key-value store CLI. See prompt.md for the specification."""

import sys


def main(argv=None):
    raise NotImplementedError


if __name__ == "__main__":
    sys.exit(main())
