'use strict';
// execrl's transpile-only TypeScript build (execrl/sandbox/langs/node.py, "typescript-transpile"): every
// .ts file of the work directory (not .d.ts, not under .execrl/ or node_modules/) becomes the .js file
// beside it, types ignored, as SandboxFusion runs TypeScript (tsx). Syntax errors are compile errors,
// reported as tsc reports them (file(line,col): error TSnnnn: message); exit status 1 then, else 0.
const fs = require('fs');
const path = require('path');
const ts = require('/usr/share/nodejs/typescript/lib/typescript.js');

const OPTIONS = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.CommonJS,
  esModuleInterop: true,
  newLine: ts.NewLineKind.LineFeed,
};
const SKIP = new Set(['.execrl', 'node_modules']);

function sources(dir) {
  const found = [];
  for (const entry of fs.readdirSync(dir, {withFileTypes: true})) {
    const full = dir === '.' ? entry.name : path.join(dir, entry.name);
    if (entry.isDirectory() && !SKIP.has(entry.name)) found.push(...sources(full));
    else if (entry.isFile() && full.endsWith('.ts') && !full.endsWith('.d.ts')) found.push(full);
  }
  return found;
}

let failed = false;
for (const file of sources('.')) {
  const text = fs.readFileSync(file, 'utf8');
  const out = ts.transpileModule(text, {compilerOptions: OPTIONS, fileName: file, reportDiagnostics: true});
  for (const diagnostic of out.diagnostics || []) {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    const where = diagnostic.file ? diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start) : null;
    const at = where ? `(${where.line + 1},${where.character + 1})` : '';
    process.stdout.write(`${file}${at}: error TS${diagnostic.code}: ${message}\n`);
    failed = true;
  }
  fs.writeFileSync(file.slice(0, -3) + '.js', out.outputText);
}
process.exitCode = failed ? 1 : 0;
