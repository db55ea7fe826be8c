"""``new-task``: scaffold a task folder that loads and passes check-tasks as it stands."""

from __future__ import annotations

import re
from pathlib import Path

from verify_cli.errors import UsageError
from verify_cli.tasks.schema import task_schema

_PY = {
    "starter/solution.py": 'def total(values: list[int]) -> int:\n    """Return the sum of values."""\n'
                           '    raise NotImplementedError\n',
    "solution/solution.py": 'def total(values: list[int]) -> int:\n    """Return the sum of values."""\n'
                            "    return sum(values)\n",
    "tests/test_solution.py": "from solution import total\n\n\ndef test_empty():\n    assert total([]) == 0\n\n\n"
                              "def test_several():\n    assert total([1, 2, 3]) == 6\n\n\n"
                              "def test_negative():\n    assert total([-4, 1]) == -3\n",
}
_JS = {
    "starter/solution.js": "function total(values) {\n  throw new Error('not implemented');\n}\n\n"
                           "module.exports = { total };\n",
    "solution/solution.js": "function total(values) {\n  return values.reduce((a, b) => a + b, 0);\n}\n\n"
                            "module.exports = { total };\n",
    "tests/solution.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
                              "const { total } = require('../solution.js');\n\n"
                              "test('empty', () => assert.strictEqual(total([]), 0));\n"
                              "test('several', () => assert.strictEqual(total([1, 2, 3]), 6));\n"
                              "test('negative', () => assert.strictEqual(total([-4, 1]), -3));\n",
}

_TOML = """schema_version = 1
id = "{id}"
title = "Sum a list of integers"
domain = "{domain}"
language = "{language}"
kind = "{kind}"
tags = []
editable = ["{editable}"]

[environment]
image = "{image}"
runtime = "{runtime}"
# What the task needs beyond its runtime, built once and graded inside (docs/environments.md):
# requirements = ["lxml>=5"]         # Python packages (or requirements_file = "requirements.txt")
# system_packages = ["libxml2-utils"]  # Debian packages (built into an image: --sandbox docker)
# setup = ["pip install -e ."]       # run once at build time in /workspace holding starter/

[test]
command = '{command}'
results = "junit.xml"

[scoring]
policy = "all-or-nothing"

[limits]
wall_seconds = 10
memory_mb = 512
processes = 64
output_bytes = 1048576
"""

_LANGS = {
    "python": dict(files=_PY, editable="solution.py", image="verify-cli/python:3.11", runtime="python",
                   kind="pytest",
                   command='python -m pytest -q -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests'),
    "javascript": dict(files=_JS, editable="solution.js", image="verify-cli/node:20", runtime="node",
                       kind="node",
                       command='node --test --test-reporter=junit '
                               '--test-reporter-destination="$VERIFY_RESULTS_DIR/junit.xml" tests/'),
}


def scaffold_task(dest: Path, *, language: str = "python", domain: str = "coding") -> Path:
    """Create ``dest`` as a new task folder; refuses to touch an existing folder."""
    if language not in _LANGS:
        raise UsageError(f"no template for language {language!r}", hint=f"choose one of: {', '.join(_LANGS)}")
    domains = [str(d) for d in task_schema()["properties"]["domain"]["enum"]]
    if domain not in domains:
        raise UsageError(f"unknown domain {domain!r}", hint=f"choose one of: {', '.join(domains)}")
    if dest.exists():
        raise UsageError(f"{dest}: already exists", hint="choose a new folder name; nothing was written")
    # An id starts with a letter or digit (the schema's pattern): drop leading '.', '_', '-'.
    task_id = re.sub(r"[^a-z0-9._-]+", "-", dest.name.lower()).lstrip("._-").rstrip("-")
    task_id = task_id or "new-task"
    spec = _LANGS[language]
    files: dict[str, str] = dict(spec["files"])  # type: ignore[arg-type]
    files["task.toml"] = _TOML.format(id=task_id, domain=domain, language=language, **{
        k: spec[k] for k in ("editable", "image", "runtime", "command", "kind")})
    files["prompt.md"] = ("# Sum a list of integers\n\nImplement `total(values)` in the solution file: return the "
                          "sum of the integers in `values` (0 for an empty list).\n")
    for rel, text in files.items():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    (dest / "hidden_tests").mkdir(exist_ok=True)
    return dest
