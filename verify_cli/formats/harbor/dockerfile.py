"""What a Harbor task's Dockerfile says about grading: the working directory the agent works in,
and what of the tests or the solution it bakes into the image (where the agent can read it)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)\s+(.*)$")


def logical_lines(text: str) -> list[tuple[int, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped: (line, text)."""
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not buf:
            start = number
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        out.append((start, buf + line))
        buf = ""
    if buf:
        out.append((start, buf))
    return out


def dockerfile_workdir(text: str, default: str) -> str:
    """The last ``WORKDIR`` of the Dockerfile (absolute), else ``default``."""
    workdir = default
    for _, line in logical_lines(text):
        m = _INSTRUCTION.match(line)
        if m and m.group(1).upper() == "WORKDIR":
            value = m.group(2).strip().strip('"')
            workdir = value if value.startswith("/") else f"{workdir.rstrip('/')}/{value}"
    return workdir


@dataclass(frozen=True)
class Leak:
    """A Dockerfile line that puts the task's tests or solution into the image."""

    line: int
    instruction: str
    what: str  # "tests" or "solution"

    def describe(self, dockerfile: str) -> str:
        return (f"{dockerfile}:{self.line}: {self.instruction.strip()[:120]!r} puts the task's {self.what} into "
                f"the image, where the agent can read them")


def _sources(args: str) -> list[str]:
    if args.lstrip().startswith("["):
        import json

        try:
            words = [str(w) for w in json.loads(args)]
        except ValueError:
            words = args.split()
    else:
        try:
            words = shlex.split(args)
        except ValueError:
            words = args.split()
    words = [w for w in words if not w.startswith("--")]
    return words[:-1]


def baked_in(dockerfile: Path, task_root: Path) -> list[Leak]:
    """``COPY``/``ADD`` lines whose sources name the task's ``tests`` or ``solution`` (as folders
    of the build context, or one of their files by name), and ``RUN`` lines that fetch them."""
    text = dockerfile.read_text(encoding="utf-8", errors="replace")
    names: dict[str, str] = {}
    for what in ("tests", "solution"):
        folder = task_root / what
        if folder.is_dir():
            for p in folder.rglob("*"):
                if p.is_file() and p.name not in ("__init__.py",):
                    names[p.name] = what
    leaks: list[Leak] = []
    for number, line in logical_lines(text):
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        op = m.group(1).upper()
        if op in ("COPY", "ADD"):
            for src in _sources(m.group(2)):
                parts = [p for p in src.replace("\\", "/").split("/") if p and p != "."]
                hit = next((p for p in parts if p in ("tests", "solution")), None)
                if hit is None and parts and parts[-1] in names:
                    hit = names[parts[-1]]
                if hit is not None:
                    leaks.append(Leak(number, line, hit))
                    break
        elif op == "RUN" and re.search(r"(/solution/|/tests/)solve\.sh|solve\.sh", m.group(2)):
            leaks.append(Leak(number, line, "solution"))
    return leaks + _copies_of(dockerfile, task_root, text, {n for leak in leaks for n in (leak.line,)})


def _copies_of(dockerfile: Path, task_root: Path, text: str, seen: set[int]) -> list[Leak]:
    """COPY/ADD lines whose sources take in a file of the build context that is byte for byte a
    file of ``tests/`` or ``solution/`` under another name (``COPY . /app`` over a copy)."""
    context = dockerfile.parent
    pristine: dict[bytes, str] = {}
    oracle = task_root / "solution.sh"  # Terminal-Bench 1's, at the top of its build context
    if oracle.is_file() and oracle.stat().st_size > 0:
        pristine[oracle.read_bytes()] = "solution"
    for what in ("tests", "solution"):
        folder = task_root / what
        if folder.is_dir():
            for p in folder.rglob("*"):
                if p.is_file() and p.stat().st_size > 0:
                    pristine[p.read_bytes()] = what
    copies: dict[str, str] = {}
    for p in context.rglob("*"):
        if p.is_file() and p.name != dockerfile.name and p.stat().st_size > 0:
            found = pristine.get(p.read_bytes())
            if found is not None:
                copies[p.relative_to(context).as_posix()] = found
    out: list[Leak] = []
    for number, line in logical_lines(text):
        m = _INSTRUCTION.match(line)
        if number in seen or not m or m.group(1).upper() not in ("COPY", "ADD"):
            continue
        hits: set[str] = set()
        for src in _sources(m.group(2)):
            src = src.strip("/").removeprefix("./")
            hits |= {what for rel, what in copies.items()
                     if src in ("", ".") or rel == src or rel.startswith(src + "/")}
        if hits:
            out.append(Leak(number, line, " and ".join(sorted(hits))))
    return out


__all__ = ["Leak", "baked_in", "dockerfile_workdir", "logical_lines"]
