// Node's globals and I/O modules as `any` (and `console`: tsc runs without the DOM library), for TypeScript programs compiled in execrl's sandbox: Debian
// ships no @types/node (execrl/sandbox/langs/node.py).
declare var require: any;
declare var process: any;
declare var module: any;
declare var exports: any;
declare var Buffer: any;
declare var __dirname: string;
declare var __filename: string;
declare var console: any;
declare function setTimeout(callback: (...args: any[]) => void, ms?: number, ...args: any[]): any;
declare function setInterval(callback: (...args: any[]) => void, ms?: number, ...args: any[]): any;
declare function clearTimeout(handle: any): void;
declare function clearInterval(handle: any): void;
declare module "fs";
declare module "readline";
declare module "assert";
declare module "util";
declare module "os";
declare module "path";
declare module "node:fs";
declare module "node:readline";
declare module "node:assert";
declare module "node:util";
declare module "node:process";
