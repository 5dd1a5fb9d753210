"""The "code" verifier: extract the program, assemble it per ``CodeSpec.kind``, run the tests in the sandbox.

Two phases (see ``execrl.rewards.types``): ``prepare`` does everything that needs no sandbox (extraction,
assembly, a local ``compile`` so a syntax error never costs a sandbox call) and returns the
``ExecutionRequest``; ``finish`` maps the ``ExecutionResult`` to a reward:

- ``binary`` mode: 1 if every test passed, else 0 (DeepCoder's all-pass reward);
- ``partial`` mode: the share of tests passed (a reward-hacking risk on tasks with trivial tests);
- penalties from ``RewardConfig`` are subtracted for no code, syntax/compile errors and timeouts;
- a sandbox failure is an *invalid* score (excluded from the advantage), never a 0.

Assembly of a ``function`` task: if the extracted code defines ``entry_point`` it is the whole solution,
prefixed by the rest of ``prompt_code`` (its imports and helper definitions, without the entry point's
stub, so HumanEval prompts that define helpers still work); otherwise the code continues ``prompt_code``
(HumanEval's body-only completions). ``stdio``: the code is the whole program. ``repository``: the code
becomes ``program_path`` inside the project ``files``, whose own tests are run.
"""

from __future__ import annotations

import ast
import functools
import re

from execrl.rewards.extraction import defines_name, extract_code, python_syntax_error
from execrl.rewards.registry import register_verifier
from execrl.rewards.types import RewardConfig, Score
from execrl.sandbox.types import ExecutionRequest, ExecutionResult, TestCase, TestResult, Verdict, ellipsize
from execrl.tasks.schema import CodeSpec, Task

DETAIL_MAX_CHARS = 200
IMPORT_LINE_RE = re.compile(r"^(?:import\s|from\s+\S+\s+import\s)")

# Reason codes of failed executions (Verdict -> Score reason code).
VERDICT_REASONS: dict[Verdict, str] = {
    Verdict.WRONG_ANSWER: "wrong_answer",
    Verdict.RUNTIME_ERROR: "runtime_error",
    Verdict.TIME_LIMIT: "timeout",
    Verdict.MEMORY_LIMIT: "memory_limit",
    Verdict.OUTPUT_LIMIT: "output_limit",
    Verdict.COMPILE_ERROR: "compile_error",
}


def code_spec(task: Task) -> CodeSpec:
    """The task's ``CodeSpec``; a wrong spec type or a repository without ``program_path`` is a task bug."""
    spec = task.spec
    if not isinstance(spec, CodeSpec):
        raise TypeError(f"task {task.id!r} has domain 'code' but a {type(spec).__name__}; expected CodeSpec")
    if spec.kind == "repository" and not spec.program_path:
        raise ValueError(
            f"task {task.id!r} is a repository task without program_path; set CodeSpec.program_path"
        )
    return spec


def select_tests(task: Task, config: RewardConfig) -> tuple[TestCase, ...]:
    """Hidden tests for scoring, visible ones for feedback; an empty set is a task bug, not a pass."""
    tests = task.hidden_tests if config.use_hidden_tests else task.visible_tests
    if not tests:
        which = "hidden_tests" if config.use_hidden_tests else "visible_tests"
        raise ValueError(f"task {task.id!r} has no {which}; a code task needs tests to be scored")
    return tests


@functools.lru_cache(maxsize=1024)
def prompt_context(prompt_code: str, entry_point: str) -> str:
    """``prompt_code`` without the top-level definition of ``entry_point`` (its imports and helpers).

    Cached: every sample of a prompt shares it. A prompt that does not parse keeps only its import lines.
    """
    try:
        tree = ast.parse(prompt_code)
    except SyntaxError:
        return "".join(line for line in prompt_code.splitlines(keepends=True) if IMPORT_LINE_RE.match(line))
    lines = prompt_code.splitlines(keepends=True)
    kept: list[str] = []
    for node in tree.body:
        named = (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name == entry_point
        )
        if named:
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        kept.extend(lines[first - 1 : node.end_lineno])
    return "".join(kept)


def assemble_program(spec: CodeSpec, code: str) -> str:
    """The program to run for ``code`` extracted from a completion (see the module docstring)."""
    if spec.kind != "function":
        return code
    if spec.entry_point and defines_name(code, spec.entry_point):
        context = prompt_context(spec.prompt_code, spec.entry_point) if spec.prompt_code else ""
    else:
        context = spec.prompt_code
    if context and not context.endswith("\n"):
        context += "\n"
    return context + code


def _short(text: str | None) -> str:
    text = (text or "").strip().replace("\n", "\\n")
    return ellipsize(text, DETAIL_MAX_CHARS)


def failure_detail(result: ExecutionResult) -> str:
    """One line about the test that set the overall verdict: its error, expected vs got, or the limit."""
    failing: TestResult | None = next((t for t in result.tests if t.verdict is result.verdict), None)
    failing = failing or next((t for t in result.tests if t.verdict is not Verdict.PASSED), None)
    if result.verdict is Verdict.TIME_LIMIT:
        where = f" in {failing.name}" if failing else ""
        return f"{result.limit_kind or 'time'} limit hit{where} after {result.wall_time_s:.1f} s wall"
    if failing is None:
        if result.compile_output:
            return _short(result.compile_output)
        return _short(result.stderr) or f"exit code {result.exit_code}"
    if failing.error_type:
        message = _short(failing.error_message)
        return f"{failing.name}: {failing.error_type}" + (f": {message}" if message else "")
    if failing.expected is not None or failing.got is not None:
        return f"{failing.name}: expected {_short(failing.expected)}, got {_short(failing.got)}"
    return f"{failing.name}: {failing.verdict.value}"


@register_verifier("code")
class CodeVerifier:
    """Runs the extracted program against the task's tests in the sandbox (all-pass or pass-fraction)."""

    def prepare(self, task: Task, completion: str, config: RewardConfig) -> ExecutionRequest | Score:
        spec = code_spec(task)
        tests = select_tests(task, config)
        extracted = extract_code(completion, spec.language, spec.entry_point)
        if extracted is None or not extracted.code.strip():
            return Score.failure("no_code_found", reward=-config.no_code_penalty)
        program = assemble_program(spec, extracted.code)
        error = python_syntax_error(program) if spec.language == "python" else None
        if error is not None:
            where = f"line {error.lineno}: " if isinstance(error, SyntaxError) and error.lineno else ""
            msg = error.msg if isinstance(error, SyntaxError) else str(error)
            return Score.failure(f"syntax_error: {where}{msg}", reward=-config.syntax_error_penalty)
        return ExecutionRequest(
            language=spec.language,
            program=program,
            tests=tests,
            files=spec.files if spec.kind == "repository" else {},
            program_path=spec.program_path if spec.kind == "repository" else None,
            limits=config.limits,
        )

    def finish(self, task: Task, completion: str, result: ExecutionResult, config: RewardConfig) -> Score:
        if result.is_sandbox_error:
            return Score.invalid(f"sandbox_error: {result.sandbox_error or 'no detail'}", execution=result)
        if result.passed:
            return Score.success(pass_fraction=result.pass_fraction, execution=result)
        code = VERDICT_REASONS.get(result.verdict, result.verdict.value)
        partial = result.pass_fraction if config.mode == "partial" else 0.0
        if result.verdict is Verdict.TIME_LIMIT:
            reward = partial - config.timeout_penalty
        elif result.verdict is Verdict.COMPILE_ERROR:
            reward = -config.syntax_error_penalty
        else:
            reward = partial
        return Score.failure(
            f"{code}: {failure_detail(result)}",
            reward=reward,
            pass_fraction=result.pass_fraction,
            execution=result,
        )
