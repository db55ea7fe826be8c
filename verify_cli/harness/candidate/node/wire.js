'use strict';
// node's codec for the values of docs/wire-protocol.md.
//
// Plain data crosses by value; everything else stays with its owner and crosses as a handle. The
// decoder builds nothing but plain data, the owner's own objects (handles it gave out, looked up
// by number) and local stand-ins for the other side's objects (Proxies whose every operation
// crosses the channel: no code of the other process ever runs here).
const { ProtocolError } = require('./channel.js');

const MAX_DEPTH = 100;
const NO_KWARGS = Object.freeze({ $dict: [] });
const BUILTIN_ERRORS = {
  Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError,
  AggregateError: typeof AggregateError === 'function' ? AggregateError : Error,
};
// Well-known symbols cross as '@@name' (a string key never starts with '@@' in practice).
const SYMBOL_NAMES = new Map([
  [Symbol.iterator, '@@iterator'], [Symbol.asyncIterator, '@@asyncIterator'],
]);

function symbolOf(name) {
  if (typeof name !== 'string') throw new ProtocolError('an attribute name is not a string');
  if (name === '@@iterator') return Symbol.iterator;
  if (name === '@@asyncIterator') return Symbol.asyncIterator;
  return name;
}

function isPlainObject(v) {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

function isClass(fn) {
  try {
    return /^class[\s{]/.test(Function.prototype.toString.call(fn));
  } catch (e) {
    return false;
  }
}

function formatFloat(x) {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (Object.is(x, -0)) return '-0.0';
  return Number.isInteger(x) ? `${x}.0` : String(x);
}

function parseFloatTag(s) {
  if (typeof s !== 'string') throw new ProtocolError('$float is not a string');
  if (s === 'nan') return NaN;
  if (s === 'inf') return Infinity;
  if (s === '-inf') return -Infinity;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) throw new ProtocolError(`bad $float ${JSON.stringify(s)}`);
  return Number(s);
}

function errorChain(e) {
  const names = [];
  for (let p = Object.getPrototypeOf(e); p && names.length < 20; p = Object.getPrototypeOf(p)) {
    const ctor = Object.prototype.hasOwnProperty.call(p, 'constructor') ? p.constructor : null;
    const name = ctor && typeof ctor.name === 'string' ? ctor.name : '';
    if (name && !names.includes(name)) names.push(name);
    if (p === Error.prototype) break;
  }
  return names;
}

/** The error class a receiver builds for an error of type `type` with these bases. */
const standInErrors = new Map();
function errorClassFor(type, bases) {
  const builtin = (bases || []).map((b) => BUILTIN_ERRORS[b]).find(Boolean) || Error;
  if (typeof type !== 'string' || !type || BUILTIN_ERRORS[type] === builtin) return builtin;
  const key = `${type}\u0000${builtin.name}`;
  let cls = standInErrors.get(key);
  if (!cls) {
    cls = class extends builtin {};
    Object.defineProperty(cls, 'name', { value: type });
    Object.defineProperty(cls.prototype, 'name', { value: type, writable: true, configurable: true });
    standInErrors.set(key, cls);
  }
  return cls;
}

class Codec {
  /**
   * side: 'trusted' or 'candidate' (who we are); cross(op, fields): send a request to the other
   * side and return its decoded answer (throws what the other side threw).
   */
  constructor(side, cross) {
    this.side = side;
    this.other = side === 'trusted' ? 'candidate' : 'trusted';
    this.cross = cross;
    this.nextId = 1;
    this.objects = new Map(); // our handle id -> object
    this.ids = new Map(); // object -> our handle id
    this.remote = new Map(); // their handle id -> stand-in (Proxy)
    this.remoteInfo = new WeakMap(); // stand-in -> {id, info}
    this.protos = new Map(); // their class handle id -> stand-in prototype
    this.classMethods = new Map(); // their class handle id -> Set of method names
    this.sentMethods = new Set(); // our class handle ids whose method names went out already
    this.baseOf = new Map(); // their class handle id -> their base class's handle id
    this.classNames = new Map(); // their class handle id -> its name
    this.secret = null; // (object) -> true when its content must not cross (set by the trusted side)
    this.asyncHolds = 0; // then() calls on the other side's thenables whose callbacks are pending
    this.onHold = null; // (held: boolean) -> keep this process alive while such a call is pending
  }

  // ---- our objects ----------------------------------------------------------------------

  own(id) {
    if (!Number.isInteger(id) || !this.objects.has(id)) throw new ProtocolError(`unknown handle ${id}`);
    return this.objects.get(id);
  }

  handleId(obj) {
    let id = this.ids.get(obj);
    if (id === undefined) {
      id = this.nextId++;
      this.ids.set(obj, id);
      this.objects.set(id, obj);
    }
    return id;
  }

  release(ids) {
    for (const id of ids) {
      const obj = this.objects.get(id);
      if (obj !== undefined) {
        this.objects.delete(id);
        this.ids.delete(obj);
      }
    }
  }

  encodeHandle(v, depth, stack) {
    const id = this.handleId(v);
    const out = { $handle: id, owner: this.side };
    if (typeof v === 'function') {
      const cls = isClass(v);
      out.kind = cls ? 'class' : 'callable';
      out.type = typeof v.name === 'string' ? v.name : '';
      if (cls || (v.prototype && Object.getOwnPropertyNames(v.prototype).length > 1)) {
        out.methods = this.methodNames(v.prototype);
        out.chain = this.classChain(v);
        if (v.prototype instanceof Error || v === Error) out.bases = errorChain(v.prototype).length ? [v.name, ...errorChain(v.prototype)] : [v.name];
      }
      return out;
    }
    if (typeof v === 'symbol') {
      return Object.assign(out, { kind: 'object', type: 'Symbol' });
    }
    const ctor = Object.getPrototypeOf(v) && Object.getPrototypeOf(v).constructor;
    out.kind = typeof v.next === 'function' && typeof v[Symbol.iterator] === 'function' ? 'iterator' : 'object';
    out.type = typeof ctor === 'function' && typeof ctor.name === 'string' ? ctor.name : 'Object';
    if (typeof ctor === 'function' && ctor !== Object) {
      out.class = this.handleId(ctor);
      if (!this.sentMethods.has(out.class)) {
        this.sentMethods.add(out.class);
        out.methods = this.methodNames(Object.getPrototypeOf(v));
        out.chain = this.classChain(ctor);
      }
    }
    if (v instanceof Error) {
      out.bases = errorChain(v);
      out.message = String(v.message);
    }
    const fields = {};
    if (this.secret && this.secret(v)) {
      // An assertion of the tests that failed inside a callback: its message and fields hold
      // the expected value, which the code under test must not read.
      out.message = 'an assertion of the tests failed';
      out.fields = fields;
      return out;
    }
    if (Array.isArray(v) || stack.includes(v) || this.side === 'trusted') {
      // (The trusted side sends no fields of its objects: the candidate reads them, if at all,
      // through getattr, which the trusted side guards.)
      out.fields = fields; // a container that holds itself: its items are read through getattr
      return out;
    }
    stack.push(v);
    try {
      for (const key of Object.keys(v)) {
        const desc = Object.getOwnPropertyDescriptor(v, key);
        if (desc && 'value' in desc && typeof desc.value !== 'function'
            && !(desc.value !== null && typeof desc.value === 'object' && stack.includes(desc.value))) {
          fields[key] = this.encode(desc.value, depth + 1, stack);
        }
      }
    } finally {
      stack.pop();
    }
    out.fields = fields;
    return out;
  }

  /** A module's exports as a handle of kind module; its fields name (and hold) the exports. */
  encodeModule(exports) {
    if (exports === null || typeof exports !== 'object') return this.encode(exports);
    const id = this.handleId(exports);
    const fields = {};
    for (const key of Object.keys(exports)) {
      const desc = Object.getOwnPropertyDescriptor(exports, key);
      fields[key] = desc && 'value' in desc ? this.encode(desc.value) : { $undefined: true };
    }
    return { $handle: id, owner: this.side, kind: 'module', type: 'module', fields };
  }

  /** [[handle id, name], ...] of a class and its user-defined base classes, nearest first. */
  classChain(cls) {
    const chain = [];
    for (let c = cls; typeof c === 'function' && c !== Function.prototype && chain.length < 20; c = Object.getPrototypeOf(c)) {
      if (/\[native code\]\s*}$/.test(Function.prototype.toString.call(c))) break;
      chain.push([this.handleId(c), typeof c.name === 'string' ? c.name : '']);
    }
    return chain;
  }

  methodNames(proto) {
    const names = new Set();
    for (let p = proto; p && p !== Object.prototype && p !== Function.prototype; p = Object.getPrototypeOf(p)) {
      for (const key of Object.getOwnPropertyNames(p)) {
        if (key === 'constructor') continue;
        const desc = Object.getOwnPropertyDescriptor(p, key);
        if (desc && typeof desc.value === 'function') names.add(key);
      }
    }
    return [...names];
  }

  // ---- encoding -------------------------------------------------------------------------

  encode(v, depth = 0, stack = []) {
    if (depth > MAX_DEPTH) throw new ProtocolError('a value nests deeper than the limit (100)');
    if ((typeof v === 'function' || typeof v === 'object') && v !== null) {
      const theirs = this.remoteInfo.get(v);
      if (theirs) return { $handle: theirs.id, owner: this.other };
    }
    switch (typeof v) {
      case 'undefined': return { $undefined: true };
      case 'boolean':
      case 'string': return v;
      case 'number': return Number.isInteger(v) && Math.abs(v) < 2 ** 53 && !Object.is(v, -0) ? v : { $float: formatFloat(v) };
      case 'bigint': return { $bigint: v.toString() };
      case 'function':
      case 'symbol': return this.encodeHandle(v, depth, stack);
      default: break;
    }
    if (v === null) return null;
    if (stack.includes(v)) return this.encodeHandle(v, depth, stack);
    stack.push(v);
    try {
      if (Array.isArray(v)) {
        const out = new Array(v.length);
        for (let i = 0; i < v.length; i++) out[i] = this.encode(v[i], depth + 1, stack);
        return out;
      }
      if (Buffer.isBuffer(v)) return { $bytes: v.toString('base64') };
      if (v instanceof Uint8Array && Object.getPrototypeOf(v) === Uint8Array.prototype) {
        return { $bytes: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64'), type: 'Uint8Array' };
      }
      if (v instanceof Date && Object.getPrototypeOf(v) === Date.prototype) {
        const t = v.getTime();
        return { $datetime: Number.isNaN(t) ? 'Invalid Date' : v.toISOString() };
      }
      if (v instanceof Map && Object.getPrototypeOf(v) === Map.prototype) {
        return { $map: [...v].map(([k, x]) => [this.encode(k, depth + 1, stack), this.encode(x, depth + 1, stack)]) };
      }
      if (v instanceof Set && Object.getPrototypeOf(v) === Set.prototype) {
        return { $set: [...v].map((x) => this.encode(x, depth + 1, stack)) };
      }
      if (isPlainObject(v)) {
        const out = { $object: Object.keys(v).map((k) => [k, this.encode(v[k], depth + 1, stack)]) };
        if (Object.getPrototypeOf(v) === null) out.proto = null;
        return out;
      }
    } finally {
      stack.pop();
    }
    return this.encodeHandle(v, depth, stack);
  }

  // ---- decoding -------------------------------------------------------------------------

  decode(w, depth = 0) {
    if (depth > MAX_DEPTH) throw new ProtocolError('a value nests deeper than the limit (100)');
    if (w === null || typeof w === 'boolean' || typeof w === 'string') return w;
    if (typeof w === 'number') {
      if (!Number.isInteger(w)) throw new ProtocolError('a bare JSON number must be an integer');
      return w;
    }
    if (Array.isArray(w)) return w.map((x) => this.decode(x, depth + 1));
    if (typeof w !== 'object') throw new ProtocolError('not a wire value');
    const pairs = (list) => {
      if (!Array.isArray(list)) throw new ProtocolError('a pair list is not a list');
      return list.map((p) => {
        if (!Array.isArray(p) || p.length !== 2) throw new ProtocolError('a pair is not [key, value]');
        return [this.decode(p[0], depth + 1), this.decode(p[1], depth + 1)];
      });
    };
    if ('$handle' in w) return this.decodeHandle(w, depth);
    const keys = Object.keys(w);
    const tag = keys.find((k) => k.startsWith('$'));
    const val = w[tag];
    switch (tag) {
      case '$float': return parseFloatTag(val);
      case '$int':
      case '$bigint':
        if (typeof val !== 'string' || !/^-?\d+$/.test(val)) throw new ProtocolError(`bad ${tag}`);
        return BigInt(val);
      case '$undefined': return undefined;
      case '$bytes': {
        if (typeof val !== 'string') throw new ProtocolError('bad $bytes');
        const buf = Buffer.from(val, 'base64');
        return w.type === 'Uint8Array' ? new Uint8Array(buf) : buf;
      }
      case '$datetime': {
        if (typeof val !== 'string') throw new ProtocolError('bad $datetime');
        return new Date(val === 'Invalid Date' ? NaN : val);
      }
      case '$map': return new Map(pairs(val));
      case '$dict': return new Map(pairs(val));
      case '$set':
      case '$frozenset':
        if (!Array.isArray(val)) throw new ProtocolError(`bad ${tag}`);
        return new Set(val.map((x) => this.decode(x, depth + 1)));
      case '$tuple':
        if (!Array.isArray(val)) throw new ProtocolError('bad $tuple');
        return val.map((x) => this.decode(x, depth + 1));
      case '$object': {
        const out = w.proto === null ? Object.create(null) : {};
        for (const [k, x] of pairs(val)) {
          if (typeof k !== 'string') throw new ProtocolError('an object key is not a string');
          Object.defineProperty(out, k, { value: x, writable: true, enumerable: true, configurable: true });
        }
        return out;
      }
      default:
        throw new ProtocolError(`a value of a kind node cannot hold: ${JSON.stringify(keys)}`);
    }
  }

  decodeHandle(w, depth) {
    const id = w.$handle;
    if (!Number.isInteger(id)) throw new ProtocolError('a handle number is not an integer');
    if (w.owner === this.side) return this.own(id);
    if (w.owner !== this.other) throw new ProtocolError('a handle has no valid owner');
    let standIn = this.remote.get(id);
    const info = {
      kind: String(w.kind || 'object'),
      type: typeof w.type === 'string' ? w.type : '',
      bases: Array.isArray(w.bases) ? w.bases.filter((b) => typeof b === 'string') : [],
      cls: Number.isInteger(w.class) ? w.class : null,
      message: typeof w.message === 'string' ? w.message : '',
    };
    if (Array.isArray(w.chain)) {
      const chain = w.chain.filter((c) => Array.isArray(c) && Number.isInteger(c[0]) && typeof c[1] === 'string');
      chain.forEach(([cid, name], i) => {
        this.classNames.set(cid, name);
        if (i + 1 < chain.length && !this.baseOf.has(cid)) this.baseOf.set(cid, chain[i + 1][0]);
      });
    }
    if (Array.isArray(w.methods)) {
      const owner = info.kind === 'class' || info.kind === 'callable' ? id : info.cls;
      if (owner !== null) this.classMethods.set(owner, new Set(w.methods.filter((m) => typeof m === 'string')));
    }
    const fields = {};
    if (w.fields && typeof w.fields === 'object' && !Array.isArray(w.fields)) {
      for (const [k, x] of Object.entries(w.fields)) fields[k] = this.decode(x, depth + 1);
    }
    if (!standIn) {
      standIn = this.makeStandIn(id, info);
      this.remote.set(id, standIn);
    }
    const entry = this.remoteInfo.get(standIn);
    // A handle that crosses again brings its owner's current fields: refresh the snapshot.
    if (entry.target && info.kind !== 'class' && info.kind !== 'callable') {
      for (const k of Object.keys(entry.target)) if (!(k in fields)) delete entry.target[k];
      Object.assign(entry.target, fields);
    }
    return standIn;
  }

  protoFor(classId, info) {
    const key = classId === null ? `type:${info.type}:${info.bases.join(',')}` : classId;
    let proto = this.protos.get(key);
    if (!proto) {
      const errorBase = info.bases.map((b) => BUILTIN_ERRORS[b]).find(Boolean);
      // A subclass's stand-in prototype inherits its base class's, so instanceof Base holds.
      const base = classId !== null && this.baseOf.has(classId) ? this.baseOf.get(classId) : null;
      const parent = base !== null
        ? this.protoFor(base, { type: this.classNames.get(base) || '', bases: [], cls: null })
        : (errorBase ? errorBase.prototype : Object.prototype);
      proto = Object.create(parent);
      const ctor = classId === null ? function () {} : this.remote.get(classId) || this.makeStandIn(classId, { kind: 'class', type: info.type, bases: info.bases, cls: null });
      if (classId !== null && !this.remote.has(classId)) this.remote.set(classId, ctor);
      Object.defineProperty(proto, 'constructor', { value: ctor, writable: true, configurable: true });
      if (errorBase) Object.defineProperty(proto, 'name', { value: info.type, writable: true, configurable: true });
      this.protos.set(key, proto);
    }
    return proto;
  }

  methodFunction(cache, id, name) {
    let fn = cache.get(name);
    if (!fn) {
      const codec = this;
      fn = function (...args) {
        const self = codec.remoteInfo.get(this);
        return codec.cross('method', { target: self ? self.id : id, name, args: args.map((a) => codec.encode(a)), kwargs: NO_KWARGS });
      };
      Object.defineProperty(fn, 'name', { value: name });
      cache.set(name, fn);
    }
    return fn;
  }

  /** `then` of the other side's thenable (a candidate's Promise): while its callbacks are
   * pending, onHold(true) keeps this process alive, as the promise would in-process. */
  thenFunction(id) {
    const codec = this;
    return function then(onFulfilled, onRejected) {
      let held = true;
      codec.asyncHolds += 1;
      if (codec.asyncHolds === 1 && codec.onHold) codec.onHold(true);
      const release = () => {
        if (!held) return;
        held = false;
        codec.asyncHolds -= 1;
        if (codec.asyncHolds === 0 && codec.onHold) codec.onHold(false);
      };
      const wrap = (f) => (typeof f === 'function' ? (...a) => {
        release();
        return f(...a);
      } : f);
      try {
        return codec.cross('method', { target: id, name: 'then', args: [wrap(onFulfilled), wrap(onRejected)].map((a) => codec.encode(a)), kwargs: NO_KWARGS });
      } catch (e) {
        release();
        throw e;
      }
    };
  }

  makeStandIn(id, info) {
    const codec = this;
    const callable = info.kind === 'class' || info.kind === 'callable';
    const nameOf = (key) => (typeof key === 'symbol' ? SYMBOL_NAMES.get(key) : key);
    const methods = new Map();
    let target;
    if (callable) {
      target = function () {};
      Object.defineProperty(target, 'name', { value: info.type });
    } else {
      target = Object.create(info.bases.length ? errorClassFor(info.type, info.bases).prototype : this.protoFor(info.cls, info));
      if (info.bases.length) {
        Object.defineProperty(target, 'message', { value: info.message, writable: true, configurable: true });
      }
    }
    const handler = {
      get(t, key) {
        if (key === 'prototype' && callable) {
          // An error class: the prototype of the errors built for it (decodeError), so that
          // assert.throws(fn, mod.MyError) and instanceof see the candidate's errors as its.
          return info.bases.length ? errorClassFor(info.type, info.bases).prototype : codec.protoFor(id, info);
        }
        const name = nameOf(key);
        if (name === undefined) return Reflect.get(t, key);
        if (name === 'then' && !callable && !Object.prototype.hasOwnProperty.call(t, key)) {
          const known = codec.classMethods.get(info.cls);
          const has = known ? known.has('then') : typeof codec.cross('getattr', { target: id, name }) === 'function';
          return has ? codec.thenFunction(id) : undefined;
        }
        if (!callable && !Object.prototype.hasOwnProperty.call(t, key)) {
          const known = codec.classMethods.get(info.cls);
          if (known && known.has(name)) return codec.methodFunction(methods, id, name);
        }
        return codec.cross('getattr', { target: id, name });
      },
      set(t, key, value) {
        const name = nameOf(key);
        if (name === undefined) return Reflect.set(t, key, value);
        codec.cross('setattr', { target: id, name, value: codec.encode(value) });
        if (!callable) t[key] = value;
        return true;
      },
      apply(t, thisArg, args) {
        const fields = { target: id, args: args.map((a) => codec.encode(a)), kwargs: NO_KWARGS };
        const self = codec.remoteInfo.get(thisArg);
        if (self) fields.this = { $handle: self.id, owner: codec.other };
        return codec.cross('call', fields);
      },
      construct(t, args) {
        const out = codec.cross('call', { target: id, args: args.map((a) => codec.encode(a)), kwargs: NO_KWARGS, new: true });
        if (out === null || (typeof out !== 'object' && typeof out !== 'function')) {
          throw new TypeError(`${info.type || 'the constructor'} did not return an object`);
        }
        return out;
      },
      deleteProperty() {
        throw new TypeError('deleting a property of an object of the code under test is not supported');
      },
      defineProperty() {
        throw new TypeError('defining a property on an object of the code under test is not supported');
      },
    };
    const standIn = new Proxy(target, handler);
    this.remoteInfo.set(standIn, { id, info, target: callable ? null : target });
    return standIn;
  }

  // ---- exceptions -----------------------------------------------------------------------

  /** The error document of a response for a thrown value. */
  encodeError(e) {
    // The trusted side sends its errors as handles, so that an error a test's callback throws
    // comes back as the very same object if the code under test lets it through.
    const byValue = this.side === 'candidate';
    if (byValue && e !== null && typeof e === 'object' && !this.remoteInfo.has(e) && e instanceof Error) {
      const bases = errorChain(e);
      const type = bases[0] || 'Error';
      const fields = {};
      if (typeof e.name === 'string' && e.name !== type) fields.name = e.name;
      for (const key of ['code', 'errno', 'syscall', 'path']) {
        const v = Object.getOwnPropertyDescriptor(e, key);
        if (v && 'value' in v && (typeof v.value === 'string' || typeof v.value === 'number')) fields[key] = v.value;
      }
      let message = '';
      try {
        message = String(e.message);
      } catch (err) {
        message = '<unreadable message>';
      }
      return { type, module: '', bases, message, args: [message], fields };
    }
    // Not an Error of ours (a primitive, a plain object, an object of the other side): it
    // crosses as a value and the receiver throws exactly that.
    const value = this.encode(e);
    return { type: '', module: '', bases: [], message: '', args: [], value };
  }

  /** What to throw for an error document received in a response. */
  decodeError(err) {
    if (err === null || typeof err !== 'object') throw new ProtocolError('a response error is not an object');
    if ('value' in err) return this.decode(err.value);
    const message = typeof err.message === 'string' ? err.message : '';
    const type = typeof err.type === 'string' ? err.type : 'Error';
    const bases = Array.isArray(err.bases) ? err.bases.filter((b) => typeof b === 'string') : [];
    const cls = errorClassFor(type, bases);
    const e = cls === AggregateError ? new AggregateError([], message) : new cls(message);
    if (err.fields && typeof err.fields === 'object') {
      for (const [k, v] of Object.entries(err.fields)) {
        if (typeof v === 'string' || typeof v === 'number') {
          Object.defineProperty(e, k, { value: v, writable: true, enumerable: k !== 'name', configurable: true });
        }
      }
    }
    e.stack = `${e.name}: ${message}\n    at <the other process>`;
    return e;
  }
}

module.exports = { Codec, symbolOf, errorClassFor, MAX_DEPTH };
