"""JavaScript (Node) and TypeScript (compiled to JavaScript, run with Node): stdin/stdout and call tests.

Call tests run ``execrl_call.js``: it runs the program once with ``vm.runInThisContext`` (so top-level
``function``/``const`` declarations are found by name, as MultiPL-E's concatenated tests find them, and
a failing top level is a ``program_error`` with its stack), then calls each test's function, awaiting a
returned promise, and writes the returned value as JSON to fd 3. ``Map`` and ``Set`` are written as an
object and an array; ``undefined`` as ``null``; a ``BigInt`` is not a JSON value (``unserializable``).

Choices, each for a suite that failed without it (issue 28):

* ``typescript``: ``tsc`` type-checks, and type errors are compile errors, as in MultiPL-E (``tsc`` exits
  non-zero), with ``esModuleInterop`` (``import fs from "fs"`` works at run time, as under SandboxFusion's
  ``tsx``). Debian ships no ``@types/node``, so ``node_globals.d.ts`` declares every Node built-in
  module (``crypto``, ``fs/promises``, ``node:*``...) and ``lodash`` as ``any``, and Node's globals,
  each class-like one (``Buffer``, ``TextEncoder``, ``URL``...) also as a type, and ``NodeJS.*`` types:
  programs typed against Node's API compile, checked only against ES2022 itself. ``tsc`` (about 50 MB
  of JavaScript to load) dominates a TypeScript execution's time (``TSC``).
* ``typescript-transpile``: types ignored, as SandboxFusion runs TypeScript (``tsx``): each ``.ts`` file
  is transpiled to the ``.js`` beside it (``execrl_transpile.js``, TypeScript's ``transpileModule``);
  only syntax errors are compile errors. For suites whose templates do not type-check (MBXP's
  TypeScript tests reference an undefined ``x`` in their failure messages); ``/run_code``'s
  ``typescript`` runs this one by default (``fusion.py``).
* ``-asserts`` variants (``javascript-asserts``, ``typescript-asserts``, ``typescript-transpile-asserts``):
  a failed ``console.assert`` makes the run exit 1 (``execrl_console_assert.js``, loaded by ``node
  --require``); by default Node only prints "Assertion failed" and exits 0, which SandboxFusion keeps
  and HumanEval-X's JavaScript tests rely on, so a reward read from the exit status alone pays wrong
  programs there.
* ``NODE_PATH`` is Debian's ``/usr/share/nodejs``: packages installed from Debian (``node-lodash``,
  which MBXP's JavaScript and TypeScript tests ``require``) load as in SandboxFusion's runtime.
* A build writes ``x.js`` beside each ``x.ts`` (Node resolves a relative ``require`` from the module's
  own path), so a request's file of that name is refused (``Language.emits_beside``); the support
  files live in ``languages.BUILD_DIR``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from execrl.sandbox.langs.registry import BUILD_DIR, CallHarness, Language, register_language

HERE = Path(__file__).parent
CALL_JS = ("__execrl_call.js", (HERE / "execrl_call.js").read_text(encoding="utf-8"))
NODE_GLOBALS = (f"{BUILD_DIR}/node_globals.d.ts", (HERE / "node_globals.d.ts").read_text(encoding="utf-8"))
TRANSPILE_JS = (f"{BUILD_DIR}/transpile.js", (HERE / "execrl_transpile.js").read_text(encoding="utf-8"))
ASSERT_JS = (
    f"{BUILD_DIR}/console_assert.js",
    (HERE / "execrl_console_assert.js").read_text(encoding="utf-8"),
)
ENTRY_POINT = r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*"  # evaluated by name in the harness: no code
NODE = "/usr/bin/node"
NODE_ENV = (("NODE_PATH", "/usr/share/nodejs"),)

JAVASCRIPT = register_language(
    Language(
        "javascript",
        "binary",
        "main.js",
        frozenset({"io", "call"}),
        run_argv=(NODE, "{source}"),
        package="nodejs",
        env=NODE_ENV,
        call=CallHarness(files=(CALL_JS,), run_argv=(NODE, CALL_JS[0], "{source}"), entry_point=ENTRY_POINT),
    )
)

# tsc.js run by node directly (``/usr/bin/tsc`` is a ``#!/usr/bin/env node`` script); ES2022 without the DOM
# library and without checking the libraries' own declarations: 0.7 s of CPU and 110 MB instead of
# 3 s and 1.2 GB for the defaults (which load and check ``lib.dom.d.ts``), measured on a hello world.
TSC = (
    NODE,
    "/usr/share/nodejs/typescript/lib/tsc.js",
    *("--target", "es2022", "--lib", "es2022", "--skipLibCheck", "--module", "commonjs"),
    *("--esModuleInterop", "--pretty", "false", "--newLine", "lf"),
)
TYPESCRIPT = register_language(
    Language(
        "typescript",
        "binary",
        "main.ts",
        frozenset({"io", "call"}),
        compile_argv=(*TSC, "{source}", NODE_GLOBALS[0]),
        run_argv=(NODE, "{stem}.js"),
        compile_timeout_s=30.0,
        package="node-typescript",
        env=NODE_ENV,
        files=(NODE_GLOBALS,),
        min_memory_mb=256,  # tsc peaks at about 110 MB on a hello world, more on larger programs
        tools=("/usr/bin/tsc",),
        emits_beside=(".ts", ".js"),
        call=CallHarness(files=(CALL_JS,), run_argv=(NODE, CALL_JS[0], "{stem}.js"), entry_point=ENTRY_POINT),
    )
)
TYPESCRIPT_TRANSPILE = register_language(
    dataclasses.replace(
        TYPESCRIPT,
        name="typescript-transpile",
        compile_argv=(NODE, TRANSPILE_JS[0]),
        files=(TRANSPILE_JS,),
        min_memory_mb=128,
    )
)


def with_asserts(language: Language) -> Language:
    """``language`` whose runs fail on a failed ``console.assert`` (registered as ``<name>-asserts``)."""
    node, *rest = language.run_argv
    return dataclasses.replace(
        language,
        name=f"{language.name}-asserts",
        run_argv=(node, "--require", f"./{ASSERT_JS[0]}", *rest),
        files=(*language.files, ASSERT_JS),
    )


for _language in (JAVASCRIPT, TYPESCRIPT, TYPESCRIPT_TRANSPILE):
    register_language(with_asserts(_language))
