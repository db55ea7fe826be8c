'use strict';

class Emitter {
  on(event, listener) {
    throw new Error('not implemented');
  }

  once(event, listener) {
    throw new Error('not implemented');
  }

  off(event, listener) {
    throw new Error('not implemented');
  }

  listenerCount(event) {
    throw new Error('not implemented');
  }

  emit(event, ...args) {
    throw new Error('not implemented');
  }
}

module.exports = { Emitter };
