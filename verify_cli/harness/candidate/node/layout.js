'use strict';
// The shared-memory layout between a SyncChannel (channel.js) and its I/O thread
// (channel_worker.js): an Int32 control block, then one data slot for a frame (or a chunk of one).
module.exports = Object.freeze({
  CTL_INTS: 8,
  DATA_OFFSET: 32,
  DATA_BYTES: 1 << 20,
  MAX_FRAME: 64 * 1024 * 1024,
  // control block indexes
  SLOT: 0, // SLOT_EMPTY | SLOT_FULL | SLOT_CLOSED
  CHUNK_LEN: 1,
  FRAME_LEN: 2,
  STATUS: 3,
  FD: 4,
  IDLE: 5, // 1 while the main thread is not blocked in a call: frames then arrive by postMessage poke
  BAD: 6, // 1 when the peer sent a frame over the size limit
  SLOT_EMPTY: 0,
  SLOT_FULL: 1,
  SLOT_CLOSED: 2,
  STATUS_STARTING: 0,
  STATUS_UP: 1,
  STATUS_CLOSED: 2,
  STATUS_FAILED: 3,
  STATUS_LISTENING: 4,
});
