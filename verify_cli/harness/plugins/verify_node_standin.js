'use strict';
// Preloaded in every node process of a two-process run on the trusted side
// (NODE_OPTIONS=--require verify_node_standin, found through NODE_PATH).
//
// The tests never load the candidate's code: require() of a file the candidate may edit (the
// task's editable globs, $VERIFY_CANDIDATE_FILES) returns a stand-in whose every use crosses the
// channel ($VERIFY_CHANNEL) to the candidate server (candidate/node/candidate_server.js), which runs the
// candidate in a sandbox of its own. Values come back as plain data; the candidate's objects and
// functions as handles; its errors as errors of the same built-in type (or a subclass named like
// the candidate's class), so assert.throws(fn, TypeError) works. ESM imports of candidate files
// are refused (candidate/node/esm_guard.mjs): such a task declares isolation = "in-process".
const path = require('node:path');
const Module = require('node:module');

const channelPath = process.env.VERIFY_CHANNEL;
const filesJson = process.env.VERIFY_CANDIDATE_FILES;

/** Not an Error, so that assert.throws(fn, Error) is never satisfied by a broken channel. */
class ChannelBroken {
  constructor(cause) {
    this.name = 'ChannelBroken';
    this.message = `two-process grading: the channel to the candidate's process broke (${cause && cause.message}); `
      + 'every later call fails and the run cannot pass';
    this.stack = `${this.name}: ${this.message}`;
  }

  toString() {
    return this.stack;
  }
}

function globRegex(pattern) {
  let out = '';
  for (let i = 0; i < pattern.length;) {
    if (pattern.startsWith('**/', i)) {
      out += '(?:.*/)?';
      i += 3;
    } else if (pattern.startsWith('**', i)) {
      out += '.*';
      i += 2;
    } else if (pattern[i] === '*') {
      out += '[^/]*';
      i += 1;
    } else if (pattern[i] === '?') {
      out += '[^/]';
      i += 1;
    } else {
      out += pattern[i].replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      i += 1;
    }
  }
  return new RegExp(`^${out}$`);
}

const DENIED = new Set(['constructor', '__proto__', 'prototype', 'caller', 'arguments', '__defineGetter__',
  '__defineSetter__', '__lookupGetter__', '__lookupSetter__']);

function isAssertion(v) {
  return v instanceof Error && (v.code === 'ERR_ASSERTION' || v.name === 'AssertionError');
}

/** What the candidate may do with the objects the tests gave it: call them, read and set plain
 * attributes; never reach a constructor, a prototype, a function's source or a failed assertion. */
function guard(op, obj, name) {
  if (name === null) return;
  if (typeof name !== 'string' || DENIED.has(name) || name.startsWith('__')) {
    throw new TypeError(`the tests' objects do not serve ${op} ${String(name)}`);
  }
  if (typeof obj === 'function' && !(op === 'getattr' && (name === 'name' || name === 'length'))
      && !(op === 'method' && (name === 'call' || name === 'apply'))) {
    throw new TypeError(`the tests' functions can only be called (not ${op} ${name})`);
  }
  if (isAssertion(obj) && name !== 'name' && name !== 'code') {
    throw new TypeError('a failed assertion of the tests is not readable');
  }
}

// The same name as grading/two_process.py's NO_CANDIDATE_FILE: the candidate server never came
// up, an infrastructure fault (the grader reports infra_error, never a score). Only when no test
// process of this run has reached it before: after that, candidate code has run, and a server
// that went away is the candidate's doing (the run fails).
const NO_CANDIDATE_FILE = 'verify-no-candidate-process.txt';
const REACHED_FILE = 'verify-candidate-reached.txt';

function resultsFile(name) {
  const dir = process.env.VERIFY_RESULTS_DIR;
  return dir ? path.join(dir, name) : null;
}

function noteReached() {
  const file = resultsFile(REACHED_FILE);
  try {
    if (file) require('node:fs').writeFileSync(file, 'reached\n');
  } catch (e) {
    // a read-only results folder: nothing to note
  }
}

function noteUnreachable(message) {
  const fs = require('node:fs');
  const reached = resultsFile(REACHED_FILE);
  const file = resultsFile(NO_CANDIDATE_FILE);
  try {
    if (file && !fs.existsSync(reached)) fs.writeFileSync(file, message);
  } catch (e) {
    // nothing to note
  }
}

/** Whether the test file `file` is ESM or has an import statement or import() at all. */
function mayImport(file) {
  if (typeof file !== 'string' || !file) return false;
  if (/\.m[jt]s$/.test(file)) return true;
  try {
    return /(^|[^.\w$])import\s*[({'"`*\w]/m.test(require('node:fs').readFileSync(file, 'utf8'));
  } catch (e) {
    return true;
  }
}

function install() {
  const workdir = path.resolve(process.env.VERIFY_WORKDIR || process.cwd());
  const patterns = JSON.parse(filesJson || '[]').map(globRegex);
  const cache = new Map();
  let peer = null;

  const connect = () => {
    if (!peer) {
      const { SyncChannel } = require('./candidate/node/channel.js');
      const { Peer } = require('./candidate/node/rpc.js');
      let channel;
      try {
        // 20 s, or $VERIFY_CONNECT_SECONDS (the tests' own environment, set by the host), as verify_standin.py
        const connectSeconds = Number(process.env.VERIFY_CONNECT_SECONDS) || 20;
        channel = new SyncChannel({ mode: 'connect', path: channelPath, connectSeconds });
      } catch (e) {
        process.exitCode = 1;
        noteUnreachable(`cannot reach the candidate process at ${channelPath}: ${e.message}`);
        throw new ChannelBroken(e);
      }
      noteReached();
      channel.unref();
      peer = new Peer('trusted', channel, {
        guard,
        brokenAs: (e) => new ChannelBroken(e),
        onBroken: (e) => {
          process.exitCode = 1;
          process.stderr.write(`verify: ${new ChannelBroken(e).message}\n`);
        },
      });
      peer.codec.secret = isAssertion;
      peer.codec.onHold = (held) => (held ? channel.worker.ref() : channel.worker.unref());
    }
    return peer;
  };

  const candidateFile = (request, parent) => {
    if (typeof request !== 'string') return null;
    if (!(request.startsWith('./') || request.startsWith('../') || request.startsWith('/') || request === '.' || request === '..')) return null;
    const base = parent && parent.filename ? path.dirname(parent.filename) : process.cwd();
    const abs = path.resolve(base, request);
    for (const c of [abs, `${abs}.js`, `${abs}.cjs`, `${abs}.json`, path.join(abs, 'index.js')]) {
      const rel = path.relative(workdir, c);
      if (!rel || rel.startsWith('..') || path.isAbsolute(rel)) continue;
      const posix = rel.split(path.sep).join('/');
      if (patterns.some((re) => re.test(posix))) return posix;
    }
    return null;
  };

  const load = Module._load;
  Module._load = function verifyLoad(request, parent, isMain) {
    const rel = candidateFile(request, parent);
    if (rel === null) return load.apply(this, arguments);
    if (!cache.has(rel)) cache.set(rel, connect().request('import', { module: rel }));
    return cache.get(rel);
  };

  try {
    // A loader thread costs every process a good part of its start-up: only where the test
    // file can import at all (never in the `node --test` parent, which only starts processes).
    if (typeof Module.register === 'function' && !process.execArgv.includes('--test') && mayImport(process.argv[1])) {
      Module.register('./candidate/node/esm_guard.mjs', require('node:url').pathToFileURL(__filename), {
        data: { workdir, files: JSON.parse(filesJson || '[]') },
      });
    }
  } catch (e) {
    // No loader hooks on this runtime: an ESM import of a candidate file then fails to resolve
    // only when the file is absent; the task should declare isolation = "in-process".
  }
}

if (channelPath && filesJson) install();
