"""Java (OpenJDK 17 from ``default-jdk-headless``): stdin/stdout tests run ``Main``; call tests run
``ExecrlCall`` (``ExecrlCall.java``, ``ExecrlJson.java``), compiled once per process on the host
(``prebuilt_harness``) and written into the work directory as classes, so javac compiles only the program
(a class of the program with one of their names replaces the harness's: no new power, as the harness
runs in the candidate's JVM anyway and the parent judges what it reports).

The call harness loads every top-level class ``javac`` wrote, finds the method named by the test's
entry point (``method`` or ``Class.method``; static, or an instance method called on a fresh instance
from a no-argument constructor: LeetCode's ``class Solution``), converts the JSON arguments to its
declared parameter types (integers to ``long``/``int``/..., lists to arrays, ``List<T>``/``ArrayList<T>``,
objects to ``Map<K, V>``) and writes the returned value as JSON to fd 3. ``OutOfMemoryError`` is
reported as ``MemoryError`` and ``AssertionError`` as itself, so both are judged as in Python.

Limits. The JVM starts about 15 threads (GC, JIT compilers, signal and reference handlers) and ``javac``
more, each counting against RLIMIT_NPROC and the cgroup's ``pids.max``, hence ``min_processes``;
``javac`` peaks at about 65 MB on a small source and the JVM holds about 40 MB before the program
allocates anything, hence ``min_memory_mb``. The
heap is capped at the execution's memory limit (``-Xmx{memory_mb}m``) so the collector works within it,
and everything the JVM holds besides the heap then meets the cgroup first: a heap bomb ends as
``memory_limit``. Serial GC (no GC threads), no ``hsperfdata`` file, ``-ea`` as MultiPL-E runs its
tests, and a 64 MiB thread stack (judges' usual setting: deep recursion is normal in solutions).
The call harness reads fd 3 through ``FileDescriptor``'s private field (reopening ``/proc/self/fd/3`` is
refused: the pipe belongs to the harness uid), hence ``--add-opens java.base/java.io`` for it; that
only opens what the candidate's code could reach in its own process anyway. The JDK's configuration lives in ``/etc/java-17-openjdk``, which the jail binds read-only
(``jail.TOOLCHAIN_CONFIG_DIRS``).
"""

from __future__ import annotations

import functools
import logging
import subprocess
import tempfile
from pathlib import Path

from execrl.sandbox.langs.registry import CallHarness, Language, host_argv, register_language

log = logging.getLogger("execrl.sandbox")

HERE = Path(__file__).parent
HARNESS = tuple(
    (name, (HERE / name).read_text(encoding="utf-8")) for name in ("ExecrlCall.java", "ExecrlJson.java")
)
JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xshare:auto")
JAVAC = (
    "/usr/bin/javac",
    *(f"-J{flag}" for flag in JVM_FLAGS),
    "-J-XX:TieredStopAtLevel=1",
    "-encoding",
    "UTF-8",
)
PREBUILD_TIMEOUT_S = 120.0


@functools.lru_cache(maxsize=1)
def prebuilt_harness() -> dict[str, bytes] | None:
    """``ExecrlCall`` and ``ExecrlJson`` compiled once per process, on the host, by the same ``javac``
    with the same flags: our own trusted source, so it needs no sandbox. Each call-test execution then
    writes these classes and compiles only the candidate's file (measured: javac 0.44-0.48 s CPU for a
    one-method ``Main.java`` alone vs 0.84-0.97 s with the two harness sources). None, logged, when the
    build fails: executions then compile the harness from source as before."""
    with tempfile.TemporaryDirectory(prefix="execrl-java-harness-") as tmp:
        for name, text in HARNESS:
            Path(tmp, name).write_text(text, encoding="utf-8")
        argv = host_argv((*JAVAC, "-d", "classes", *(name for name, _ in HARNESS)))
        try:
            done = subprocess.run(argv, cwd=tmp, capture_output=True, timeout=PREBUILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("java call harness not prebuilt (%s); each execution compiles it", exc)
            return None
        if done.returncode != 0:
            log.warning(
                "java call harness not prebuilt (javac exit %d): %s", done.returncode, done.stderr[-500:]
            )
            return None
        return {path.name: path.read_bytes() for path in sorted(Path(tmp, "classes").glob("*.class"))}


JAVA = ("/usr/bin/java", *JVM_FLAGS, "-Xss64m", "-Xmx{memory_mb}m", "-ea", "-cp", ".")

JAVA_LANGUAGE = register_language(
    Language(
        "java",
        "binary",
        "Main.java",
        frozenset({"io", "call"}),
        compile_argv=(*JAVAC, "-d", ".", "{source}"),
        run_argv=(*JAVA, "Main"),
        compile_timeout_s=30.0,
        package="default-jdk-headless",
        min_processes=64,
        min_memory_mb=128,
        call=CallHarness(
            files=HARNESS,
            compile_argv=(*JAVAC, "-d", ".", "{source}", *(name for name, _ in HARNESS)),
            run_argv=(*JAVA, "--add-opens=java.base/java.io=ALL-UNNAMED", "ExecrlCall"),
            entry_point=r"([A-Za-z_$][\w$]*\.)?[A-Za-z_$][\w$]*",
            prebuilt=prebuilt_harness,
        ),
    )
)

# SandboxFusion's ``junit`` mode: the program is a JUnit 5 test class (written as ``<its public
# class>.java``, ``fusion.py``), compiled against Debian's JUnit console launcher (``junit5``) with the
# work directory as source path (so classes it uses from the request's files compile too), then run by
# the launcher scanning the work directory. Plain runs only; the verdict is the launcher's exit status
# (0 when no test failed, 1 when one did; no test at all is 0, as with SandboxFusion's launcher).
JUNIT_JAR = "/usr/share/java/junit-platform-console-standalone.jar"
JUNIT = register_language(
    Language(
        "junit",
        "binary",
        "Main.java",
        frozenset(),
        compile_argv=(*JAVAC, "-cp", f".:{JUNIT_JAR}", "-sourcepath", ".", "-d", ".", "{source}"),
        run_argv=(
            "/usr/bin/java",
            *JVM_FLAGS,
            "-Xss64m",
            "-Xmx{memory_mb}m",
            "-jar",
            JUNIT_JAR,
            "--class-path",
            ".",
            "--scan-class-path",
        ),  # fmt: skip
        compile_timeout_s=30.0,
        package="junit5",
        data_files=(JUNIT_JAR,),
        min_processes=64,
        min_memory_mb=256,
    )
)
