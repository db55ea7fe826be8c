"""Syntax-checks JavaScript mutants with one ``node`` process for the whole batch.

Each original file decides how its mutants are parsed: as CommonJS (a function body, as
``node`` runs it) or, failing that, as an ES module. Nothing is executed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence

_CHECKER = r"""
const vm = require('vm');
let input = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => { input += chunk; });
process.stdin.on('end', () => {
  const { originals, mutants } = JSON.parse(input);
  const strip = (s) => (s.startsWith('#!') ? '//' + s.slice(2) : s);
  const parse = {
    script: (s) => vm.compileFunction(strip(s),
      ['exports', 'require', 'module', '__filename', '__dirname']),
    module: (s) => {
      if (!vm.SourceTextModule) throw new Error('no vm.SourceTextModule');
      new vm.SourceTextModule(strip(s));
    },
  };
  const parses = (kind, s) => {
    try { parse[kind](s); return true; }
    catch (e) { return e instanceof SyntaxError ? false : null; }
  };
  const modes = {};
  for (const [path, source] of Object.entries(originals)) {
    const order = path.endsWith('.mjs') ? ['module']
      : path.endsWith('.cjs') ? ['script'] : ['script', 'module'];
    modes[path] = order.find((kind) => parses(kind, source) === true) || null;
  }
  const verdicts = mutants.map(([path, source]) =>
    (modes[path] ? parses(modes[path], source) : null));
  process.stdout.write(JSON.stringify(verdicts));
});
"""

CHECK_TIMEOUT_S = 120.0


def javascript_compiles(
    originals: Mapping[str, str], mutants: Sequence[tuple[str, str]]
) -> list[bool | None]:
    """For each ``(path, mutated source)``: parses (True), does not (False), unknown (None).

    Unknown when ``node`` is not installed, fails, or cannot parse the original file either.
    """
    unknown: list[bool | None] = [None] * len(mutants)
    node = shutil.which("node")
    if node is None or not mutants:
        return unknown
    payload = json.dumps({"originals": dict(originals), "mutants": [list(m) for m in mutants]})
    try:
        completed = subprocess.run(
            [node, "--experimental-vm-modules", "--no-warnings", "-e", _CHECKER],
            input=payload,
            capture_output=True,
            encoding="utf-8",
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
        verdicts = json.loads(completed.stdout) if completed.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return unknown
    if not isinstance(verdicts, list) or len(verdicts) != len(mutants):
        return unknown
    return [v if isinstance(v, bool) else None for v in verdicts]
