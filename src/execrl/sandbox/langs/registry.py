"""Language registry: adding a language is one ``register_language`` call (this package holds the
built-in ones, one small module per family; ``native.py``'s ``c`` is the registration to copy).

A language is either run in-process by the Python harness (``mode="python"``: the host interpreter and
its standard library, no site-packages) or run by ``execve`` inside the sandbox (``mode="binary"``),
after an optional compile step under a compile time limit (the request's ``Limits.compile_timeout_s``,
else the language's default); compiler output comes back as ``compile_output`` and a failed compile is
``Verdict.COMPILE_ERROR``. Compile and run happen in the same jail, in the per-execution tmpfs work
directory; a compiler's cache or home (``env``) points into it, so nothing persists between executions.

``test_kinds`` says which test styles make sense for the language. ``call`` tests of a binary language
run through a harness written in that language (``CallHarness``): it reads the tests' arguments from
stdin, calls the function and writes one record per test to fd 3 (``CALL_RECORD_FD``), which the
sandbox's harness validates exactly as it validates a Python candidate's records (``testgroups.GroupState``).

Toolchains come from Debian packages (``package``; ``scripts/setup.sh --system`` installs them). A
language whose toolchain is missing on this host stays registered but ``unavailable``: a request for it
is an ``InvalidRequestError`` that names the package to install, never a crash or a wrong verdict.
Executables are resolved on the host (``os.path.realpath``) when the job is built, so a toolchain that
resolves outside what the jail shows is reported missing rather than failing inside it (the jail also
binds ``/etc/alternatives``, through which Debian links ``java``, ``cc``, ``awk`` and others).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from execrl.registry import Registry
from execrl.sandbox.errors import InvalidRequestError
from execrl.sandbox.types import Limits

CALL_RECORD_FD = 3  # where a binary language's call harness writes its records (child.exec_program)
JAIL_VISIBLE = ("/usr/", "/bin/", "/lib/", "/lib64/")  # what ``jail.build_template_root`` binds
# The toolchain's own directory in the work directory: build outputs (a compiled ``main``), caches and
# support files live here, so a request's ``files`` never share a name with them; a file under it is
# refused (``Language.reserved_problem``). The harness creates it when the job's argv names it.
BUILD_DIR = ".execrl"


@dataclass(frozen=True)
class CallHarness:
    """How a binary language runs ``CallTest``s: ``files`` (path, source) are added to the work
    directory, ``compile_argv`` replaces the language's when the request has call tests (it must compile
    the harness too), ``run_argv`` runs the harness, which loads the candidate's program itself.

    ``prebuilt``: the harness compiled once on the host (path -> bytes, cached by the callable; None when
    it cannot be built), written instead of ``files`` so that each execution compiles only the program
    with the language's own ``compile_argv`` (Java: javac's CPU per call-test execution halves)."""

    files: tuple[tuple[str, str], ...]
    run_argv: tuple[str, ...]
    entry_point: str  # a regular expression a test's entry point must match (it is looked up by name)
    compile_argv: tuple[str, ...] = ()
    prebuilt: Callable[[], dict[str, bytes] | None] | None = None

    def built(self) -> dict[str, bytes] | None:
        return self.prebuilt() if self.prebuilt is not None else None


@dataclass(frozen=True)
class WarmStart:
    """How a parked worker pre-starts this language's run command before the job arrives (``warm.py``):
    ``env`` is added to the run's environment and makes the runtime read the gate descriptor
    (``warm.GATE_FD``) at start-up, which blocks it until the harness writes ``gate`` there and closes it.
    ``gate`` is code in the language itself; it must undo ``env`` and close the descriptor, so that the
    candidate's program starts as it would cold."""

    env: tuple[tuple[str, str], ...]
    gate: str


@dataclass(frozen=True)
class Language:
    """One registered language. Argument templates: ``{source}`` is the program's path in the work
    directory, ``{stem}`` that path without its suffix, ``{memory_mb}`` the execution's memory limit (a JVM sizes its heap from it).

    ``min_memory_mb``/``min_processes`` are floors the execution's limits are raised to (``limits_for``)
    for runtimes that cannot start below them: the JVM and Go's toolchain start a dozen or more threads,
    and every thread counts against RLIMIT_NPROC and the cgroup's ``pids.max``."""

    name: str
    mode: Literal["python", "binary"]
    default_path: str  # where the program is written in the work directory
    test_kinds: frozenset[str]  # among "code", "call", "io"
    compile_argv: tuple[str, ...] = ()
    run_argv: tuple[str, ...] = ()
    compile_timeout_s: float = 0.0
    package: str = ""  # the Debian package that provides the toolchain
    env: tuple[tuple[str, str], ...] = ()  # added for compile and run; "./x" means x in the work directory
    call: CallHarness | None = None
    min_memory_mb: int = 0
    min_processes: int = 0
    tools: tuple[str, ...] = ()  # other executables the toolchain runs (a linker), checked for availability
    data_files: tuple[str, ...] = ()  # files it reads (JUnit's jar), checked for availability the same way
    files: tuple[tuple[str, str], ...] = ()  # support files written into the work directory with the program
    warm: WarmStart | None = None  # pre-started before the job (``warm.py``); only without a compile step
    # Libraries linked when this host's compiler finds them (``-l<name>`` after the source, as
    # SandboxFusion adds ``-lcrypto -lssl -lpthread`` when they link), checked once per process.
    optional_libraries: tuple[str, ...] = ()
    # (source suffix, output suffix) of a build that writes its output beside each source (tsc's
    # ``x.ts`` -> ``x.js``, which Node's relative ``require`` resolves from): those names are reserved.
    emits_beside: tuple[str, str] | None = None
    env_hook: Callable[[], dict[str, str]] | None = None  # environment decided per job (Go's warm cache)
    runtime: str | None = None  # the Python runtime a ``mode="python"`` language needs (pytest)

    def compile_limit_s(self, requested_s: float | None) -> float:
        """The compile step's CPU and wall-clock limit: the request's (``Limits.compile_timeout_s``) or,
        when it sets none, the language's default; 0 for a language without a compile step."""
        if not self.compile_argv:
            return 0.0
        return self.compile_timeout_s if requested_s is None else requested_s

    def limits_for(self, limits: Limits) -> Limits:
        """``limits`` raised to this language's floors (unchanged for most languages)."""
        memory_mb = max(limits.memory_mb, self.min_memory_mb)
        processes = max(limits.max_processes, self.min_processes)
        if (memory_mb, processes) == (limits.memory_mb, limits.max_processes):
            return limits
        return dataclasses.replace(limits, memory_mb=memory_mb, max_processes=processes)

    def missing(self) -> list[str]:
        """The toolchain's executables that this host lacks (or that resolve outside what the jail
        sees); empty when the language is available."""
        argvs = (self.compile_argv, self.run_argv, *((self.call.run_argv,) if self.call else ()))
        wanted = [argv[0] for argv in argvs if argv and argv[0].startswith("/")] + list(self.tools)
        missing = [path for path in dict.fromkeys(wanted) if _host_path(path) is None]
        return missing + [path for path in self.data_files if _host_file(path) is None]

    def check_available(self) -> None:
        """Raise ``InvalidRequestError`` naming the Debian package when the toolchain is missing."""
        missing = self.missing()
        if missing:
            package = self.package or "that provides it"
            raise InvalidRequestError(
                f"language {self.name!r} is unavailable on this host: {', '.join(missing)} not found; "
                f"install the Debian package {package} (scripts/setup.sh --system installs every toolchain)"
            )

    def support_files(self, with_call: bool) -> dict[str, str | bytes]:
        """Files the sandbox writes next to the program: the language's own and, for call tests, the
        call harness's (compiled, when it has a ``prebuilt`` build)."""
        files: dict[str, str | bytes] = dict(self.files)
        if with_call and self.call is not None:
            built = self.call.built()
            files.update(built if built is not None else self.call.files)
        return files

    def reserved_problem(self, program_path: str, files: Iterable[str], with_call: bool) -> str | None:
        """Why one of ``files`` cannot be written as given (it is a name the toolchain writes), or None.

        One rule: the toolchain's names are reserved, each refused with what uses it. They are the
        ``BUILD_DIR`` tree (build outputs, caches, support files), the call harness's files where it
        keeps them beside the program (``__execrl_call.js``, Java's ``ExecrlCall*.class``) and, for a
        build that writes its output beside each source (``emits_beside``), those outputs. The
        program's own path is refused elsewhere (``types.work_path_problems``)."""
        files = list(files)
        support = set(self.support_files(with_call))
        emitted = self._emitted([program_path, *files])
        for path in files:
            if path == BUILD_DIR or path.startswith(f"{BUILD_DIR}/"):
                why = f"{BUILD_DIR}/ holds the sandbox's build outputs, caches and support files"
            elif path in support:
                why = f"the {self.name} harness writes it"
            elif path in emitted:
                why = f"the {self.name} build writes it from {emitted[path]!r}"
            else:
                continue
            return f"files: {path!r} is reserved ({why}); rename it"
        return None

    def _emitted(self, paths: list[str]) -> dict[str, str]:
        if self.emits_beside is None:
            return {}
        source, output = self.emits_beside
        return {
            path[: -len(source)] + output: path
            for path in paths
            if path.endswith(source) and not path.endswith(f".d{source}")
        }

    def job_spec(self, program_path: str, limits: Limits, with_call: bool = False) -> dict[str, Any]:
        """The language as the sandbox's harness sees it, argument templates filled in."""
        stem = program_path.rsplit(".", 1)[0] if "." in program_path.rsplit("/", 1)[-1] else program_path
        values = {"source": program_path, "stem": stem, "memory_mb": str(limits.memory_mb)}
        compile_argv = self.compile_argv
        if with_call and self.call is not None and self.call.compile_argv and self.call.built() is None:
            compile_argv = self.call.compile_argv
        call_argv = self.call.run_argv if self.call is not None else ()
        compile_filled = _fill(compile_argv, values)
        if compile_filled and self.optional_libraries:
            compile_filled += [f"-l{lib}" for lib in _linkable(compile_filled[0], self.optional_libraries)]
        argvs = (compile_filled, _fill(self.run_argv, values), _fill(call_argv, values))
        return {
            "name": self.name,
            "mode": self.mode,
            "compile": argvs[0] or None,
            "run": argvs[1] or None,
            "call": argvs[2] or None,
            "env": {**dict(self.env), **(self.env_hook() if self.env_hook is not None else {})},
            "warm": {"env": dict(self.warm.env), "gate": self.warm.gate} if self.warm else None,
            "compile_timeout_s": self.compile_limit_s(limits.compile_timeout_s),
            "mkdirs": [BUILD_DIR] if any(BUILD_DIR in arg for argv in argvs for arg in argv) else [],
        }


def _fill(argv: tuple[str, ...], values: dict[str, str]) -> list[str]:
    """``argv`` with its templates filled and its executable resolved on the host (``_host_path``)."""
    filled = [arg.format(**values) if "{" in arg else arg for arg in argv]
    if filled and filled[0].startswith("/"):
        filled[0] = _host_path(filled[0]) or filled[0]
    return filled


@functools.lru_cache(maxsize=64)
def _linkable(compiler: str, libraries: tuple[str, ...]) -> tuple[str, ...]:
    """The ``libraries`` this host's ``compiler`` finds (``-print-file-name`` answers a path, for the
    shared or the static library): SandboxFusion's link-test of each flag, without compiling."""
    found = []
    for lib in libraries:
        for name in (f"lib{lib}.so", f"lib{lib}.a"):
            try:
                done = subprocess.run(
                    [compiler, f"-print-file-name={name}"],
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired):
                continue
            if done.returncode == 0 and done.stdout.strip().startswith("/"):
                found.append(lib)
                break
    return tuple(found)


def host_argv(argv: tuple[str, ...]) -> list[str]:
    """``argv`` (without templates) with its executable resolved as the sandbox would run it."""
    return _fill(argv, {})


@functools.lru_cache(maxsize=256)
def _host_path(path: str) -> str | None:
    """``path`` with its symlinks resolved, if it is an executable the jail can see, else ``None``."""
    real = os.path.realpath(path)
    if not real.startswith(JAIL_VISIBLE) or not os.access(real, os.X_OK):
        return None
    return real


def _host_file(path: str) -> str | None:
    """As ``_host_path`` for a file the toolchain reads (``Language.data_files``): readable is enough."""
    real = os.path.realpath(path)
    return real if real.startswith(JAIL_VISIBLE) and os.access(real, os.R_OK) else None


_LANGUAGES: Registry[Language] = Registry("language", plural="languages", unknown_error=InvalidRequestError)


def register_language(language: Language) -> Language:
    """Add ``language`` under its name; a name already registered raises ``ValueError``."""
    return _LANGUAGES.add(language.name, language)


def get_language(name: str) -> Language:
    return _LANGUAGES.get(name)


def list_languages() -> list[str]:
    return _LANGUAGES.names()


def available_languages() -> list[str]:
    """The registered languages whose toolchain this host has."""
    return [name for name, language in _LANGUAGES.items().items() if not language.missing()]


def describe_languages() -> list[dict[str, Any]]:
    """Every registered language as plain data (``execrl sandbox languages``, benchmarks): availability
    on this host, the Debian package, test kinds, default compile limit and limit floors."""
    rows = []
    for name, language in _LANGUAGES.items().items():
        missing = language.missing()
        rows.append(
            {
                "name": name,
                "available": not missing,
                "missing": missing,
                "package": language.package,
                "test_kinds": sorted(language.test_kinds),
                "compile_timeout_s": language.compile_limit_s(None),
                "min_memory_mb": language.min_memory_mb,
                "min_processes": language.min_processes,
            }
        )
    return rows
