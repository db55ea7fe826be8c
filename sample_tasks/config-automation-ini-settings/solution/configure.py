"""Enforce managed settings in an INI file. See prompt.md."""

import os
import sys

DEFAULTS = {
    "server": {"host": "127.0.0.1", "port": "8080"},
    "logging": {"level": "info"},
}


def _header(line):
    s = line.strip()
    if s.startswith("[") and s.endswith("]"):
        return s[1:-1].strip()
    return None


def _key(line):
    s = line.strip()
    if not s or s[0] in "#;" or "=" not in s:
        return None
    return s.partition("=")[0].strip()


def _value(line):
    return line.partition("=")[2].strip()


def _sections(lines):
    """{name: (header_index, end_index)} for the first occurrence of each section."""
    headers = [(i, _header(line)) for i, line in enumerate(lines) if _header(line) is not None]
    found = {}
    for k, (start, name) in enumerate(headers):
        end = headers[k + 1][0] if k + 1 < len(headers) else len(lines)
        found.setdefault(name, (start, end))
    return found


def _apply_section(lines, name, values):
    """Apply one managed section to ``lines`` in place."""
    bounds = _sections(lines).get(name)
    if bounds is None:
        if lines and lines[-1] != "":
            lines.append("")
        lines.append(f"[{name}]")
        lines.extend(f"{k} = {v}" for k, v in values.items())
        return
    start, end = bounds
    positions = {}
    last_key = start
    for i in range(start + 1, end):
        key = _key(lines[i])
        if key is not None:
            positions.setdefault(key, i)
            last_key = i
    missing = []
    for key, value in values.items():
        i = positions.get(key)
        if i is None:
            missing.append(f"{key} = {value}")
        elif _value(lines[i]) != value:
            lines[i] = f"{key} = {value}"
    lines[last_key + 1:last_key + 1] = missing


def ensure_settings(path, managed):
    try:
        with open(path, encoding="utf-8", newline="") as f:
            original = f.read()
        exists = True
    except FileNotFoundError:
        original, exists = "", False
    lines = original.split("\n")
    if lines[-1] == "":
        lines.pop()  # the text after the final newline
    for name, values in managed.items():
        _apply_section(lines, name, values)
    text = "\n".join(lines) + "\n" if lines else ""
    if exists and text == original:
        return False
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)
    return True


def main(argv):
    changed = ensure_settings(argv[1], DEFAULTS)
    print("changed" if changed else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
