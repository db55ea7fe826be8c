'use strict';
// An ESM import of a candidate file is refused on the tests' side (never loaded).
const test = require('node:test');
const assert = require('node:assert');

test('import() of the candidate file is refused', async () => {
  await assert.rejects(import('../shapes.js'), /cannot be imported as ESM/);
});
