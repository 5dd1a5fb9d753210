"""Every registered language end to end: stdin/stdout tests pass and fail, compile errors carry the
compiler's output, run-time errors and endless loops get their verdicts."""

from __future__ import annotations

import pytest
from language_programs import BROKEN, BROKEN_MARK, COMPILED, CRASH, CRASH_MARK, LANGUAGES, SPIN, SUM

from execrl.sandbox import ExecutionRequest, IOTest, Limits, Sandbox, Verdict
from execrl.sandbox.langs.registry import available_languages, get_language, list_languages


def test_every_agreed_language_is_registered_and_available() -> None:
    """The names agreed for the registry (issue 13); CI installs every toolchain (setup.sh --system)."""
    agreed = ["bash", "c", "cpp", "go", "java", "javascript", "python", "rust", "typescript"]
    derived = ["go_test", "javascript-asserts", "junit", "pytest"]  # issue 28: SandboxFusion's modes...
    derived += ["typescript-asserts", "typescript-transpile", "typescript-transpile-asserts"]  # ...variants
    assert list_languages() == sorted(agreed + derived)
    assert available_languages() == sorted(agreed + derived), {n: get_language(n).missing() for n in agreed}


@pytest.mark.parametrize("language", LANGUAGES)
def test_io_tests_pass_and_a_wrong_answer_fails(sandbox: Sandbox, language: str) -> None:
    tests = (IOTest("sum", "40 2\n", "42\n"), IOTest("big", "1000000000 2000000000", "3000000000"))
    wrong = IOTest("wrong", "1 1", "3")
    result = sandbox.run(ExecutionRequest(language=language, program=SUM[language], tests=(*tests, wrong)))
    verdicts = [t.verdict for t in result.tests]
    assert verdicts == [Verdict.PASSED, Verdict.PASSED, Verdict.WRONG_ANSWER], result
    assert result.tests[2].got == "2\n" and result.tests[2].expected == "3"
    assert result.verdict is Verdict.WRONG_ANSWER


@pytest.mark.parametrize("language", COMPILED)
def test_compile_error_carries_the_compiler_output(sandbox: Sandbox, language: str) -> None:
    result = sandbox.run(
        ExecutionRequest(language=language, program=BROKEN[language], tests=(IOTest("t", "", ""),))
    )
    assert result.verdict is Verdict.COMPILE_ERROR, result
    assert BROKEN_MARK[language] in result.compile_output


@pytest.mark.parametrize("language", LANGUAGES)
def test_runtime_error(sandbox: Sandbox, language: str) -> None:
    result = sandbox.run(
        ExecutionRequest(language=language, program=CRASH[language], tests=(IOTest("t", "", ""),))
    )
    assert result.verdict is Verdict.RUNTIME_ERROR, result
    assert CRASH_MARK.get(language, "") in result.stderr


@pytest.mark.parametrize("language", LANGUAGES)
def test_endless_loop_is_time_limit(sandbox: Sandbox, language: str) -> None:
    limits = Limits(cpu_time_s=1.0, timeout_s=20.0)
    result = sandbox.run(ExecutionRequest(language=language, program=SPIN[language], limits=limits))
    assert result.verdict is Verdict.TIME_LIMIT and result.limit_kind == "cpu", result


@pytest.mark.parametrize("language", ["c", "cpp", "java"])
def test_stderr_stays_out_of_the_judged_stdout(sandbox: Sandbox, language: str) -> None:
    """Regression: a compiled program's stderr was merged into the stdout its stdin/stdout tests judge
    (the compiler's 2>&1 applied to every run), so a correct program that logged to stderr failed."""
    programs = {
        "c": '#include <stdio.h>\nint main(void){fprintf(stderr,"debug\\n");puts("42");return 0;}\n',
        "cpp": '#include <iostream>\nint main(){std::cerr<<"debug\\n";std::cout<<"42\\n";}\n',
        "java": 'public class Main{public static void main(String[] a){System.err.println("debug");System.out.println(42);}}\n',
    }
    tests = (IOTest("t", "", "42\n", compare="exact"),)
    result = sandbox.run(ExecutionRequest(language=language, program=programs[language], tests=tests))
    assert result.verdict is Verdict.PASSED, result
    assert "debug" in result.stderr
