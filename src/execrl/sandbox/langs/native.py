"""Languages compiled to a native binary inside the jail: C, C++, Rust, Go (stdin/stdout tests).

Flags follow what the peers use (SandboxFusion, MultiPL-E; ``../shared/research/scale.md`` D) plus
optimisation, so that the run-time limits judge the algorithm rather than a debug build. ``c`` is the
registration to copy for a new compiled language.

* Rust: ``--edition 2021`` (rustc's default is 2015, which rejects code written today), linked with
  ``gcc`` named by path (rustc's default linker ``cc`` is a Debian alternative: one link less to
  resolve, and the host check finds a missing ``gcc``). ``codegen-units=1`` keeps rustc to a few
  threads (each thread counts against the pids limit) and costs nothing on programs this size.
* Go: GOPATH mode (``GO111MODULE=off``) with Debian's Go libraries as ``GOPATH``
  (``/usr/share/gocode``: testify when ``golang-github-stretchr-testify-dev`` is installed), no proxy
  and no cgo: nothing is fetched and no C compiler is started. ``GOCACHE`` is the warm read-only cache
  of the standard library (``gocache.py``: without it every program importing ``net/http`` recompiled
  it: 6.2 s against 0.6 s warm), or a per-execution one in the work directory where it cannot be
  built. The ``go`` command runs the compiler and the linker as child processes with a few threads
  each, hence the higher ``min_processes``. ``go_test`` is SandboxFusion's mode of that name: ``go
  test`` of the program (a ``_test.go`` file of ``package main``) as the run itself, no separate
  compile step, so its ``execution_time`` includes the build as SandboxFusion's does; the verdict is
  ``go test``'s exit status (0 when every test passed; a build or vet failure is a failed run, as
  there).
* C++ links ``-lcrypto -lssl -lpthread`` when this host's ``g++`` finds them (``optional_libraries``;
  SandboxFusion's runner adds the same flags after a link test; ``libssl-dev`` provides the first two).

Every build writes its output (``main``) into ``languages.BUILD_DIR``, never a name a request's files
could use.
"""

from __future__ import annotations

from execrl.sandbox.langs import gocache
from execrl.sandbox.langs.registry import BUILD_DIR, Language, register_language

BINARY = f"{BUILD_DIR}/main"

C = register_language(
    Language(
        "c",
        "binary",
        "main.c",
        frozenset({"io"}),
        compile_argv=("/usr/bin/gcc", "-O2", "-std=gnu17", "-pipe", "-o", BINARY, "{source}", "-lm"),
        run_argv=(f"./{BINARY}",),
        compile_timeout_s=30.0,
        package="gcc",
    )
)

CPP = register_language(
    Language(
        "cpp",
        "binary",
        "main.cpp",
        frozenset({"io"}),
        compile_argv=("/usr/bin/g++", "-O2", "-std=c++17", "-pipe", "-o", BINARY, "{source}"),
        run_argv=(f"./{BINARY}",),
        compile_timeout_s=30.0,
        package="g++",
        optional_libraries=("crypto", "ssl", "pthread"),
    )
)

RUST = register_language(
    Language(
        "rust",
        "binary",
        "main.rs",
        frozenset({"io"}),
        compile_argv=(
            "/usr/bin/rustc",
            "--edition",
            "2021",
            "-O",
            "-C",
            "codegen-units=1",
            "-C",
            "linker=/usr/bin/gcc",
            "-o",
            BINARY,
            "{source}",
        ),
        run_argv=(f"./{BINARY}",),
        compile_timeout_s=30.0,
        package="rustc",
        tools=("/usr/bin/gcc",),
    )
)

GO = register_language(
    Language(
        "go",
        "binary",
        "main.go",
        frozenset({"io"}),
        compile_argv=(gocache.GO, "build", "-o", BINARY, "{source}"),
        run_argv=(f"./{BINARY}",),
        compile_timeout_s=30.0,
        package="golang-go",
        env=gocache.BASE_ENV,
        env_hook=gocache.job_env,
        min_processes=64,
    )
)

GO_TEST = register_language(
    Language(
        "go_test",
        "binary",
        "main_test.go",
        frozenset(),
        run_argv=(gocache.GO, "test", "{source}"),
        package="golang-go",
        env=gocache.BASE_ENV,
        env_hook=gocache.job_env,
        min_processes=64,
    )
)
