"""Key-value store CLI. See prompt.md for the specification."""

import argparse
import json
import os
import sys
import tempfile


class KvError(Exception):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def _parser():
    p = argparse.ArgumentParser(prog="kv.py")
    p.add_argument("--db")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("set")
    s.add_argument("key")
    s.add_argument("value")
    sub.add_parser("get").add_argument("key")
    sub.add_parser("del").add_argument("key")
    lst = sub.add_parser("list")
    lst.add_argument("--prefix", default="")
    inc = sub.add_parser("incr")
    inc.add_argument("key")
    inc.add_argument("n", nargs="?", type=int, default=1)
    return p


def _check_key(key):
    if not key or "=" in key or any(ch.isspace() for ch in key):
        raise KvError(f"invalid key: {key}", 2)


def _load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def _save(path, data):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kv-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _run(args, out):
    db = args.db or os.environ.get("KV_DB")
    if not db:
        raise KvError("no database (use --db or KV_DB)", 2)
    if args.command != "list":
        _check_key(args.key)
    data = _load(db)
    if args.command == "set":
        data[args.key] = args.value
        _save(db, data)
    elif args.command == "get":
        if args.key not in data:
            raise KvError(f"no such key: {args.key}", 1)
        out.write(data[args.key] + "\n")
    elif args.command == "del":
        if args.key not in data:
            raise KvError(f"no such key: {args.key}", 1)
        del data[args.key]
        _save(db, data)
    elif args.command == "list":
        for key in sorted(data):
            if key.startswith(args.prefix):
                out.write(f"{key}={data[key]}\n")
    elif args.command == "incr":
        try:
            current = int(data.get(args.key, "0").strip())
        except ValueError:
            raise KvError(f"not an integer: {args.key}", 1) from None
        data[args.key] = str(current + args.n)
        _save(db, data)
        out.write(data[args.key] + "\n")


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        _run(args, sys.stdout)
    except KvError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
