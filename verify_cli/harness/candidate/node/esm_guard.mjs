// Loader hook of the trusted side (registered by verify_node_standin.js): an ESM import of a
// file the candidate may edit is refused, never loaded. (CommonJS require() gets a stand-in; an
// ESM task that needs the candidate's module declares isolation = "in-process".)
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let workdir = '';
let patterns = [];

function globRegex(pattern) {
  let out = '';
  for (let i = 0; i < pattern.length;) {
    if (pattern.startsWith('**/', i)) { out += '(?:.*/)?'; i += 3; }
    else if (pattern.startsWith('**', i)) { out += '.*'; i += 2; }
    else if (pattern[i] === '*') { out += '[^/]*'; i += 1; }
    else if (pattern[i] === '?') { out += '[^/]'; i += 1; }
    else { out += pattern[i].replace(/[.*+?^${}()|[\]\\]/g, '\\$&'); i += 1; }
  }
  return new RegExp(`^${out}$`);
}

export function initialize(data) {
  workdir = data.workdir;
  patterns = data.files.map(globRegex);
}

export async function resolve(specifier, context, nextResolve) {
  const result = await nextResolve(specifier, context);
  if (result.url.startsWith('file:')) {
    const rel = path.relative(workdir, fileURLToPath(result.url));
    const posix = rel.split(path.sep).join('/');
    if (rel && !rel.startsWith('..') && !path.isAbsolute(rel) && patterns.some((re) => re.test(posix))) {
      throw new Error(`two-process grading: ${posix} is the candidate's file and cannot be imported as ESM by the tests `
        + '(use require(), or declare isolation = "in-process" in task.toml)');
    }
  }
  return result;
}
