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

// The seal key of the run (verify_node_seal.js): read once from the pipe $VERIFY_SEAL_FD names
// (verify_cli/sandbox/trusted_launch.py: never in any environment), which is closed at once, and
// kept by the seal reporter's module in this process; the variable is gone before node --test
// starts a test process (a second reader would find the pipe empty anyway).
if (process.env.VERIFY_SEAL_FD !== undefined) {
  const fd = Number(process.env.VERIFY_SEAL_FD);
  delete process.env.VERIFY_SEAL_FD;
  if (Number.isInteger(fd) && fd > 2) {
    const fs = require('node:fs');
    const buf = Buffer.alloc(256);
    let got = 0;
    try {
      for (;;) {
        const n = fs.readSync(fd, buf, got, buf.length - got, null);
        if (n <= 0 || got + n >= buf.length) { got += n; break; }
        got += n;
      }
    } catch (e) {
      // EAGAIN or a closed descriptor: no key, no seal (the run scores as unsealed).
    }
    try { fs.closeSync(fd); } catch (e) { /* already closed */ }
    const value = buf.toString('ascii', 0, Math.max(0, got)).trim();
    if (value) require('./verify_node_seal.js').setKey(value);
  }
}
