'use strict';
// The codec alone (no channel): what each side encodes, and what the decoder refuses.
const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const harness = process.env.VERIFY_NODE_HARNESS;
const { Codec } = require(path.join(harness, 'candidate/node/wire.js'));

const noCross = () => {
  throw new Error('no channel in this test');
};

function roundTrip(value) {
  const sender = new Codec('candidate', noCross);
  const receiver = new Codec('trusted', noCross);
  return receiver.decode(JSON.parse(JSON.stringify(sender.encode(value))));
}

test('numbers keep integer and float apart, and the JS-only kinds are tagged', () => {
  const c = new Codec('candidate', noCross);
  assert.strictEqual(c.encode(3), 3);
  assert.deepStrictEqual(c.encode(1.5), { $float: '1.5' });
  assert.deepStrictEqual(c.encode(2 ** 53), { $float: '9007199254740992.0' });
  assert.deepStrictEqual(c.encode(-0), { $float: '-0.0' });
  assert.deepStrictEqual(c.encode(NaN), { $float: 'nan' });
  assert.deepStrictEqual(c.encode(undefined), { $undefined: true });
  assert.deepStrictEqual(c.encode(5n), { $bigint: '5' });
  assert.deepStrictEqual(c.encode(new Map([[1, 2]])), { $map: [[1, 2]] });
  assert.deepStrictEqual(c.encode({ a: 1 }), { $object: [['a', 1]] });
  assert.deepStrictEqual(c.encode(new Date(0)), { $datetime: '1970-01-01T00:00:00.000Z' });
  assert.deepStrictEqual(c.encode(Buffer.from('hi')), { $bytes: 'aGk=' });
});

test('plain values survive a round trip exactly', () => {
  for (const v of [null, true, 'x', 0, -0, 1.25, Infinity, -Infinity, NaN, 2 ** 60, 12n, undefined,
    [1, [2]], { a: { b: [] } }, new Set([1]), new Map([['k', [1]]]), Buffer.from([1]), new Uint8Array([3]),
    new Date(86400000), Object.create(null)]) {
    assert.deepStrictEqual(roundTrip(v), v);
  }
});

test('objects and functions cross as handles, never by value', () => {
  class Secret {
    constructor() {
      this.field = 1;
    }
  }
  const c = new Codec('candidate', noCross);
  const w = c.encode(new Secret());
  assert.strictEqual(w.owner, 'candidate');
  assert.strictEqual(w.type, 'Secret');
  assert.deepStrictEqual(w.fields, { field: 1 });
  const f = c.encode(() => 1);
  assert.strictEqual(f.kind, 'callable');
  const again = c.encode(c.objects.get(w.$handle));
  assert.strictEqual(again.$handle, w.$handle);
});

test('the decoder refuses what it cannot build', () => {
  const d = new Codec('trusted', noCross);
  for (const bad of [1.5, { $float: '1e5x' }, { $code: 'x' }, { $decimal: '1' }, { $handle: 99, owner: 'trusted' },
    { $handle: 1, owner: 'someone' }, { $object: [[1, 2]] }, { $object: [['a']] }, { $bigint: '1.5' }]) {
    assert.throws(() => d.decode(bad), { name: 'ProtocolError' }, JSON.stringify(bad));
  }
  let deep = 1;
  for (let i = 0; i < 150; i++) deep = [deep];
  assert.throws(() => d.decode(deep), { name: 'ProtocolError' });
});

test('an own-object handle decodes to the very object; the candidate cannot name a handle it was not given', () => {
  const trusted = new Codec('trusted', noCross);
  const obj = { x: 1 };
  const cb = () => obj;
  const w = trusted.encode(cb);
  assert.strictEqual(trusted.decode({ $handle: w.$handle, owner: 'trusted' }), cb);
  assert.throws(() => trusted.decode({ $handle: w.$handle + 1, owner: 'trusted' }), { name: 'ProtocolError' });
});
