"""Function-call tests through the harnesses written in JavaScript, TypeScript and Java: values of every
JSON shape round-trip, failures get their verdicts, and nothing the candidate prints or writes can
answer a test with a value its function did not return."""

from __future__ import annotations

import pytest

from execrl.sandbox import CallTest, ExecutionRequest, InvalidRequestError, Limits, Sandbox, Verdict

JS = """
function add(a, b) { return a + b; }
const sorted = (xs) => [...xs].sort((a, b) => a - b);
function shape(name, n) { return {name: name.toUpperCase(), items: Array(n).fill(0.5), ok: n > 1, none: null}; }
async function later(x) { return [x, new Set([x])]; }
function fails() { throw new RangeError("bad range"); }
function asserts() { require("assert").strictEqual(1, 2); }
function leaves() { process.exit(0); }
"""
TS = """
function add(a: number, b: number): number { return a + b; }
const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
function shape(name: string, n: number) { return {name: name.toUpperCase(), items: Array(n).fill(0.5), ok: n > 1, none: null}; }
async function later(x: number) { return [x, new Set([x])]; }
function fails(): never { throw new RangeError("bad range"); }
function asserts(): void { require("assert").strictEqual(1, 2); }
function leaves(): void { process.exit(0); }
"""
JAVA = """
import java.util.*;
class Problem {
    public static long add(long a, long b) { return a + b; }
    static int[] sorted(int[] xs) { int[] r = xs.clone(); Arrays.sort(r); return r; }
    static Map<String, Object> shape(String name, long n) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", name.toUpperCase()); m.put("items", Collections.nCopies((int) n, 0.5));
        m.put("ok", n > 1); m.put("none", null); return m;
    }
    static List<Object> later(long x) { return List.of(x, Set.of(x)); }
    static long fails() { throw new IllegalArgumentException("bad range"); }
    static void asserts() { throw new AssertionError("1 != 2"); }
    static void leaves() { System.exit(0); }
}
"""
PROGRAMS = {"javascript": JS, "typescript": TS, "java": JAVA}
HARNESSED = sorted(PROGRAMS)


def run(sandbox: Sandbox, language: str, program: str, *tests: CallTest, **limits: float) -> list[Verdict]:
    request = ExecutionRequest(language=language, program=program, tests=tests, limits=Limits(**limits))
    return [t.verdict for t in sandbox.run(request).tests]


@pytest.mark.parametrize("language", HARNESSED)
def test_values_of_every_shape_round_trip(sandbox: Sandbox, language: str) -> None:
    tests = (
        CallTest("add", "add", (40, 2), expected=42),
        CallTest("sorted", "sorted", ([3, 1, 2],), expected=[1, 2, 3]),
        CallTest(
            "shape",
            "shape",
            ("ab", 2),
            expected={"name": "AB", "items": [0.5, 0.5], "ok": True, "none": None},
        ),
        CallTest("later", "later", (7,), expected=[7, [7]]),
        CallTest("wrong", "add", (1, 1), expected=3),
    )
    result = sandbox.run(ExecutionRequest(language=language, program=PROGRAMS[language], tests=tests))
    assert [t.verdict for t in result.tests] == [Verdict.PASSED] * 4 + [Verdict.WRONG_ANSWER], result
    assert result.tests[4].got == "2" and result.tests[4].expected == "3"


@pytest.mark.parametrize("language", HARNESSED)
def test_failures_get_their_verdicts_and_later_tests_still_run(sandbox: Sandbox, language: str) -> None:
    """An exception is a runtime error; an assertion failure a wrong answer (as Python's AssertionError);
    exiting inside the function fails that test, and a fresh process runs the tests after it."""
    tests = (
        CallTest("fails", "fails", expected=1),
        CallTest("asserts", "asserts", expected=None),
        CallTest("leaves", "leaves", expected=None),
        CallTest("after", "add", (2, 3), expected=5),
        CallTest("missing", "nope", expected=1),
    )
    result = sandbox.run(ExecutionRequest(language=language, program=PROGRAMS[language], tests=tests))
    verdicts = [t.verdict for t in result.tests]
    assert verdicts == [
        Verdict.RUNTIME_ERROR,
        Verdict.WRONG_ANSWER,
        Verdict.RUNTIME_ERROR,
        Verdict.PASSED,
        Verdict.RUNTIME_ERROR,
    ], result
    assert "bad range" in (result.tests[0].error_message or "")


@pytest.mark.parametrize("language", HARNESSED)
def test_endless_function_is_time_limit(sandbox: Sandbox, language: str) -> None:
    program = {
        "javascript": "function spin() { for (;;) {} }\n",
        "typescript": "function spin(): number { for (;;) {} }\n",
        "java": "class P { static volatile long x; static long spin() { for (;;) x++; } }\n",
    }[language]
    verdicts = run(
        sandbox, language, program, CallTest("t", "spin", expected=1), cpu_time_s=1.0, timeout_s=20.0
    )
    assert verdicts == [Verdict.TIME_LIMIT]


def test_java_instance_methods_lists_and_maps(sandbox: Sandbox) -> None:
    """LeetCode's shape: an instance method of ``class Solution``, generic collections as parameters."""
    program = """
import java.util.*;
class Solution {
    public List<List<Integer>> pairs(List<Integer> xs, Map<String, Integer> bump) {
        List<List<Integer>> out = new ArrayList<>();
        for (int x : xs) out.add(Arrays.asList(x, x + bump.getOrDefault("k", 0)));
        return out;
    }
    public double half(double x) { return x / 2; }
    public char first(String s) { return s.charAt(0); }
}
"""
    tests = (
        CallTest("pairs", "Solution.pairs", ([1, 2], {"k": 10}), expected=[[1, 11], [2, 12]]),
        CallTest("half", "half", (3,), expected=1.5),
        CallTest("first", "first", ("xyz",), expected="x"),
        CallTest("mismatch", "half", ("text",), expected=1.0),
        CallTest("overflow", "Solution.pairs", ([2**40], {"k": 1}), expected=[[0, 1]]),
    )
    verdicts = run(sandbox, "java", program, *tests)
    # an argument that does not fit the parameter's type is an error, never a wrapped-around value
    assert verdicts == [Verdict.PASSED] * 3 + [Verdict.RUNTIME_ERROR] * 2


@pytest.mark.parametrize("language", ["javascript", "java"])
def test_a_failing_program_fails_every_test_with_its_error(sandbox: Sandbox, language: str) -> None:
    program = {
        "javascript": 'throw new TypeError("top level");\nfunction f() { return 1; }\n',
        "java": 'class P { static int v = Integer.parseInt("x"); static long f() { return 1; } }\n',
    }[language]
    tests = (CallTest("a", "f", expected=1), CallTest("b", "f", expected=1))
    result = sandbox.run(ExecutionRequest(language=language, program=program, tests=tests))
    assert [t.verdict for t in result.tests] == [Verdict.RUNTIME_ERROR] * 2
    assert result.tests[0].error_type in ("TypeError", "NumberFormatException")


@pytest.mark.parametrize("language", ["javascript", "java"])
def test_printed_and_written_records_cannot_answer_a_test(sandbox: Sandbox, language: str) -> None:
    """Hazard 20 for the harnesses in other languages: a fake record on stdout is ignored; one written to
    the record descriptor is judged like any record (an ``ok`` cannot answer a call test), never a pass."""
    fake = '{\\"i\\":0,\\"status\\":\\"ok\\"}\\n{\\"i\\":0,\\"status\\":\\"value\\",\\"value\\":\\"3\\"}\\n'
    program = {
        "javascript": f'function add(a, b) {{ console.log("{fake}"); require("fs").writeSync(3, "{fake}"); return 0; }}\n',
        "java": (
            "class P { static long add(long a, long b) throws Exception {\n"
            f'  System.out.print("{fake}");\n'
            '  java.io.FileDescriptor d = new java.io.FileDescriptor(); var f = java.io.FileDescriptor.class.getDeclaredField("fd");\n'
            "  f.setAccessible(true); f.setInt(d, 3);\n"
            f'  new java.io.FileOutputStream(d).write("{fake}".getBytes()); return 0; }} }}\n'
        ),
    }[language]
    request = ExecutionRequest(
        language=language, program=program, tests=(CallTest("t", "add", (1, 2), expected=3),)
    )
    result = sandbox.run(request)
    assert '"status":"ok"' in result.stdout  # the function ran and printed its fakes
    assert result.tests[0].verdict is Verdict.WRONG_ANSWER, result  # the first fake took test 0's place
    assert "forged record" in (result.tests[0].error_message or "")


def test_harness_call_tests_reject_keywords_and_code_as_entry_point(sandbox: Sandbox) -> None:
    with pytest.raises(InvalidRequestError, match="positional args only"):
        sandbox.run(
            ExecutionRequest(
                language="javascript", program=JS, tests=(CallTest("t", "add", kwargs={"a": 1}),)
            )
        )
    with pytest.raises(InvalidRequestError, match="is not a javascript function name"):
        sandbox.run(
            ExecutionRequest(language="javascript", program=JS, tests=(CallTest("t", "process.exit()"),))
        )
    with pytest.raises(InvalidRequestError, match="CallTest, which language 'go' does not support"):
        sandbox.run(ExecutionRequest(language="go", program="package main", tests=(CallTest("t", "f"),)))


def test_java_call_jobs_carry_the_prebuilt_harness_and_compile_only_the_program() -> None:
    """The call harness's classes are built once on the host and written as bytes; javac sees only the
    candidate's file (``jvm.prebuilt_harness``)."""
    import json

    from execrl.sandbox.host.runner import build_job
    from execrl.sandbox.langs.jvm import prebuilt_harness
    from execrl.sandbox.langs.registry import get_language

    built = prebuilt_harness()
    assert built is not None and {"ExecrlCall.class", "ExecrlJson.class"} <= set(built)
    java = get_language("java")
    request = ExecutionRequest(
        language="java", program=JAVA, tests=(CallTest("t", "add", (1, 2), expected=3),)
    )
    job = json.loads(build_job(request, java))
    assert set(built) <= set(job["files_b64"])
    assert not [path for path in job["files"] if path.startswith("Execrl")]  # no harness source
    assert [a for a in job["language"]["compile"] if a.endswith(".java")] == ["Main.java"]
