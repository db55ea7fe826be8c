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

// The seal key of the run (verify_node_seal.js): kept by the seal reporter's module in this
// process, and gone from the environment before node --test starts a test process.
if (process.env.VERIFY_SEAL_KEY !== undefined) {
  require('./verify_node_seal.js').setKey(process.env.VERIFY_SEAL_KEY);
  delete process.env.VERIFY_SEAL_KEY;
}
