"""The documentation stays true.

- The README is a short guide (at most ``README_MAX_LINES``) that names the two commands and links
  the docs; every page under docs/ is reachable from docs/index.md.
- Every relative link of the README and docs/ leads to a file that exists (and to a heading that
  exists, for ``page.md#anchor``).
- Every ``verify-cli`` command the docs show, in a code block or in inline code, names commands
  that exist and options those commands take (as ``--help`` lists them).
- The ``task.toml`` reference is what the JSON Schema gives (scripts/gen_task_reference.py).
- docs/architecture.md keeps the sections other changes fill in, and every file or folder it names
  exists (a moved module shows here, not in a reader's confusion).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer

from verify_cli.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
ARCHITECTURE = DOCS / "architecture.md"
README_MAX_LINES = 300
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
#: Pages another change writes: a link to one of them is kept while it is not here yet.
PENDING: set[Path] = set()
#: a path in backticks, with a folder in it (a bare file name is read in its sentence's folder):
#: folders end in '/', files in a known suffix
_PATH = re.compile(r"`([\w./-]+(?:/|\.py|\.md|\.js|\.json|\.toml))`")
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^[ \t]*(```+)([^\n]*)\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


# --- the README -------------------------------------------------------------------------------


def test_the_readme_is_a_short_guide() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move detail under docs/"
    headings = [line[3:] for line in lines if line.startswith("## ")]
    for needed in ("The two commands", "Install", "A five-minute walk-through", "Commands", "Documentation"):
        assert needed in headings, needed


def test_the_readme_names_the_two_commands_and_ci_runs_the_second() -> None:
    text = README.read_text(encoding="utf-8")
    assert "\nbash scripts/check_samples.sh\n" in text and "\nbash scripts/test.sh\n" in text
    assert (ROOT / "scripts" / "check_samples.sh").is_file() and (ROOT / "scripts" / "test.sh").is_file()
    assert "exec bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_links_the_docs_index_and_the_architecture_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert "(docs/index.md)" in text and "(docs/architecture.md)" in text


def test_every_docs_page_is_reachable_from_the_index() -> None:
    reachable: set[Path] = set()
    todo = [DOCS / "index.md"]
    while todo:
        page = todo.pop()
        if page in reachable or not page.is_file():
            continue
        reachable.add(page)
        todo += [target for target, _ in _links(page) if target.suffix == ".md"]
    assert [p for p in _ids(sorted(DOCS.rglob("*.md"))) if ROOT / p not in reachable] == []


def test_the_docs_index_keeps_a_task_environments_section() -> None:
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "## Task environments" in text and "(environments.md)" in text


# --- links ------------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def _links(page: Path) -> list[tuple[Path, str]]:
    """(target path, anchor) of each relative link on ``page``, outside code."""
    text = _FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    found = []
    for href in _LINK.findall(text):
        if re.match(r"^[a-z]+:", href):
            continue  # http(s), mailto: not checked here
        path, _, anchor = href.partition("#")
        target = (page.parent / path).resolve() if path else page
        found.append((target, anchor))
    return found


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def dead_links(page: Path) -> list[str]:
    dead = []
    for target, anchor in _links(page):
        if target in PENDING:
            continue
        if not target.exists():
            dead.append(f"{_shown(target)}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            dead.append(f"{_shown(target)}#{anchor}: no such heading")
    return dead


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_relative_link_is_alive(page: Path) -> None:
    assert dead_links(page) == []


def test_the_link_check_sees_a_dead_link_and_a_dead_anchor(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Title\n\n## Warm grading\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md) [ok](b.md#warm-grading) [web](https://x.org/y) `[code](gone.md)`\n"
                    "[gone](gone.md) [bad anchor](b.md#cold-grading)\n")
    assert [d.split("/")[-1] for d in dead_links(page)] == ["gone.md: no such file",
                                                             "b.md#cold-grading: no such heading"]


# --- commands and options ---------------------------------------------------------------------


@cache
def _tree() -> Any:
    return typer.main.get_command(app)


def _shown_commands(text: str) -> list[str]:
    """Each ``verify-cli ...`` command line of a Markdown text: in shell code blocks (continuation
    lines joined, prompts and comments dropped) and in inline code."""
    lines: list[str] = []
    for match in _FENCE.finditer(text):
        lang = match[2].strip().split(" ")[0]
        if lang not in ("", "bash", "sh", "console", "shell"):
            continue
        body = re.sub(r"\\\n\s*", " ", match[3])
        for line in body.splitlines():
            line = re.sub(r"^\s*\$ ", "", line)
            lines += [m for m in re.findall(r"(?:^|[;&|(]\s*)(verify-cli\s[^#;&|)]*)", line)]
    outside = _FENCE.sub("", text)
    lines += re.findall(r"`(verify-cli\s[^`]*)`", outside)
    return [line.strip() for line in lines]


def unknown_options(command_line: str) -> list[str]:
    """What of ``command_line`` (``verify-cli ...``) names no command or option that exists."""
    try:
        words = shlex.split(command_line.replace("...", " "))[1:]
    except ValueError:
        words = command_line.split()[1:]
    command = _tree()
    path = ["verify-cli"]
    while words and getattr(command, "commands", None) and not words[0].startswith("-"):
        name = words[0]
        if name not in command.commands:
            alternatives = [n for n in re.split(r"[|/]", name) if n]
            if all(n in command.commands for n in alternatives) and alternatives:
                name = alternatives[0]  # `tasks list|stats`: both exist
            elif name.isupper() or name in ("COMMAND", "..."):
                return []  # a placeholder: `verify-cli COMMAND --help`
            else:
                return [f"{' '.join(path)} has no command {name!r}"]
        command = command.commands[name]
        path.append(name)
        words = words[1:]
    known = {"--help"} | {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    bad = []
    for word in words:
        if word == "--":
            break
        for option in re.findall(r"(?:^|[\[|])(--?[A-Za-z][\w-]*)", word):
            if option not in known:
                bad.append(f"{' '.join(path)}: no option {option}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=_ids(PAGES))
def test_every_command_and_option_the_docs_show_exists(page: Path) -> None:
    shown = _shown_commands(page.read_text(encoding="utf-8"))
    assert [f"{line!r}: {why}" for line in shown for why in unknown_options(line)] == []


def test_the_readme_command_table_names_every_command_that_exists() -> None:
    text = README.read_text(encoding="utf-8")
    table = re.search(r"^## Commands\n(.*?)^## ", text, re.M | re.S)
    assert table
    rows = [cell.replace("\\|", "|") for cell in re.findall(r"^\| `([^`]+)` \|", table.group(1), re.M)]
    assert [f"{row}: {why}" for row in rows for why in unknown_options(f"verify-cli {row}")] == []
    listed = {row.split()[0] for row in rows}
    assert listed == set(_tree().commands), "the README's table lists every top-level command"


def test_the_docs_show_commands_to_check() -> None:
    shown = [line for page in PAGES for line in _shown_commands(page.read_text(encoding="utf-8"))]
    assert len(shown) > 80


def test_the_command_check_sees_what_does_not_exist() -> None:
    text = ("Run `verify-cli check-tasks tasks/ --repeats 3 -j 2`.\n\n```bash\n"
            "$ verify-cli difficulty tasks/ --backend openai \\\n    --tensor-parallel 2   # a cut name\n"
            "verify-cli tasks list|stats PATH [--check-report FILE]\nverify-cli frobnicate x\n```\n")
    shown = _shown_commands(text)
    assert [why for line in shown for why in unknown_options(line)] == [
        "verify-cli difficulty: no option --tensor-parallel", "verify-cli has no command 'frobnicate'"]


#: Pages about verify-cli's own commands: an option named in their inline code is one of them.
COMMAND_PAGES = [README, DOCS / "cli.md", DOCS / "agents.md", DOCS / "service.md", DOCS / "ray.md",
                 *sorted((DOCS / "commands").glob("*.md"))]
#: Options of other programs that those pages name (node's test runner).
FOREIGN_OPTIONS = {"--test"}


@cache
def every_option() -> frozenset[str]:
    found: set[str] = {"--help", "--version"}
    todo = [_tree()]
    while todo:
        command = todo.pop()
        found.update(o for p in command.params for o in (*p.opts, *p.secondary_opts))
        todo += list(getattr(command, "commands", {}).values())
    return frozenset(found)


def options_no_command_takes(text: str) -> list[str]:
    spans = re.findall(r"`([^`]+)`", _FENCE.sub("", text))
    named = {o for span in spans for o in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", span)}
    return sorted(named - every_option() - FOREIGN_OPTIONS)


@pytest.mark.parametrize("page", COMMAND_PAGES, ids=_ids(COMMAND_PAGES))
def test_every_option_a_command_page_names_exists(page: Path) -> None:
    assert options_no_command_takes(page.read_text(encoding="utf-8")) == []


def test_the_option_check_sees_a_renamed_option() -> None:
    text = "Use `--grade-jobs`, `--jobs 4`, `--test` and `--tensor-paralle` (``--no-such``).\n\n```\n--x\n```\n"
    assert options_no_command_takes(text) == ["--no-such", "--tensor-paralle"]


# --- the generated task.toml reference --------------------------------------------------------


def test_the_task_toml_reference_is_what_the_schema_gives() -> None:
    spec = importlib.util.spec_from_file_location("gen_task_reference", ROOT / "scripts" / "gen_task_reference.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.main(["--check"]) == 0, "run: python scripts/gen_task_reference.py"
    page = gen.PAGE.read_text(encoding="utf-8")
    schema = __import__("json").loads(gen.SCHEMA.read_text(encoding="utf-8"))
    for field in schema["properties"]:
        assert f"`{field}`" in page
    for field in schema["properties"]["limits"]["properties"]:
        assert f"`{field}`" in page


# --- the architecture page --------------------------------------------------------------------


def named_paths(text: str) -> list[str]:
    return [m for m in _PATH.findall(text) if "/" in m]


def resolves(name: str) -> bool:
    """Whether ``name`` is a path of the repository or of the package (``grading/grader.py``)."""
    return any((base / name).exists() for base in (ROOT, ROOT / "verify_cli"))


def test_the_architecture_page_has_its_sections() -> None:
    headings = re.findall(r"^## (.+)$", ARCHITECTURE.read_text(encoding="utf-8"), re.M)
    for needed in ("Layers", "One candidate, from the command line to a verdict", "Who owns what",
                   "Where to add", "Task kinds"):
        assert needed in headings, needed


def test_every_path_the_architecture_page_names_exists() -> None:
    names = named_paths(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(names) > 20
    assert [n for n in names if not resolves(n)] == []


def test_the_path_check_sees_a_missing_module() -> None:
    names = named_paths("the grader (`grading/grader.py`), the old `grading/judge.py`, `sandbox/`, `x`, `a.py`")
    assert names == ["grading/grader.py", "grading/judge.py", "sandbox/"]
    assert [n for n in names if not resolves(n)] == ["grading/judge.py"]
