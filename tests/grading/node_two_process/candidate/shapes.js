'use strict';
// A candidate module with every shape the node stand-in must carry (tests/grading/test_node_two_process.py).
class Point {
  constructor(x, y) {
    this.x = x;
    this.y = y;
  }

  move(dx) {
    this.x += dx;
    return this;
  }

  get norm1() {
    return Math.abs(this.x) + Math.abs(this.y);
  }

  *[Symbol.iterator]() {
    yield this.x;
    yield this.y;
  }
}

class Point3 extends Point {
  constructor(x, y, z) {
    super(x, y);
    this.z = z;
  }
}

class ShapeError extends RangeError {
  constructor(message) {
    super(message);
    this.code = 'E_SHAPE';
  }
}

function values() {
  return {
    u: undefined, n: null, b: true, i: 42, f: 1.5, negZero: -0, nan: NaN, inf: -Infinity,
    big: 10n ** 30n, s: 'é\u0000"', arr: [1, [2, []]], map: new Map([[1, 'a'], ['k', { z: 1 }]]),
    set: new Set([1, 'x']), buf: Buffer.from([0, 255]), u8: new Uint8Array([1, 2]), date: new Date(0),
    nested: { a: { b: { c: [] } } }, bare: Object.assign(Object.create(null), { q: 1 }),
  };
}

let counter = 0;

module.exports = {
  Point,
  Point3,
  ShapeError,
  values,
  echo: (x) => x,
  callTwice: (fn, x) => [fn(x), fn(x + 1)],
  fail(kind) {
    if (kind === 'type') throw new TypeError('bad type');
    if (kind === 'custom') throw new ShapeError('too big');
    if (kind === 'string') throw 'just a string';
    throw { code: 7 };
  },
  rethrow(fn) {
    fn();
    return 'not thrown';
  },
  catchAndCall(fn) {
    try {
      fn(1);
    } catch (e) {
      return { caught: true, name: e.name, readable: (() => { try { return e.message; } catch (e2) { return 'refused'; } })() };
    }
    return { caught: false };
  },
  peek(obj) {
    const out = {};
    for (const name of ['constructor', '__proto__', 'toString']) {
      try {
        out[name] = typeof obj[name];
      } catch (e) {
        out[name] = 'refused';
      }
    }
    return out;
  },
  bump: () => ++counter,
  get counter() {
    return counter;
  },
  later(fn) {
    setTimeout(() => fn('late'), 5);
  },
  async doubleLater(x) {
    await new Promise((r) => setTimeout(r, 5));
    return x * 2;
  },
  cyclic() {
    const a = [1];
    a.push(a);
    return a;
  },
  deep: (n) => {
    let v = [];
    for (let i = 0; i < n; i++) v = [v];
    return v;
  },
  exit: () => process.exit(0),
};
