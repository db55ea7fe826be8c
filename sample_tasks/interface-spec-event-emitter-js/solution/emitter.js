'use strict';

class Emitter {
  constructor() {
    this._listeners = new Map(); // event -> array of {fn, once, active}
  }

  _add(event, listener, once) {
    if (typeof listener !== 'function') throw new TypeError('listener must be a function');
    const reg = { fn: listener, once, active: true };
    if (!this._listeners.has(event)) this._listeners.set(event, []);
    this._listeners.get(event).push(reg);
    return () => this._remove(event, reg);
  }

  _remove(event, reg) {
    const list = this._listeners.get(event);
    if (!list) return false;
    const i = list.indexOf(reg);
    if (i === -1) return false;
    list.splice(i, 1);
    reg.active = false;
    if (list.length === 0) this._listeners.delete(event);
    return true;
  }

  on(event, listener) {
    return this._add(event, listener, false);
  }

  once(event, listener) {
    return this._add(event, listener, true);
  }

  off(event, listener) {
    const list = this._listeners.get(event) || [];
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i].fn === listener) return this._remove(event, list[i]);
    }
    return false;
  }

  listenerCount(event) {
    return (this._listeners.get(event) || []).length;
  }

  emit(event, ...args) {
    const snapshot = (this._listeners.get(event) || []).slice();
    if (snapshot.length === 0 && event === 'error') throw args[0];
    let called = 0;
    for (const reg of snapshot) {
      if (!reg.active) continue;
      if (reg.once) this._remove(event, reg);
      called += 1;
      reg.fn(...args);
    }
    return called;
  }
}

module.exports = { Emitter };
