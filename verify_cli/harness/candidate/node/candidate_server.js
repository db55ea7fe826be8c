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
const fs = require('node:fs');
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

const EXEC_OUTPUT_BYTES = 16 * 1024 * 1024;

// Nothing a program started outlives it. The Python candidate server sweeps with getsid(2);
// node has none, so a few lines of perl (perl-base is in every Debian image) do it: once no exec
// of this sandbox's servers is running, every process outside the servers' own session is
// killed, the pid namespace's init (1) and the first server (2) spared. Only where this server
// is pid 2, i.e. this sandbox has a pid namespace of its own (bwrap, docker nodes): perl checks
// that its parent is pid 2 too. The process backend shares the host's and is left alone; there
// pid 2 is the kernel's kthreadd, whose session (0) is every process's where the host's init
// never made one, so "pid 2 is in perl's own session" alone once swept a host (dockerd killed).
// Markers of running execs are files in /dev/shm/.verify-exec (the candidate's own /dev/shm).
const SWEEP_NR = { x64: 124, arm64: 156 }[process.arch]; // the getsid system call
const SWEEPS = SWEEP_NR !== undefined && process.pid === 2;
const BUSY_DIR = '/dev/shm/.verify-exec';
const SWEEP = `
my ($nr, $busy) = @ARGV;
exit 0 if getppid() != 2;
my $mine = syscall($nr, 0);
exit 0 if $mine < 0 || syscall($nr, 2) != $mine;
my %killed;
for (1 .. 100) {
  opendir(my $d, $busy) or exit 0;
  my @running = grep { !/^\\./ } readdir($d);
  closedir($d);
  exit 0 if @running;
  my $top = fork();
  if (!defined $top) { $top = 32768 } elsif ($top == 0) { exit 0 } else { waitpid($top, 0) }
  my @found;
  for my $pid (3 .. $top + 64) {
    next if $pid == $$ || $killed{$pid};
    my $sid = syscall($nr, $pid);
    push @found, $pid if $sid >= 0 && $sid != $mine;
  }
  last unless @found;
  kill 9, @found;
  $killed{$_} = 1 for @found;
}
`;

function findProgram(name, env, cwd) {
  const exe = (p) => { try { fs.accessSync(p, fs.constants.X_OK); return fs.statSync(p).isFile(); } catch { return false; } };
  if (name.includes('/')) return exe(path.resolve(cwd, name));
  return String(env.PATH || '').split(':').some((d) => d && exe(path.join(d, name)));
}

function busy() {
  try {
    fs.mkdirSync(BUSY_DIR, { recursive: true });
    const marker = path.join(BUSY_DIR, String(process.pid));
    fs.writeFileSync(marker, '');
    return marker;
  } catch {
    return null;
  }
}

function idle(marker) {
  try { fs.unlinkSync(marker); } catch { /* gone already */ }
  spawnSync('perl', ['-e', SWEEP, String(SWEEP_NR), BUSY_DIR], { stdio: 'ignore', timeout: 10000 });
}

/** `exec`: run a program in this sandbox (how a CLI task's tests start the candidate). */
function execProgram(msg, peer) {
  const c = peer.codec;
  const argv = c.decode(msg.argv);
  if (!Array.isArray(argv) || !argv.length || !argv.every((a) => typeof a === 'string')) {
    throw new TypeError('exec needs argv, a non-empty list of strings');
  }
  const env = {};
  const envIn = msg.env === undefined || msg.env === null ? new Map() : c.decode(msg.env);
  for (const [k, v] of envIn instanceof Map ? envIn : Object.entries(envIn)) {
    if (typeof k === 'string' && typeof v === 'string') env[k] = v;
  }
  const stdin = msg.stdin === undefined || msg.stdin === null ? undefined : c.decode(msg.stdin);
  const timeout = msg.timeout === undefined || msg.timeout === null ? null : Number(c.decode(msg.timeout));
  const cwd = typeof msg.cwd === 'string' ? path.resolve(workdir, msg.cwd) : workdir;
  const runEnv = msg.env ? env : process.env;
  // The program in a session of its own (`setsid`, which execs it: same pid, same status), so
  // that the sweep after it can tell what it left running from this server's own processes
  // (where this server sweeps at all: no marker and no setsid on the process backend).
  const own = SWEEPS && findProgram(argv[0], runEnv, cwd) && findProgram('setsid', process.env, cwd);
  const marker = own ? busy() : null;
  let r;
  try {
    r = spawnSync(own ? 'setsid' : argv[0], own ? argv : argv.slice(1), {
      input: stdin, env: runEnv, cwd,
      timeout: timeout !== null && Number.isFinite(timeout) && timeout > 0 ? Math.ceil(timeout * 1000) : undefined,
      killSignal: 'SIGKILL',
      maxBuffer: EXEC_OUTPUT_BYTES,
    });
  } finally {
    if (marker) idle(marker);
  }
  if (r.error && r.error.code === 'ETIMEDOUT') {
    throw Object.assign(new Error(`${argv[0]} timed out after ${timeout} s`), { name: 'TimeoutError' });
  }
  if (r.error && r.error.code === 'ENOENT') throw Object.assign(new Error(`no such program: ${argv[0]}`), { code: 'ENOENT' });
  const out = (b) => (b || Buffer.alloc(0)).subarray(0, EXEC_OUTPUT_BYTES);
  const returncode = r.status !== null ? r.status : -(require('node:os').constants.signals[r.signal] || 9);
  return new Encoded({ $dict: [['returncode', returncode], ['stdout', c.encode(out(r.stdout))],
    ['stderr', c.encode(out(r.stderr))]] });
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
      exec: (msg, p) => execProgram(msg, p),
    },
    lingerMs: 2,
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
