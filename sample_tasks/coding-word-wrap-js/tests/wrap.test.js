'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { wrap } = require('../wrap.js');

test('greedy filling keeps lines within width', () => {
  assert.strictEqual(wrap('the quick brown fox', 10), 'the quick\nbrown fox');
  assert.strictEqual(wrap('aa bb cc', 5), 'aa bb\ncc');
});

test('a word of exactly width fits and a line may reach width exactly', () => {
  assert.strictEqual(wrap('abcd ef gh', 4), 'abcd\nef\ngh');
  assert.strictEqual(wrap('ab cd ef', 5), 'ab cd\nef');
});

test('long words are cut into width-sized pieces and the last piece stays open', () => {
  assert.strictEqual(wrap('abcdefghij k', 4), 'abcd\nefgh\nij k');
  assert.strictEqual(wrap('x abcdefgh', 4), 'x\nabcd\nefgh');
});

test('paragraphs are separated by exactly one empty line', () => {
  assert.strictEqual(wrap('one\n\n\n  two  three', 20), 'one\n\ntwo three');
  assert.strictEqual(wrap('\n \nalpha\nbeta\n\t\ngamma\n\n', 20), 'alpha beta\n\ngamma');
});

test('text without words gives the empty string', () => {
  assert.strictEqual(wrap('', 5), '');
  assert.strictEqual(wrap(' \t\n\n  ', 5), '');
});

test('invalid arguments throw', () => {
  assert.throws(() => wrap('abc', 0), RangeError);
  assert.throws(() => wrap('abc', 2.5), RangeError);
  assert.throws(() => wrap('abc', '3'), RangeError);
  assert.throws(() => wrap(42, 3), TypeError);
  assert.strictEqual(wrap('a b', 1), 'a\nb');
});
