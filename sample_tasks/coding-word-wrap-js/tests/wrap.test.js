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

test('random texts: lines fit, nothing is lost, lines are filled greedily', () => {
  // Computed, not listed: a table of the examples above cannot pass this.
  let seed = 20240607;
  const rand = (n) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  for (let round = 0; round < 300; round++) {
    const words = Array.from({ length: 1 + rand(10) }, () => 'abcdefghijklmnop'.slice(rand(8), 9 + rand(8)));
    const width = 1 + rand(12);
    const out = wrap(words.join(rand(2) ? ' ' : ' \t '), width);
    assert.strictEqual(typeof out, 'string');
    const lines = out.split('\n');
    for (const line of lines) {
      assert.ok(line.length >= 1 && line.length <= width, `line ${JSON.stringify(line)} for width ${width}`);
      assert.strictEqual(line, line.trim());
    }
    assert.strictEqual(lines.join('').replace(/ /g, ''), words.join(''));
    for (let i = 0; i + 1 < lines.length; i++) {
      const next = lines[i + 1].split(' ')[0];
      if (next.length <= width) assert.ok(lines[i].length + 1 + next.length > width, 'not greedy');
    }
  }
});
