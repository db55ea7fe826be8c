'use strict';
// Preloaded by the harness in every node process of a run (NODE_OPTIONS=--require
// verify_node_guard, found through NODE_PATH): before any test or candidate code runs, freeze
// the assertion modules, so that code under test cannot turn assertions into no-ops
// (`require('node:assert').strictEqual = () => {}` then passes nothing).
for (const name of ['assert', 'assert/strict']) {
  try {
    const mod = require(name);
    Object.freeze(mod);
    if (mod.strict) Object.freeze(mod.strict);
  } catch (e) {
    // An older runtime without the module: nothing to guard.
  }
}
