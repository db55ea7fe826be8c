'use strict';
// Runs on the trusted side: every use of ../shapes.js crosses to the candidate server.
const test = require('node:test');
const assert = require('node:assert');
const mod = require('../shapes.js');

test('plain values of every JS kind cross by value', () => {
  const expected = {
    u: undefined, n: null, b: true, i: 42, f: 1.5, negZero: -0, nan: NaN, inf: -Infinity,
    big: 10n ** 30n, s: 'é\u0000"', arr: [1, [2, []]], map: new Map([[1, 'a'], ['k', { z: 1 }]]),
    set: new Set([1, 'x']), buf: Buffer.from([0, 255]), u8: new Uint8Array([1, 2]), date: new Date(0),
    nested: { a: { b: { c: [] } } }, bare: Object.assign(Object.create(null), { q: 1 }),
  };
  assert.deepStrictEqual(mod.values(), expected);
  assert.deepStrictEqual(mod.echo(expected), expected);
  assert.ok(Object.is(mod.echo(-0), -0));
  assert.strictEqual(mod.echo(2 ** 60), 2 ** 60);
  assert.strictEqual(typeof mod.echo(1.0), 'number');
});

test('objects of the candidate stay there: methods, getters, identity, iteration, equality', () => {
  const p = new mod.Point(1, 2);
  assert.ok(p instanceof mod.Point);
  assert.strictEqual(p.x, 1);
  assert.strictEqual(p.move(2), p);
  assert.strictEqual(p.x, 3);
  assert.strictEqual(p.norm1, 5);
  assert.deepStrictEqual([...p], [3, 2]);
  p.y = 10;
  assert.strictEqual(p.norm1, 13);
  assert.deepStrictEqual(new mod.Point(1, 2), new mod.Point(1, 2));
  assert.notDeepStrictEqual(new mod.Point(1, 2), new mod.Point(1, 3));
  assert.notDeepStrictEqual(new mod.Point(1, 2), { x: 1, y: 2 });
  assert.deepStrictEqual(Object.keys(new mod.Point(5, 6)), ['x', 'y']);
  const q = new mod.Point3(1, 2, 3);
  assert.ok(q instanceof mod.Point3 && q instanceof mod.Point);
  assert.ok(!(p instanceof mod.Point3));
  assert.strictEqual(q.move(1).x, 2);
  assert.strictEqual(q.z, 3);
});

test('errors arrive as the same built-in type, or a stand-in of the candidate class', () => {
  assert.throws(() => mod.fail('type'), TypeError);
  assert.throws(() => mod.fail('type'), { name: 'TypeError', message: 'bad type' });
  assert.throws(() => mod.fail('custom'), RangeError);
  assert.throws(() => mod.fail('custom'), mod.ShapeError);
  assert.throws(() => mod.fail('custom'), { code: 'E_SHAPE', message: 'too big' });
  assert.throws(() => mod.fail('string'), (e) => e === 'just a string');
  assert.throws(() => mod.fail('object'), (e) => e.code === 7);
});

test('callbacks of the tests are called back, re-entrantly, and their errors come back unchanged', () => {
  assert.deepStrictEqual(mod.callTwice((x) => x * 10, 1), [10, 20]);
  assert.deepStrictEqual(mod.callTwice((x) => mod.callTwice((y) => y + x, 100), 1), [[101, 102], [102, 103]]);
  const err = new Error('mine');
  assert.throws(() => mod.rethrow(() => { throw err; }), (e) => e === err);
  const obj = { tag: 'trusted' };
  assert.deepStrictEqual(mod.echo(obj), obj);
  const fn = () => 1;
  assert.strictEqual(mod.echo(fn), fn);
});

test('the candidate cannot read a failed assertion or reach into the tests\' functions', () => {
  const seen = mod.catchAndCall((x) => assert.strictEqual(x, 12345));
  assert.strictEqual(seen.caught, true);
  assert.strictEqual(seen.readable, 'refused');
  assert.deepStrictEqual(mod.peek(() => 0), { constructor: 'refused', __proto__: 'refused', toString: 'refused' });
});

test('module state is read fresh; callbacks from timers and promises work', async () => {
  const before = mod.counter;
  mod.bump();
  assert.strictEqual(mod.counter, before + 1);
  let late = null;
  mod.later((v) => { late = v; });
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.strictEqual(late, 'late');
  assert.strictEqual(await mod.doubleLater(21), 42);
});

test('cycles cross as handles and depth is limited', () => {
  const c = mod.cyclic();
  assert.strictEqual(c[0], 1);
  assert.strictEqual(c[1][1][0], 1);
  assert.strictEqual(mod.deep(50).length, 1);
  assert.throws(() => mod.deep(150));
});
