'use strict';
// execrl's function-call harness for JavaScript (and compiled TypeScript): execrl/sandbox/langs/node.py.
// Usage: node execrl_call.js PROGRAM.js < tests, where stdin holds one JSON line {"max_bytes": N} and
// then one line per test {"i": k, "entry_point": "name", "args": [...]}. It runs the program once, then
// calls each test's function and writes one JSON record per line to fd 3: {"kind": "loaded"} or
// {"kind": "program_error", ...}, then {"i": k, "status": "value" | "error" | "unserializable" |
// "too_large", ...}. Records carry returned values only: expected values never enter the sandbox, and
// the sandbox's harness validates every line (execrl/sandbox/zygote/harness.py, GroupState).
const fs = require('fs');
const vm = require('vm');
const writeSync = fs.writeSync;  // taken before the program runs, as child._Records does in Python
const stringify = JSON.stringify;
const RECORD_FD = 3;

function send(record) {
  const data = Buffer.from(stringify(record) + '\n', 'utf8');
  let offset = 0;
  while (offset < data.length) offset += writeSync(RECORD_FD, data, offset);
}

function errorFields(error) {
  if (error instanceof Error) {
    const stack = String(error.stack || '').split('\n').slice(0, 12).join('\n');
    return {type: String(error.name || 'Error'), message: String(error.message).slice(0, 2000), tb: stack};
  }
  let text;
  try { text = String(error); } catch (_) { text = '<unprintable>'; }
  return {type: 'Error', message: ('thrown: ' + text).slice(0, 2000), tb: ''};
}

function plain(key, value) {  // Map and Set as JSON can hold them; BigInt is not a JSON value
  if (value instanceof Map) return Object.fromEntries(value);
  if (value instanceof Set) return Array.from(value);
  return value;
}

function encode(value, maxBytes) {
  let text;
  try { text = stringify(value === undefined ? null : value, plain); } catch (error) {
    return {status: 'unserializable', type: typeof value, message: String(error.message).slice(0, 200)};
  }
  if (text === undefined) return {status: 'unserializable', type: typeof value, message: 'not a JSON value'};
  if (Buffer.byteLength(text, 'utf8') > maxBytes) return {status: 'too_large'};
  return {status: 'value', value: text};
}

function lookup(name, exported) {
  if (exported && typeof exported === 'object' && Object.prototype.hasOwnProperty.call(exported, name)) {
    return exported[name];
  }
  return vm.runInThisContext(name);  // the name is checked host-side: identifiers and dots only
}

async function runTest(test, exported, maxBytes) {
  const start = process.hrtime.bigint();
  const cpu = process.cpuUsage();
  let result;
  try {
    const fn = lookup(test.entry_point, exported);
    if (typeof fn !== 'function') {
      result = {status: 'error', type: 'TypeError', message: `${test.entry_point} is not a function`};
    } else {
      result = encode(await fn(...test.args), maxBytes);
    }
  } catch (error) {
    result = {status: 'error', ...errorFields(error)};
  }
  const used = process.cpuUsage(cpu);
  result.cpu_s = (used.user + used.system) / 1e6;
  result.wall_s = Number(process.hrtime.bigint() - start) / 1e9;
  return result;
}

async function main() {
  const lines = fs.readFileSync(0, 'utf8').split('\n').filter((line) => line.length > 0);
  const header = JSON.parse(lines[0]);
  const tests = lines.slice(1).map((line) => JSON.parse(line));
  const path = process.argv[2];
  const candidateModule = {exports: {}};
  globalThis.require = require;
  globalThis.module = candidateModule;
  globalThis.exports = candidateModule.exports;
  try {
    vm.runInThisContext(fs.readFileSync(path, 'utf8'), {filename: path});
  } catch (error) {
    send({kind: 'program_error', ...errorFields(error)});
    return;
  }
  send({kind: 'loaded'});
  for (const test of tests) {
    const result = await runTest(test, candidateModule.exports, header.max_bytes);
    send({i: test.i, ...result});
  }
}

main().then(() => process.exit(0));
