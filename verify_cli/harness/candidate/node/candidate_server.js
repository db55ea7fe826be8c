'use strict';
// The candidate server of two-process grading for node (docs/wire-protocol.md), run in the
// candidate's sandbox with the work folder as its working directory:
//
//   node candidate_server.js            listen on $VERIFY_CHANNEL (the first connection is served
//                                       here, each later one by a fresh process: --fd 3)
//   node candidate_server.js --fd 3     serve the connection inherited as file descriptor 3
//
// It requires the candidate's files when the trusted side asks (`import`), keeps every object
// and function of the candidate here and hands out handles, serves getattr / setattr / call /
// method / release on them and `exec` (a program run in this sandbox), and calls the trusted
// side's callbacks synchronously when the candidate's code calls them.
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { SyncChannel } = require('./channel.js');
const { Peer, Encoded } = require('./rpc.js');

const workdir = path.resolve(process.env.VERIFY_WORKDIR || process.cwd());

function inside(root, p) {
  const rel = path.relative(root, p);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

function importModule(msg, peer) {
  if (typeof msg.module !== 'string' || !msg.module) throw new TypeError('import needs a module path');
  const file = path.resolve(workdir, msg.module);
  if (!inside(workdir, file)) throw new Error(`${msg.module} is outside the work folder`);
  return new Encoded(peer.codec.encodeModule(require(file)));
}

function execProgram(msg) {
  if (!Array.isArray(msg.argv) || !msg.argv.length || !msg.argv.every((a) => typeof a === 'string')) {
    throw new TypeError('exec needs argv, a non-empty list of strings');
  }
  const env = {};
  if (msg.env && typeof msg.env === 'object') {
    for (const [k, v] of Object.entries(msg.env)) if (typeof v === 'string') env[k] = v;
  }
  const stdin = msg.stdin && typeof msg.stdin === 'object' && typeof msg.stdin.$bytes === 'string'
    ? Buffer.from(msg.stdin.$bytes, 'base64') : (typeof msg.stdin === 'string' ? msg.stdin : undefined);
  const timeout = msg.timeout && typeof msg.timeout === 'object' ? Number(msg.timeout.$float) : Number(msg.timeout);
  const cwd = typeof msg.cwd === 'string' ? path.resolve(workdir, msg.cwd) : workdir;
  if (!inside(workdir, cwd)) throw new Error('exec: cwd is outside the work folder');
  const r = spawnSync(msg.argv[0], msg.argv.slice(1), {
    input: stdin, env: Object.assign({}, process.env, env), cwd,
    timeout: Number.isFinite(timeout) && timeout > 0 ? Math.round(timeout * 1000) : undefined,
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error && r.error.code === 'ENOENT') throw Object.assign(new Error(`no such program: ${msg.argv[0]}`), { code: 'ENOENT' });
  return { returncode: r.status === null ? -1 : r.status, stdout: r.stdout || Buffer.alloc(0), stderr: r.stderr || Buffer.alloc(0) };
}

function main() {
  const fdArg = process.argv.indexOf('--fd');
  const channelPath = process.env.VERIFY_CHANNEL;
  let channel;
  if (fdArg !== -1) {
    channel = new SyncChannel({ mode: 'fd', fd: Number(process.argv[fdArg + 1]) });
  } else {
    if (!channelPath) {
      process.stderr.write('verify candidate server: VERIFY_CHANNEL is not set\n');
      process.exit(2);
    }
    channel = new SyncChannel({ mode: 'listen', path: channelPath, serverArgv: [__filename, '--fd', '3'] });
  }
  const peer = new Peer('candidate', channel, {
    ops: {
      import: (msg, p) => importModule(msg, p),
      exec: (msg) => execProgram(msg),
    },
    onBroken: () => {
      // The trusted side went away (or sent garbage): nothing left to serve on this connection.
      if (fdArg !== -1) process.exit(0);
    },
  });
  if (process.env.VERIFY_CANDIDATE_READY) {
    // For a launcher that waits for the listening socket (tests, the grader's plumbing).
    process.stdout.write('ready\n');
  }
}

main();
