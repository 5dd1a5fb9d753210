"""Code verifier without a sandbox: assembly per kind, local syntax check, result -> reward mapping."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from execrl.rewards import CodeVerifier, RewardConfig, Score, assemble_program
from execrl.rewards.code_verifier import prompt_context
from execrl.sandbox.types import ExecutionRequest, ExecutionResult, Limits, Verdict
from execrl.sandbox.types import TestResult as CaseResult  # "Test*" names would be collected by pytest
from execrl.tasks.schema import CodeSpec, Task

PROMPT = (
    "import math\nfrom typing import List\n\n\ndef helper(x: int) -> int:\n    return x * 2\n\n\n"
    'def add(a: int, b: int) -> int:\n    """Add two numbers."""\n'
)
VERIFIER = CodeVerifier()


def _result(verdicts: list[Verdict], overall: Verdict, **kwargs: object) -> ExecutionResult:
    tests = tuple(CaseResult(name=f"t{i}", verdict=v) for i, v in enumerate(verdicts))
    return ExecutionResult(verdict=overall, tests=tests, **kwargs)  # type: ignore[arg-type]


def test_prompt_context_keeps_imports_and_helpers_but_not_the_stub() -> None:
    assert prompt_context(PROMPT, "add") == (
        "import math\nfrom typing import List\ndef helper(x: int) -> int:\n    return x * 2\n"
    )


def test_function_completion_that_defines_the_entry_point_replaces_the_stub() -> None:
    spec = CodeSpec(kind="function", entry_point="add", prompt_code=PROMPT)
    program = assemble_program(spec, "def add(a, b):\n    return a + b\n")
    assert program.endswith("return x * 2\ndef add(a, b):\n    return a + b\n")
    assert program.count("def add") == 1
    compile(program, "<t>", "exec")


def test_function_body_only_completion_continues_the_prompt() -> None:
    spec = CodeSpec(kind="function", entry_point="add", prompt_code=PROMPT)
    assert assemble_program(spec, "    return a + b\n") == PROMPT + "    return a + b\n"


def test_stdio_and_repository_take_the_code_as_is() -> None:
    code = "print(int(input()) + int(input()))\n"
    assert assemble_program(CodeSpec(kind="stdio"), code) == code
    assert assemble_program(CodeSpec(kind="repository", program_path="a.py"), code) == code


def test_prepare_builds_a_request_with_hidden_tests_and_limits(make_code_task: Callable[..., Task]) -> None:
    task = make_code_task()
    limits = Limits(timeout_s=2.0)
    request = VERIFIER.prepare(
        task, "```python\ndef add(a, b):\n    return a + b\n```", RewardConfig(limits=limits)
    )
    assert isinstance(request, ExecutionRequest)
    assert request.tests == task.hidden_tests and request.limits == limits
    assert request.language == "python" and request.files == {} and request.program_path is None


def test_visible_tests_when_asked(make_code_task: Callable[..., Task]) -> None:
    task = make_code_task(visible=make_code_task().hidden_tests[:1])
    request = VERIFIER.prepare(
        task, "def add(a, b):\n    return a + b\n", RewardConfig(use_hidden_tests=False)
    )
    assert isinstance(request, ExecutionRequest) and len(request.tests) == 1


def test_a_task_without_the_chosen_tests_raises(make_code_task: Callable[..., Task]) -> None:
    with pytest.raises(ValueError, match="has no visible_tests"):
        VERIFIER.prepare(make_code_task(), "def add(a, b): ...", RewardConfig(use_hidden_tests=False))


def test_repository_request_carries_files_and_program_path(repository_task: Task) -> None:
    request = VERIFIER.prepare(
        repository_task, "```python\ndef total(xs):\n    return sum(xs)\n```", RewardConfig()
    )
    assert isinstance(request, ExecutionRequest)
    assert request.program_path == "shop/pricing.py" and "shop/report.py" in request.files


def test_no_code_and_syntax_error_are_decided_locally_with_penalties(
    make_code_task: Callable[..., Task],
) -> None:
    config = RewardConfig(no_code_penalty=0.5, syntax_error_penalty=0.25)
    no_code = VERIFIER.prepare(make_code_task(), "I can't do that.", config)
    assert no_code == Score(-0.5, True, False, 0.0, "no_code_found")
    syntax = VERIFIER.prepare(make_code_task(), "```python\ndef add(a, b)\n    return a + b\n```", config)
    assert isinstance(syntax, Score)
    assert (syntax.reward, syntax.valid, syntax.reason) == (-0.25, True, "syntax_error: line 1: expected ':'")


def test_finish_binary_and_partial(make_code_task: Callable[..., Task]) -> None:
    task = make_code_task()
    result = _result(
        [Verdict.PASSED, Verdict.PASSED, Verdict.WRONG_ANSWER, Verdict.PASSED], Verdict.WRONG_ANSWER
    )
    binary = VERIFIER.finish(task, "", result, RewardConfig())
    assert (binary.reward, binary.passed, binary.pass_fraction, binary.reason) == (
        0.0,
        False,
        0.75,
        "wrong_answer: t2: wrong_answer",
    )
    partial = VERIFIER.finish(task, "", result, RewardConfig(mode="partial"))
    assert partial.reward == 0.75 and partial.execution is result


def test_finish_all_passed(make_code_task: Callable[..., Task]) -> None:
    result = _result([Verdict.PASSED] * 2, Verdict.PASSED)
    assert VERIFIER.finish(make_code_task(), "", result, RewardConfig(mode="partial")) == Score(
        1.0, True, True, 1.0, "passed", result
    )


def test_finish_timeout_penalty_is_subtracted_from_partial_credit(
    make_code_task: Callable[..., Task],
) -> None:
    result = _result([Verdict.PASSED, Verdict.TIME_LIMIT], Verdict.TIME_LIMIT, limit_kind="cpu")
    score = VERIFIER.finish(make_code_task(), "", result, RewardConfig(mode="partial", timeout_penalty=0.2))
    assert score.reward == pytest.approx(0.5 - 0.2) and score.reason_code == "timeout"
    binary = VERIFIER.finish(make_code_task(), "", result, RewardConfig(timeout_penalty=0.2))
    assert binary.reward == pytest.approx(-0.2)


def test_finish_runtime_error_detail_names_the_exception(make_code_task: Callable[..., Task]) -> None:
    failing = CaseResult(
        name="small",
        verdict=Verdict.RUNTIME_ERROR,
        error_type="ZeroDivisionError",
        error_message="division by zero",
    )
    result = ExecutionResult(verdict=Verdict.RUNTIME_ERROR, tests=(failing,))
    score = VERIFIER.finish(make_code_task(), "", result, RewardConfig())
    assert score.reason == "runtime_error: small: ZeroDivisionError: division by zero"


def test_finish_wrong_answer_detail_shows_expected_and_got(make_code_task: Callable[..., Task]) -> None:
    failing = CaseResult(name="small", verdict=Verdict.WRONG_ANSWER, expected="3", got="4")
    score = VERIFIER.finish(
        make_code_task(), "", ExecutionResult(Verdict.WRONG_ANSWER, (failing,)), RewardConfig()
    )
    assert score.reason == "wrong_answer: small: expected 3, got 4"


def test_finish_compile_error_uses_the_syntax_penalty(make_code_task: Callable[..., Task]) -> None:
    result = ExecutionResult(verdict=Verdict.COMPILE_ERROR, compile_output="main.cpp:1: error: expected ';'")
    score = VERIFIER.finish(make_code_task(), "", result, RewardConfig(syntax_error_penalty=1.0))
    assert score.reward == -1.0 and score.reason == "compile_error: main.cpp:1: error: expected ';'"


def test_finish_sandbox_error_is_invalid_not_zero(make_code_task: Callable[..., Task]) -> None:
    result = ExecutionResult(verdict=Verdict.SANDBOX_ERROR, sandbox_error="worker died")
    score = VERIFIER.finish(make_code_task(), "", result, RewardConfig())
    assert (score.valid, score.reason, score.execution) == (False, "sandbox_error: worker died", result)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "all"}, "mode='all' is unknown"),
        ({"timeout_penalty": -1.0}, "is negative"),
        ({"no_code_penalty": float("nan")}, "finite number"),
    ],
)
def test_reward_config_validation(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RewardConfig(**kwargs)  # type: ignore[arg-type]


def test_score_validation() -> None:
    with pytest.raises(ValueError, match="finite"):
        Score(float("inf"), True, False, 0.0, "x")
    with pytest.raises(ValueError, match="pass_fraction"):
        Score(0.0, True, False, 1.5, "x")
    with pytest.raises(ValueError, match="reason is empty"):
        Score(0.0, True, False, 0.0, "")


def test_an_invalid_escape_is_not_a_syntax_error_under_warnings_as_errors(
    make_code_task: Callable[..., Task],
) -> None:
    """Regression: pytest runs with warnings as errors, which made compile() turn the DeprecationWarning of
    '\\d' in a normal string into a SyntaxError although the program runs fine."""
    completion = (
        '```python\nimport re\n\ndef add(a, b):\n    assert re.match("\\d", "1")\n    return a + b\n```'
    )
    assert isinstance(VERIFIER.prepare(make_code_task(), completion, RewardConfig()), ExecutionRequest)


def test_task_bugs_raise_with_the_field_to_fix(make_code_task: Callable[..., Task]) -> None:
    no_path = make_code_task(kind="repository", entry_point=None)
    with pytest.raises(ValueError, match="repository task without program_path; set CodeSpec.program_path"):
        VERIFIER.prepare(no_path, "x = 1", RewardConfig())
    from execrl.tasks.schema import MathSpec

    wrong_spec = dataclasses.replace(make_code_task(), spec=MathSpec("1"))
    with pytest.raises(TypeError, match="has domain 'code' but a MathSpec"):
        VERIFIER.prepare(wrong_spec, "x = 1", RewardConfig())
