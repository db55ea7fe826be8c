'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { Emitter } = require('../emitter.js');

test('on and emit call listeners in order with arguments', () => {
  const e = new Emitter();
  const calls = [];
  e.on('data', (a, b) => calls.push(['first', a, b]));
  e.on('data', (a, b) => calls.push(['second', a, b]));
  e.on('other', () => calls.push(['other']));
  assert.strictEqual(e.emit('data', 1, 'x'), 2);
  assert.deepStrictEqual(calls, [['first', 1, 'x'], ['second', 1, 'x']]);
  assert.strictEqual(e.emit('nothing'), 0);
  assert.strictEqual(e.listenerCount('data'), 2);
  assert.strictEqual(e.listenerCount('nothing'), 0);
  assert.throws(() => e.on('data', 'not a function'), TypeError);
});

test('once fires a single time and duplicates count separately', () => {
  const e = new Emitter();
  let n = 0;
  const inc = () => { n += 1; };
  e.once('tick', inc);
  e.on('tick', inc);
  e.on('tick', inc);
  assert.strictEqual(e.listenerCount('tick'), 3);
  assert.strictEqual(e.emit('tick'), 3);
  assert.strictEqual(e.emit('tick'), 2);
  assert.strictEqual(n, 5);
  assert.strictEqual(e.listenerCount('tick'), 2);
});

test('unsubscribe removes exactly its own registration and is idempotent', () => {
  const e = new Emitter();
  const seen = [];
  const f = (x) => seen.push(x);
  const un1 = e.on('ev', f);
  e.on('ev', f);
  un1();
  un1();
  assert.strictEqual(e.listenerCount('ev'), 1);
  e.emit('ev', 'a');
  assert.deepStrictEqual(seen, ['a']);
  const unOnce = e.once('ev', f);
  unOnce();
  assert.strictEqual(e.emit('ev', 'b'), 1);
  assert.deepStrictEqual(seen, ['a', 'b']);
});

test('off removes the most recent registration and reports it', () => {
  const e = new Emitter();
  const log = [];
  const f = (tag) => log.push('f' + tag);
  e.once('x', f);
  e.on('x', () => log.push('g'));
  e.on('x', f);
  assert.strictEqual(e.off('x', f), true);
  e.emit('x', 1);
  assert.deepStrictEqual(log, ['f1', 'g']);
  assert.strictEqual(e.off('x', f), false);
  assert.strictEqual(e.off('missing', f), false);
  assert.strictEqual(e.listenerCount('x'), 1);
});

test('listeners added or removed during emit follow the snapshot rules', () => {
  const e = new Emitter();
  const log = [];
  let unLater;
  e.on('go', () => {
    log.push('a');
    e.on('go', () => log.push('added'));
    unLater();
  });
  unLater = e.on('go', () => log.push('removed'));
  e.on('go', () => log.push('c'));
  assert.strictEqual(e.emit('go'), 2);
  assert.deepStrictEqual(log, ['a', 'c']);
  log.length = 0;
  e.emit('go');
  assert.deepStrictEqual(log.slice(0, 3), ['a', 'c', 'added']);
});

test('a once listener re-emitting the same event runs only once', () => {
  const e = new Emitter();
  let n = 0;
  e.once('r', () => { n += 1; e.emit('r'); });
  assert.strictEqual(e.emit('r'), 1);
  assert.strictEqual(n, 1);
  assert.strictEqual(e.listenerCount('r'), 0);
});

test('throwing listeners stop emit and unhandled error events throw', () => {
  const e = new Emitter();
  const log = [];
  e.once('boom', () => { throw new Error('bad'); });
  e.on('boom', () => log.push('after'));
  assert.throws(() => e.emit('boom'), /bad/);
  assert.deepStrictEqual(log, []);
  assert.strictEqual(e.emit('boom'), 1);
  assert.deepStrictEqual(log, ['after']);
  const err = new Error('unhandled');
  assert.throws(() => e.emit('error', err), (thrown) => thrown === err);
  const got = [];
  e.on('error', (x) => got.push(x));
  assert.strictEqual(e.emit('error', err), 1);
  assert.deepStrictEqual(got, [err]);
});
