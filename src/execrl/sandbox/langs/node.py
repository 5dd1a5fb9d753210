"""JavaScript (Node) and TypeScript (compiled with ``tsc``, run with Node): stdin/stdout and call tests.

Call tests run ``execrl_call.js``: it runs the program once with ``vm.runInThisContext`` (so top-level
``function``/``const`` declarations are found by name, as MultiPL-E's concatenated tests find them, and
a failing top level is a ``program_error`` with its stack), then calls each test's function, awaiting a
returned promise, and writes the returned value as JSON to fd 3. ``Map`` and ``Set`` are written as an
object and an array; ``undefined`` as ``null``; a ``BigInt`` is not a JSON value (``unserializable``).

TypeScript type errors are compile errors, as in MultiPL-E (``tsc`` exits non-zero). Debian ships no
``@types/node``, so ``node_globals.d.ts`` declares the few Node globals and modules programs use for I/O
(``require``, ``process``, ``fs``, ``readline``...) as ``any``; ``tsc`` (about 50 MB of JavaScript to
load) dominates a TypeScript execution's time (``TSC``).
"""

from __future__ import annotations

from pathlib import Path

from execrl.sandbox.languages import CallHarness, Language, register_language

HERE = Path(__file__).parent
CALL_JS = ("__execrl_call.js", (HERE / "execrl_call.js").read_text(encoding="utf-8"))
NODE_GLOBALS = ("node_globals.d.ts", (HERE / "node_globals.d.ts").read_text(encoding="utf-8"))
ENTRY_POINT = r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*"  # evaluated by name in the harness: no code

JAVASCRIPT = register_language(
    Language(
        "javascript",
        "binary",
        "main.js",
        frozenset({"io", "call"}),
        run_argv=("/usr/bin/node", "{source}"),
        package="nodejs",
        call=CallHarness(
            files=(CALL_JS,), run_argv=("/usr/bin/node", CALL_JS[0], "{source}"), entry_point=ENTRY_POINT
        ),
    )
)

# tsc.js run by node directly (``/usr/bin/tsc`` is a ``#!/usr/bin/env node`` script); ES2022 without the DOM
# library and without checking the libraries' own declarations: 0.7 s of CPU and 110 MB instead of
# 3 s and 1.2 GB for the defaults (which load and check ``lib.dom.d.ts``), measured on a hello world.
TSC = (
    "/usr/bin/node",
    "/usr/share/nodejs/typescript/lib/tsc.js",
    *("--target", "es2022", "--lib", "es2022", "--skipLibCheck", "--module", "commonjs"),
    *("--pretty", "false", "--newLine", "lf"),
)
TYPESCRIPT = register_language(
    Language(
        "typescript",
        "binary",
        "main.ts",
        frozenset({"io", "call"}),
        compile_argv=(*TSC, "{source}", NODE_GLOBALS[0]),
        run_argv=("/usr/bin/node", "{stem}.js"),
        compile_timeout_s=30.0,
        package="node-typescript",
        files=(NODE_GLOBALS,),
        min_memory_mb=256,  # tsc peaks at about 110 MB on a hello world, more on larger programs
        tools=("/usr/bin/tsc",),
        call=CallHarness(
            files=(CALL_JS,), run_argv=("/usr/bin/node", CALL_JS[0], "{stem}.js"), entry_point=ENTRY_POINT
        ),
    )
)
