'use strict';
// The I/O thread of a SyncChannel (channel.js). It owns the Unix socket: it connects (trusted
// side) or accepts (candidate side), splits the byte stream into frames, and hands each frame to
// the main thread through a SharedArrayBuffer slot the main thread can block on with
// Atomics.wait. The main thread writes frames itself, straight to the socket's fd.
//
// On the candidate side a second and later connection (node --test runs each test file in a
// process of its own) is handed to a fresh server process, so every test file sees a candidate
// module loaded from scratch, as it would in-process.
const { workerData, parentPort } = require('node:worker_threads');
const net = require('node:net');
const { spawn } = require('node:child_process');
const L = require('./layout.js');

const { sab, mode, path: channelPath, fd: inheritedFd, connectSeconds, serverArgv } = workerData;
const ctl = new Int32Array(sab, 0, L.CTL_INTS);
const data = new Uint8Array(sab, L.DATA_OFFSET);

const frames = [];
let pumping = false;

function setStatus(value) {
  Atomics.store(ctl, L.STATUS, value);
  Atomics.notify(ctl, L.STATUS);
}

function closeSlot() {
  // Wake a main thread blocked on the slot: value 2 means no more frames will come.
  setStatus(L.STATUS_CLOSED);
  frames.push(null);
  pump();
}

function poke() {
  if (Atomics.load(ctl, L.IDLE) === 1) parentPort.postMessage(0);
}

async function pump() {
  if (pumping) return;
  pumping = true;
  try {
    while (frames.length) {
      const frame = frames.shift();
      if (frame === null) {
        while (Atomics.load(ctl, L.SLOT) !== L.SLOT_EMPTY) {
          await Atomics.waitAsync(ctl, L.SLOT, Atomics.load(ctl, L.SLOT)).value;
        }
        Atomics.store(ctl, L.SLOT, L.SLOT_CLOSED);
        Atomics.notify(ctl, L.SLOT);
        poke();
        return;
      }
      let offset = 0;
      do {
        while (Atomics.load(ctl, L.SLOT) !== L.SLOT_EMPTY) {
          await Atomics.waitAsync(ctl, L.SLOT, L.SLOT_FULL).value;
        }
        const n = Math.min(frame.length - offset, data.length);
        data.set(frame.subarray(offset, offset + n), 0);
        Atomics.store(ctl, L.CHUNK_LEN, n);
        Atomics.store(ctl, L.FRAME_LEN, frame.length);
        Atomics.store(ctl, L.SLOT, L.SLOT_FULL);
        Atomics.notify(ctl, L.SLOT);
        poke();
        offset += n;
      } while (offset < frame.length);
    }
  } finally {
    pumping = false;
  }
}

function attach(sock) {
  Atomics.store(ctl, L.FD, sock._handle.fd);
  setStatus(L.STATUS_UP);
  let pending = Buffer.alloc(0);
  sock.on('data', (chunk) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 4) {
      const len = pending.readUInt32BE(0);
      if (len > L.MAX_FRAME) {
        Atomics.store(ctl, L.BAD, 1);
        sock.destroy();
        return;
      }
      if (pending.length < 4 + len) break;
      frames.push(Buffer.from(pending.subarray(4, 4 + len)));
      pending = pending.subarray(4 + len);
    }
    pump();
  });
  sock.on('error', () => {});
  sock.on('close', closeSlot);
}

if (mode === 'connect') {
  const deadline = Date.now() + connectSeconds * 1000;
  const tryConnect = () => {
    const sock = net.connect(channelPath);
    sock.once('connect', () => attach(sock));
    sock.once('error', () => {
      sock.destroy();
      if (Date.now() > deadline) setStatus(L.STATUS_FAILED);
      else setTimeout(tryConnect, 5);
    });
  };
  tryConnect();
} else if (mode === 'fd') {
  attach(new net.Socket({ fd: inheritedFd, readable: true, writable: true }));
} else {
  let first = true;
  const server = net.createServer({ allowHalfOpen: false }, (sock) => {
    if (first) {
      first = false;
      attach(sock);
      return;
    }
    // A fresh candidate process for each further connection (see the header).
    const child = spawn(process.execPath, serverArgv, { stdio: ['ignore', 'inherit', 'inherit', sock] });
    child.on('error', () => sock.destroy());
    child.on('spawn', () => sock.destroy());
  });
  server.listen(channelPath, () => setStatus(L.STATUS_LISTENING));
  server.on('error', () => setStatus(L.STATUS_FAILED));
}
