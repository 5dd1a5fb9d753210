"""Languages compiled to a native binary inside the jail: C, C++, Rust, Go (stdin/stdout tests).

Flags follow what the peers use (SandboxFusion, MultiPL-E; ``../shared/research/scale.md`` D) plus
optimisation, so that the run-time limits judge the algorithm rather than a debug build. ``c`` is the
registration to copy for a new compiled language.

* Rust: ``--edition 2021`` (rustc's default is 2015, which rejects code written today), linked with
  ``gcc`` named by path (rustc's default linker ``cc`` is a Debian alternative: one link less to
  resolve, and the host check finds a missing ``gcc``). ``codegen-units=1`` keeps rustc to a few threads (each thread counts against the
  pids limit) and costs nothing on programs this size.
* Go: ``go build`` needs a writable build cache and ``GOPATH``; both live in the work directory's tmpfs,
  so each execution starts cold and leaves nothing behind (Debian's Go 1.19 ships the standard library
  pre-compiled, so a cold build of a small program still takes well under a second of CPU). GOPATH mode
  (``GO111MODULE=off``), no proxy and no cgo: nothing is fetched and no C compiler is started. The
  ``go`` command runs the compiler and the linker as child processes with a few threads each, hence
  the higher ``min_processes``.
"""

from __future__ import annotations

from execrl.sandbox.languages import Language, register_language

C = register_language(
    Language(
        "c",
        "binary",
        "main.c",
        frozenset({"io"}),
        compile_argv=("/usr/bin/gcc", "-O2", "-std=gnu17", "-pipe", "-o", "main", "{source}", "-lm"),
        run_argv=("./main",),
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
        compile_argv=("/usr/bin/g++", "-O2", "-std=c++17", "-pipe", "-o", "main", "{source}"),
        run_argv=("./main",),
        compile_timeout_s=30.0,
        package="g++",
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
            "main",
            "{source}",
        ),
        run_argv=("./main",),
        compile_timeout_s=30.0,
        package="rustc",
        tools=("/usr/bin/gcc",),
    )
)

GO_CACHE = "./.cache"  # in the work directory (``child.in_workdir``): per execution, never shared
GO = register_language(
    Language(
        "go",
        "binary",
        "main.go",
        frozenset({"io"}),
        compile_argv=("/usr/bin/go", "build", "-o", "main", "{source}"),
        run_argv=("./main",),
        compile_timeout_s=30.0,
        package="golang-go",
        env=(
            ("GOCACHE", f"{GO_CACHE}/go-build"),
            ("GOPATH", f"{GO_CACHE}/go"),
            ("GO111MODULE", "off"),
            ("GOPROXY", "off"),
            ("CGO_ENABLED", "0"),
        ),
        min_processes=64,
    )
)
