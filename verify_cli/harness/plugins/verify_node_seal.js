'use strict';
// The seal of a node test run (the node counterpart of verify_harness.py's signed record).
//
// Loaded in the `node --test` process as an extra reporter (the grader appends
// --test-reporter=<this file> to NODE_OPTIONS): it renders the same events node's own junit
// reporter renders, and writes $VERIFY_RESULTS_DIR/verify-seal-node-<pid>.json, an HMAC-SHA256
// (per-run key) over the SHA-256 of that JUnit document. The grader then trusts a JUnit file only
// if a valid seal names its exact bytes: a file rewritten or planted afterwards scores 0.
//
// The key comes from the pipe $VERIFY_SEAL_FD names, which verify_node_guard.js (preloaded first)
// reads once and closes before the runner starts any test process; it is in no environment.
// Under two-process grading the candidate's code never runs in a process of this sandbox;
// in-process, a candidate shares the process that holds the key, which is why two-process is
// the default.
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

let key = null;

function setKey(value) {
  if (key === null && typeof value === 'string' && value) key = value;
}

async function* sealReporter(source) {
  const { junit } = require('node:test/reporters');
  const events = [];
  for await (const event of source) events.push(event);
  if (key === null) return;
  async function* replay() {
    for (const event of events) yield event;
  }
  let xml = '';
  for await (const chunk of junit(replay())) xml += chunk;
  const payload = JSON.stringify({
    version: 1,
    runner: 'node',
    pid: process.pid,
    junit_sha256: crypto.createHash('sha256').update(xml, 'utf8').digest('hex'),
  });
  const mac = crypto.createHmac('sha256', key).update(payload, 'utf8').digest('hex');
  const dir = process.env.VERIFY_RESULTS_DIR;
  if (dir) fs.writeFileSync(path.join(dir, `verify-seal-node-${process.pid}.json`), JSON.stringify({ payload, mac }));
}

module.exports = sealReporter;
module.exports.setKey = setKey;
