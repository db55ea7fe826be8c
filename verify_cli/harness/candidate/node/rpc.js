'use strict';
// One side of a two-process run: requests out, requests in, strictly nested (docs/wire-protocol.md).
//
// `request` blocks until its own response arrives and serves every request of the other side
// that arrives meanwhile (a callback the code under test calls while handling our call), so
// calls nest to any depth in both directions.
const { ProtocolError, ChannelClosed } = require('./channel.js');
const { Codec, symbolOf } = require('./wire.js');

/** What an op handler returns when it has encoded its result itself. */
class Encoded {
  constructor(wire) {
    this.wire = wire;
  }
}

class Peer {
  /**
   * side: 'trusted' | 'candidate'; ops: extra request handlers by op name (fields, peer) ->
   * value; guard(op, target, name): throws when a request for our objects is refused.
   */
  constructor(side, channel, { ops = {}, guard = null, onBroken = null, brokenAs = (e) => e, lingerMs = 0 } = {}) {
    this.side = side;
    this.channel = channel;
    this.ops = ops;
    this.guard = guard;
    this.onBroken = onBroken;
    this.brokenAs = brokenAs;
    // After serving, wait this long for the next request before going back to the event loop:
    // a test's back-to-back calls then skip the I/O thread's wake-up message (a thread hop).
    this.lingerMs = lingerMs;
    this.broken = null;
    this.nextId = 1;
    this.depth = 0;
    this.codec = new Codec(side, (op, fields) => this.request(op, fields));
    channel.onPoke = () => this.drain();
  }

  fail(e) {
    if (!this.broken) {
      this.broken = this.brokenAs(e);
      if (this.onBroken) this.onBroken(e);
    }
    return this.broken;
  }

  /** Send a request and return its decoded result; throws what the other side threw. */
  request(op, fields) {
    if (this.broken) throw this.broken;
    const id = this.nextId++;
    this.depth += 1;
    this.channel.setIdle(false);
    try {
      try {
        this.channel.send(Object.assign({ id, op }, fields));
      } catch (e) {
        throw this.fail(e);
      }
      for (;;) {
        let msg;
        try {
          msg = this.channel.recv();
        } catch (e) {
          throw this.fail(e);
        }
        if (typeof msg.op === 'string') {
          this.serve(msg);
          if (this.broken) throw this.broken;
          continue;
        }
        if (msg.id !== id) throw this.fail(new ProtocolError(`a response to request ${msg.id} arrived while ${id} was open`));
        if ('error' in msg) {
          let thrown;
          try {
            thrown = this.codec.decodeError(msg.error);
          } catch (e) {
            throw this.fail(e);
          }
          throw thrown;
        }
        if (!('ok' in msg)) throw this.fail(new ProtocolError('a response holds neither ok nor error'));
        try {
          return this.codec.decode(msg.ok);
        } catch (e) {
          throw this.fail(e);
        }
      }
    } finally {
      this.depth -= 1;
      if (this.depth === 0) {
        this.channel.setIdle(true);
        if (this.channel.ready()) setImmediate(() => this.drain());
      }
    }
  }

  /** Serve the requests waiting while no call of ours is open (the event loop calls this). */
  drain() {
    if (this.depth > 0 || this.broken) return;
    this.channel.setIdle(false);
    this.depth += 1;
    try {
      while (this.channel.ready() || (this.lingerMs > 0 && this.channel.waitReady(this.lingerMs))) {
        const msg = this.channel.recv();
        if (typeof msg.op !== 'string') throw new ProtocolError('a response arrived with no request open');
        this.serve(msg);
      }
    } catch (e) {
      this.fail(e);
    } finally {
      this.depth -= 1;
      this.channel.setIdle(true);
      // A frame that arrived after the last look but before IDLE was set got no wake-up
      // message from the I/O thread: look once more, or it would wait forever.
      if (this.channel.ready() && !this.broken) setImmediate(() => this.drain());
    }
  }

  serve(msg) {
    const { id } = msg;
    if (!Number.isInteger(id)) throw this.fail(new ProtocolError('a request has no integer id'));
    let response;
    try {
      const result = this.handle(msg);
      response = { id, ok: result instanceof Encoded ? result.wire : this.codec.encode(result) };
    } catch (e) {
      if ((e instanceof ProtocolError || e instanceof ChannelClosed) && this.side === 'trusted') throw this.fail(e);
      if (this.broken) throw this.broken;
      try {
        response = { id, error: this.codec.encodeError(e) };
      } catch (e2) {
        response = { id, error: { type: 'Error', bases: ['Error'], message: 'an error that cannot cross', args: [] } };
      }
    }
    try {
      this.channel.send(response);
    } catch (e) {
      throw this.fail(e);
    }
  }

  handle(msg) {
    const c = this.codec;
    const args = () => {
      const kw = msg.kwargs;
      if (kw && typeof kw === 'object' && (Array.isArray(kw.$dict) ? kw.$dict.length : Object.keys(kw).length)) {
        throw new TypeError('JavaScript functions take no keyword arguments');
      }
      if (!Array.isArray(msg.args)) throw new ProtocolError('args is not a list');
      return msg.args.map((a) => c.decode(a));
    };
    const check = (name) => {
      if (this.guard) this.guard(msg.op, c.own(msg.target), name);
    };
    switch (msg.op) {
      case 'getattr': {
        const obj = c.own(msg.target);
        check(msg.name);
        return obj[symbolOf(msg.name)];
      }
      case 'setattr': {
        const obj = c.own(msg.target);
        check(msg.name);
        obj[symbolOf(msg.name)] = c.decode(msg.value);
        return undefined;
      }
      case 'call': {
        const fn = c.own(msg.target);
        check(null);
        if (typeof fn !== 'function') throw new TypeError('the target of a call is not a function');
        const a = args();
        if (msg.new === true) return Reflect.construct(fn, a);
        return Reflect.apply(fn, 'this' in msg ? c.decode(msg.this) : undefined, a);
      }
      case 'method': {
        const obj = c.own(msg.target);
        check(msg.name);
        const fn = obj[symbolOf(msg.name)];
        if (typeof fn !== 'function') throw new TypeError(`${String(msg.name)} is not a function`);
        return Reflect.apply(fn, obj, args());
      }
      case 'release':
        if (!Array.isArray(msg.handles)) throw new ProtocolError('release takes a list of handles');
        c.release(msg.handles);
        return null;
      default: {
        const op = Object.prototype.hasOwnProperty.call(this.ops, msg.op) ? this.ops[msg.op] : null;
        if (!op) throw new ProtocolError(`unknown op ${JSON.stringify(msg.op)}`);
        return op(msg, this);
      }
    }
  }
}

module.exports = { Peer, Encoded };
