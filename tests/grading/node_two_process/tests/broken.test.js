'use strict';
// The candidate server dies in the middle of the run: the run must fail, never pass.
const test = require('node:test');
const assert = require('node:assert');
const mod = require('../shapes.js');

test('a call after the candidate died fails', () => {
  try {
    mod.exit();
  } catch (e) {
    // swallowed on purpose: the run must still fail
  }
  assert.throws(() => mod.echo(1), Error);
});
