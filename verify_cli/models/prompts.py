"""Build a task's prompt (prompt.md and the starter files) and take a candidate's files back out
of a completion.

The answer format asked for is one fenced code block per changed file, with the file's path on
the opening fence line (```python roman.py). Extraction also accepts a path on the line just
before a fence, and, for a task with a single editable file, an unnamed block or a bare answer.
A bare answer (no fence at all) is taken as the file only when it parses in the file's language
where this process can tell (Python, by its suffix; nothing is run); otherwise, and when a
completion yields no file, it is a parse error (a format failure), never an exception.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verify_cli.models.base import Prompt
from verify_cli.tasks.model import TESTS_DIR, Task
from verify_cli.tasks.paths import list_files, matches_any

DEFAULT_SYSTEM = ("You are an expert programmer. Solve the task by editing the files you are "
                  "allowed to change. Reply with the complete new content of each file you change.")

#: Starter or test files larger than this are named in the prompt but not shown.
MAX_SHOWN_FILE_BYTES = 20_000

_GLOB_CHARS = re.compile(r"[*?\[]")
_LANGUAGES = {"python": "python", "javascript": "javascript", "typescript": "typescript",
              "node": "javascript", "go": "go", "rust": "rust", "bash": "bash", "shell": "bash"}
_FENCE_LANG = {".py": "python", ".js": "javascript", ".mjs": "javascript", ".ts": "typescript",
               ".json": "json", ".toml": "toml", ".ini": "ini", ".sh": "bash", ".md": "markdown",
               ".yaml": "yaml", ".yml": "yaml", ".csv": "csv", ".go": "go", ".rs": "rust"}


def single_editable_file(task: Task) -> str | None:
    """The one file a solution may change, when there is exactly one: a literal editable path,
    or the only starter file an editable glob matches. None otherwise."""
    literal = [p for p in task.editable if not _GLOB_CHARS.search(p)]
    if len(literal) == len(task.editable) == 1:
        return literal[0]
    matched = [rel for rel in task.starter_files() if matches_any(task.editable, rel)]
    return matched[0] if len(matched) == 1 and not any(_GLOB_CHARS.search(p) for p in literal) else None


def _fence_language(path: str) -> str:
    for suffix, lang in _FENCE_LANG.items():
        if path.endswith(suffix):
            return lang
    return ""


def show_file(path: str, data: bytes, note: str = "") -> str:
    """One file as a prompt shows it: a heading, then its text in a fenced block naming it."""
    title = f"### {path}{f' ({note})' if note else ''}"
    if len(data) > MAX_SHOWN_FILE_BYTES:
        return f"{title}\n\n(not shown: {len(data)} bytes)\n"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{title}\n\n(binary file, not shown)\n"
    fence = "````" if "```" in text else "```"
    return f"{title}\n\n{fence}{_fence_language(path)} {path}\n{text.rstrip()}\n{fence}\n"


def user_message(task: Task, *, include_tests: bool = True) -> str:
    """The task as one user message: prompt.md, the starter files, the visible tests (hidden
    tests never), and the answer format."""
    parts = [task.prompt.strip() or f"Solve the task {task.id}."]
    starter = task.starter_files()
    editable = [rel for rel in starter if matches_any(task.editable, rel)]
    parts.append("## Files\n\nYou may change only files matching: "
                 + ", ".join(f"`{g}`" for g in task.editable) + ".")
    for rel, path in starter.items():
        parts.append(show_file(rel, path.read_bytes(), "" if rel in editable else "read-only"))
    if include_tests:
        for rel, path in list_files(task.root / TESTS_DIR).items():
            parts.append(show_file(f"{TESTS_DIR}/{rel}", path.read_bytes(), "visible test, read-only"))
    target = single_editable_file(task) or (editable[0] if editable else task.editable[0])
    lang = _LANGUAGES.get(task.language.lower(), _fence_language(target))
    parts.append("## Answer format\n\nReply with the complete new content of every file you change, "
                 "each in one fenced code block whose opening line names the file, for example:\n\n"
                 f"```{lang} {target}\n...\n```")
    return "\n\n".join(parts) + "\n"


def task_messages(task: Task, *, system: str | None = DEFAULT_SYSTEM,
                  include_tests: bool = True) -> tuple[dict[str, str], ...]:
    user = {"role": "user", "content": user_message(task, include_tests=include_tests)}
    return ({"role": "system", "content": system}, user) if system else (user,)


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def build_prompt(task: Task, tokenizer: Any = None, *, system: str | None = DEFAULT_SYSTEM,
                 include_tests: bool = True) -> Prompt:
    """The task's prompt. With a tokenizer, ``text`` is rendered through its chat template (when
    it has one) and ``prompt_token_ids`` are filled in; without one, ``text`` is the plain
    concatenation of the messages, for completion endpoints."""
    messages = task_messages(task, system=system, include_tests=include_tests)
    token_ids: tuple[int, ...] | None = None
    if tokenizer is not None and has_chat_template(tokenizer):
        text = tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                             add_generation_prompt=True)
    else:
        text = "\n\n".join(m["content"] for m in messages)
    if tokenizer is not None:
        encoded = tokenizer(text, add_special_tokens=not has_chat_template(tokenizer))
        token_ids = tuple(int(t) for t in encoded["input_ids"])
    return Prompt(task_id=task.id, text=text, messages=messages, prompt_token_ids=token_ids)


# --- extraction ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extraction:
    """The files taken from a completion, or why none could be (``error``: a parse error)."""

    files: dict[str, str]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class _Block:
    info: str
    body: str
    before: str  # the last non-blank line before the opening fence


_FENCE_OPEN = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})(.*)$")
_PATHISH = re.compile(r"^[\w.\-/]*[\w\-]\.[A-Za-z0-9]{1,8}$|^[\w.\-]+(?:/[\w.\-]+)+$")
_KEYED = re.compile(r"""(?:title|file|filename|path|name)\s*[=:]\s*["']?([^"'\s]+)["']?""")
_NAME_LINE = re.compile(r"^[#*`>\s-]*(?:file(?:name)?\s*:?\s*)?[`*]*([\w.\-/]+\.[A-Za-z0-9]{1,8})[`*]*\s*:?\s*$",
                        re.IGNORECASE)


def _blocks(text: str) -> list[_Block]:
    lines = text.splitlines()
    out: list[_Block] = []
    i, before = 0, ""
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m or (m.group(1)[0] == "`" and "`" in m.group(2)):
            if lines[i].strip():
                before = lines[i].strip()
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        close = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        # An unclosed block (truncated at max_tokens) runs to the end of the text.
        body = "\n".join(lines[i + 1:j])
        out.append(_Block(info, body + "\n" if body else "", before))
        before = ""
        i = j + 1
    return out


def _name_from_info(info: str) -> str | None:
    m = _KEYED.search(info)
    if m:
        return m.group(1)
    for token in re.split(r"[\s{}]+", info):
        token = token.strip("\"'`")
        if ":" in token:  # python:roman.py
            token = token.split(":", 1)[1]
        if token and _PATHISH.match(token):
            return token
    return None


def _name_from_line(line: str, editable: Sequence[str]) -> str | None:
    m = _NAME_LINE.match(line)
    if m and matches_any(editable, m.group(1).lstrip("./")):
        return m.group(1)
    return None


def _clean_path(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path


def syntax_problem(path: str, text: str) -> str | None:
    """Why ``text`` is not a file of ``path``'s language (``"valid Python (line 2: invalid
    syntax)"``), for the languages this process parses without running anything: Python. None
    when it parses, or when its language cannot be checked here (it is then taken as it is)."""
    if not path.endswith((".py", ".pyi")):
        return None
    try:
        ast.parse(text, filename=path)
    except SyntaxError as e:
        return f"valid Python (line {e.lineno}: {e.msg})"
    except (ValueError, RecursionError, MemoryError) as e:  # NUL bytes; nesting past the parser's limits
        return f"valid Python ({type(e).__name__})"
    return None


def extract_files(text: str, editable: Sequence[str], single_file: str | None = None) -> Extraction:
    """The candidate's files in ``text``: named fenced blocks (the last block for a path wins);
    without any, the last unnamed block (or, with no fence at all, the whole answer, if it parses
    in the file's language: :func:`syntax_problem`) as ``single_file`` when the task has one.
    Files outside ``editable`` are kept: grading ignores and reports them."""
    blocks = _blocks(text)
    named: dict[str, str] = {}
    unnamed: list[_Block] = []
    for block in blocks:
        name = _name_from_info(block.info) or _name_from_line(block.before, editable)
        if name:
            named[_clean_path(name)] = block.body
        else:
            unnamed.append(block)
    if named:
        return Extraction(named)
    if single_file is not None:
        if unnamed:
            body = unnamed[-1].body
            if body.strip():
                return Extraction({single_file: body})
            return Extraction({}, "the answer's code block is empty")
        if not blocks and text.strip():
            body = text.strip("\n") + "\n"
            problem = syntax_problem(single_file, body)
            if problem is not None:
                return Extraction({}, f"the answer holds no fenced code block and is not {problem}")
            return Extraction({single_file: body})
        return Extraction({}, "the answer is empty")
    if unnamed:
        return Extraction({}, "code blocks do not name their files and the task has several editable files")
    return Extraction({}, "the answer holds no fenced code block")


def extract_for_task(task: Task, text: str) -> Extraction:
    return extract_files(text, task.editable, single_editable_file(task))


def files_to_candidate(files: Mapping[str, str]) -> dict[str, bytes]:
    return {path: content.encode("utf-8") for path, content in files.items()}
