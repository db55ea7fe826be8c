"""Enforce managed settings in an INI file. See prompt.md."""

import configparser
import sys

DEFAULTS = {
    "server": {"host": "127.0.0.1", "port": "8080"},
    "logging": {"level": "info"},
}


def ensure_settings(path, managed):
    parser = configparser.ConfigParser()
    parser.read(path)
    for section, values in managed.items():
        if not parser.has_section(section):
            parser.add_section(section)
        for key, value in values.items():
            parser.set(section, key, value)
    with open(path, "w") as f:
        parser.write(f)
    return True


def main(argv):
    changed = ensure_settings(argv[1], DEFAULTS)
    print("changed" if changed else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
