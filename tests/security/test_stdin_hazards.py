"""What a request feeds a program on stdin never becomes a ``sandbox_error``, in every language.

Guards against issue 23's two faults, each reproduced at 35875f7:

* a test's stdin larger than ``limits.max_file_mb`` after the harness had lowered its own RLIMIT_FSIZE to
  ``posix_spawn`` a compiler or an earlier run: the stdin memfd write failed with EFBIG in the harness
  (after a compile step, every compiled language; on the second test of a Bash or JavaScript job). Such
  a job now forks its programs (``spawn.stdin_fits``), which write the memfd before lowering it;
* a lone surrogate in a test's or a plain run's stdin (or in a file or the program) given through the
  library API: the harness's strict UTF-8 encode raised. The policy now: the sandbox writes such a string
  as the job carries it, the surrogate as its three ``surrogatepass`` bytes (invalid UTF-8 the program
  reads as it likes); the HTTP edge refuses it instead (``serialize.find_unencodable``, 422).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from execrl.sandbox import ExecutionRequest, IOTest, Limits, Sandbox, SandboxConfig, Verdict

OK = {
    "python": 'print("ok")\n',
    "c": '#include <stdio.h>\nint main(void) { puts("ok"); return 0; }\n',
    "cpp": '#include <cstdio>\nint main() { std::puts("ok"); return 0; }\n',
    "go": 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("ok") }\n',
    "rust": 'fn main() { println!("ok"); }\n',
    "java": 'class Main { public static void main(String[] a) { System.out.println("ok"); } }\n',
    "javascript": 'console.log("ok");\n',
    "typescript": 'console.log("ok");\n',
    "bash": "echo ok\n",
}
SLOW = {"go", "rust", "java", "typescript"}  # their toolchains take a second or more per compile here
LANGUAGES = [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in sorted(OK)]
BIG = "x" * (17 << 20)  # over max_file_mb=16, the default (compilers need some: Rust writes ~10 MB)
SURROGATE = "a\ud800b\udcff\n"
LIMITS = Limits(max_file_mb=16, timeout_s=30.0, cpu_time_s=30.0, memory_mb=512)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    """One sandbox under the default policy (the faults are the harness's, not the filter's)."""
    with Sandbox(SandboxConfig(workers=2)) as sb:
        yield sb


@pytest.mark.parametrize("language", LANGUAGES)
def test_stdin_larger_than_the_file_limit_after_a_first_run(sandbox: Sandbox, language: str) -> None:
    tests = (IOTest("small", "1\n", "ok\n"), IOTest("big", BIG, "ok\n"), IOTest("big again", BIG, "ok\n"))
    result = sandbox.run(
        ExecutionRequest(language=language, program=OK[language], tests=tests, limits=LIMITS)
    )
    assert result.verdict is Verdict.PASSED, (result.sandbox_error, result.tests, result.compile_output)


@pytest.mark.parametrize("language", LANGUAGES)
def test_lone_surrogates_in_stdin_and_files_pass_through(sandbox: Sandbox, language: str) -> None:
    tests = (IOTest("surrogate", SURROGATE, "ok\n"), IOTest("plain", "1\n", "ok\n"))
    files = {"data.txt": SURROGATE}
    request = ExecutionRequest(
        language=language, program=OK[language], tests=tests, files=files, limits=LIMITS
    )
    result = sandbox.run(request)
    assert result.verdict is Verdict.PASSED, (result.sandbox_error, result.tests, result.compile_output)
    plain = sandbox.run(
        ExecutionRequest(language=language, program=OK[language], stdin=SURROGATE, limits=LIMITS)
    )
    assert plain.verdict is Verdict.PASSED and plain.stdout == "ok\n", (plain.sandbox_error, plain.stderr)


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_lone_surrogate_in_the_program_is_the_programs_own_error(sandbox: Sandbox, language: str) -> None:
    """The program is the candidate's: its invalid UTF-8 is a compile or runtime error (or runs, for a
    compiler that accepts it in a comment), never the sandbox's."""
    comment = "#" if language in ("python", "bash") else "//"
    program = f"{comment} {SURROGATE}" + OK[language]
    result = sandbox.run(ExecutionRequest(language=language, program=program, limits=LIMITS))
    assert not result.is_sandbox_error, result.sandbox_error
