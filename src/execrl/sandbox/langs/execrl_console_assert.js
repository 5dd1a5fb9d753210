'use strict';
// Loaded with `node --require` by execrl's "-asserts" JavaScript and TypeScript languages
// (execrl/sandbox/langs/node.py): a failed console.assert still prints "Assertion failed" as Node does,
// and the process then ends with exit status 1 however it ends (a normal end, or process.exit(0)),
// so that HumanEval-X's console.assert tests fail a wrong program instead of exiting 0.
const original = console.assert;
let failures = 0;
console.assert = function assert(value, ...message) {
  if (!value) failures += 1;
  return original.call(this, value, ...message);
};
process.on('exit', () => {
  if (failures > 0) process.exitCode = 1;
});
