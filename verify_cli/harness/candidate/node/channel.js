'use strict';
// A blocking frame channel over the Unix socket of docs/wire-protocol.md, for node.
//
// node's require() and the calls a test makes are synchronous, so a call that crosses to the
// other process must block until its answer arrives (and serve the callbacks that arrive
// meanwhile). node has no blocking socket API: an I/O thread (channel_worker.js) owns the socket
// and passes each incoming frame through a SharedArrayBuffer slot that this thread waits on with
// Atomics.wait; outgoing frames are written straight to the socket's fd with fs.writeSync.
// While this thread is not blocked in a call (IDLE), the I/O thread also pokes it with a message,
// so requests that arrive between calls (a callback from a timer) are served by the event loop.
const fs = require('node:fs');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const L = require('./layout.js');

class ProtocolError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ProtocolError';
  }
}

class ChannelClosed extends Error {
  constructor(message) {
    super(message);
    this.name = 'ChannelClosed';
  }
}

const decoder = new TextDecoder('utf-8', { fatal: true });
const sleepCell = new Int32Array(new SharedArrayBuffer(4));

class SyncChannel {
  /**
   * mode: 'connect' (trusted side: connect to `path`), 'listen' (candidate side: accept on
   * `path`), 'fd' (candidate side: a connection handed over as file descriptor `fd`).
   */
  constructor({ mode, path: channelPath, fd, connectSeconds = 10, serverArgv = [] }) {
    this.mode = mode;
    this.sab = new SharedArrayBuffer(L.DATA_OFFSET + L.DATA_BYTES);
    this.ctl = new Int32Array(this.sab, 0, L.CTL_INTS);
    this.data = new Uint8Array(this.sab, L.DATA_OFFSET);
    Atomics.store(this.ctl, L.IDLE, 1);
    this.onPoke = null;
    this.worker = new Worker(path.join(__dirname, 'channel_worker.js'), {
      workerData: { sab: this.sab, mode, path: channelPath, fd, connectSeconds, serverArgv },
      stdout: false,
      stderr: false,
    });
    this.worker.on('message', () => {
      if (this.onPoke) this.onPoke();
    });
    this.worker.on('error', (e) => {
      process.stderr.write(`verify channel: I/O thread failed: ${e && e.stack}\n`);
    });
    // Listening, the I/O thread may accept the first connection (UP), and even see it close
    // (CLOSED), before this thread looks again: both mean it listened. Waiting for LISTENING
    // alone then slept until the deadline while the trusted side waited on this server (a
    // correct reference failed so, now and then, on a busy machine).
    const reached = mode === 'listen'
      ? (s) => s === L.STATUS_LISTENING || s === L.STATUS_UP || s === L.STATUS_CLOSED
      : (s) => s === L.STATUS_UP;
    const deadline = Date.now() + (connectSeconds + 5) * 1000;
    for (;;) {
      const status = Atomics.load(this.ctl, L.STATUS);
      if (reached(status)) break;
      if (status === L.STATUS_FAILED || status === L.STATUS_CLOSED) {
        throw new ChannelClosed(`cannot ${mode} the channel at ${channelPath}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new ChannelClosed(`timed out waiting to ${mode} the channel at ${channelPath}`);
      Atomics.wait(this.ctl, L.STATUS, status, left);
    }
  }

  /** Let the process exit while the channel is open (the trusted side's test process). */
  unref() {
    this.worker.unref();
  }

  setIdle(idle) {
    Atomics.store(this.ctl, L.IDLE, idle ? 1 : 0);
  }

  /** True when a frame (or the end of the stream) is waiting to be read. */
  ready() {
    return Atomics.load(this.ctl, L.SLOT) !== L.SLOT_EMPTY;
  }

  /** Block up to `ms` for a frame (or the end of the stream); true when one is waiting. */
  waitReady(ms) {
    if (this.ready()) return true;
    Atomics.wait(this.ctl, L.SLOT, L.SLOT_EMPTY, ms);
    return this.ready();
  }

  send(message) {
    const body = Buffer.from(JSON.stringify(message), 'utf8');
    if (body.length > L.MAX_FRAME) throw new ProtocolError(`frame of ${body.length} bytes is over the limit`);
    const frame = Buffer.allocUnsafe(4 + body.length);
    frame.writeUInt32BE(body.length, 0);
    body.copy(frame, 4);
    const fd = Atomics.load(this.ctl, L.FD);
    if (Atomics.load(this.ctl, L.STATUS) !== L.STATUS_UP) throw new ChannelClosed('the channel is closed');
    let off = 0;
    while (off < frame.length) {
      try {
        off += fs.writeSync(fd, frame, off, frame.length - off);
      } catch (e) {
        if (e.code !== 'EAGAIN') throw new ChannelClosed(`the channel is closed (${e.code || e.message})`);
        Atomics.wait(sleepCell, 0, 0, 1);
      }
    }
  }

  /** The next frame, decoded from JSON; blocks until one arrives. */
  recv() {
    const chunks = [];
    let total = -1;
    let have = 0;
    for (;;) {
      let slot = Atomics.load(this.ctl, L.SLOT);
      while (slot === L.SLOT_EMPTY) {
        Atomics.wait(this.ctl, L.SLOT, L.SLOT_EMPTY);
        slot = Atomics.load(this.ctl, L.SLOT);
      }
      if (slot === L.SLOT_CLOSED) {
        if (Atomics.load(this.ctl, L.BAD)) throw new ProtocolError('the peer sent a frame over the size limit');
        throw new ChannelClosed('the other process closed the channel');
      }
      const n = Atomics.load(this.ctl, L.CHUNK_LEN);
      total = Atomics.load(this.ctl, L.FRAME_LEN);
      chunks.push(Buffer.from(this.data.slice(0, n)));
      have += n;
      Atomics.store(this.ctl, L.SLOT, L.SLOT_EMPTY);
      Atomics.notify(this.ctl, L.SLOT);
      if (have >= total) break;
    }
    let text;
    try {
      text = decoder.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
    } catch (e) {
      throw new ProtocolError('a frame is not UTF-8');
    }
    let message;
    try {
      message = JSON.parse(text);
    } catch (e) {
      throw new ProtocolError('a frame is not JSON');
    }
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      throw new ProtocolError('a frame is not a JSON object');
    }
    return message;
  }
}

module.exports = { SyncChannel, ProtocolError, ChannelClosed };
