'use strict';

/** Re-flow `text` to lines of at most `width` characters. See prompt.md. */
function wrap(text, width) {
  throw new Error('not implemented');
}

module.exports = { wrap };
