'use strict';
// The candidate-exec runner for images without Python (node's twin of verify_candidate_exec.py):
// `node verify_candidate_exec.js --channel SOCKET -- PROGRAM ARGS...` sends one `exec` request
// (docs/wire-protocol.md) with this process's environment, working folder and standard input,
// writes the program's output to its own streams and exits with the program's status (128 + N
// when a signal N ended it). verify_candidate_exec.sh picks this runner or the Python one.
const fs = require('node:fs');
const net = require('node:net');

function fail(message, code) {
  process.stderr.write(`verify_candidate_exec: ${message}\n`);
  process.exit(code);
}

function readStdin() {
  try {
    return fs.readFileSync(0);
  } catch (e) {
    return Buffer.alloc(0); // no stdin (closed, a terminal that cannot be read whole)
  }
}

function field(dict, name) {
  const pair = (dict && Array.isArray(dict.$dict) ? dict.$dict : []).find((p) => p[0] === name);
  return pair === undefined ? undefined : pair[1];
}

function main(argv) {
  if (argv.length < 4 || argv[0] !== '--channel' || argv[2] !== '--') {
    fail('usage: verify_candidate_exec.js --channel SOCKET -- PROGRAM [ARGS...]', 2);
  }
  const program = argv.slice(3);
  const stdin = process.stdin.isTTY ? Buffer.alloc(0) : readStdin();
  const vars = { ...process.env };
  if (vars.VERIFY_EXEC_NODE_OPTIONS !== undefined) { // set aside by verify_candidate_exec.sh
    vars.NODE_OPTIONS = vars.VERIFY_EXEC_NODE_OPTIONS;
    delete vars.VERIFY_EXEC_NODE_OPTIONS;
  }
  const env = Object.entries(vars).filter(([, v]) => typeof v === 'string');
  const body = Buffer.from(JSON.stringify({
    id: 1, op: 'exec', argv: program, env: { $dict: env }, cwd: process.cwd(),
    stdin: { $bytes: stdin.toString('base64') }, timeout: null,
  }), 'utf8');
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length, 0);
  const chunks = [];
  // A cold candidate's server may still be starting (its socket not bound yet): wait for it
  // (10 s, or $VERIFY_EXEC_CONNECT_SECONDS), as verify_candidate_exec.py does.
  const deadline = Date.now() + 1000 * (Number(process.env.VERIFY_EXEC_CONNECT_SECONDS) || 10);
  const refusedUntil = Math.min(deadline, Date.now() + 1000); // bound, not listening yet (or dead)
  let sock;
  const connect = () => {
    sock = net.createConnection(argv[1]);
    sock.on('error', (e) => {
      if (!chunks.length && Date.now() < (e.code === 'ECONNREFUSED' ? refusedUntil : e.code === 'ENOENT' ? deadline : 0)) {
        setTimeout(connect, 5);
        return;
      }
      fail(`cannot reach the candidate sandbox: ${e.message}`, 125);
    });
    sock.on('connect', () => sock.write(Buffer.concat([head, body])));
    sock.on('data', (d) => onData(d));
    sock.on('end', () => fail('the candidate sandbox closed the channel', 125));
  };
  const onData = (d) => {
    chunks.push(d);
    const all = Buffer.concat(chunks);
    if (all.length < 4 || all.length < 4 + all.readUInt32BE(0)) return;
    sock.destroy();
    const reply = JSON.parse(all.subarray(4, 4 + all.readUInt32BE(0)).toString('utf8'));
    if (reply.error) {
      const type = reply.error.type;
      fail(`${type}: ${reply.error.message}`, type === 'FileNotFoundError' || type === 'PermissionError' ? 126 : 125);
    }
    const bytes = (v) => Buffer.from((v && v.$bytes) || '', 'base64');
    fs.writeSync(1, bytes(field(reply.ok, 'stdout')));
    fs.writeSync(2, bytes(field(reply.ok, 'stderr')));
    const code = Number(field(reply.ok, 'returncode'));
    process.exit(code < 0 ? 128 - code : code);
  };
  connect();
}

main(process.argv.slice(2));
