"""The HumanEval suite: 164 eval-only tasks, visible tests from docstring examples, mutated wrong answers."""

from __future__ import annotations

import pytest

from execrl.sandbox.types import CodeTest
from execrl.tasks import SuiteError, load_suite
from execrl.tasks.examples import DocExample, function_params, parse_examples
from execrl.tasks.humaneval import INSTRUCTION, build, visible_coverage
from execrl.tasks.mutate import count_sites, mutant


@pytest.fixture(scope="module")
def tasks() -> dict[str, object]:
    return {t.id: t for t in load_suite("humaneval", "test")}


def test_has_164_test_tasks(tasks: dict[str, object]) -> None:
    assert len(tasks) == 164
    assert {t.metadata.split for t in tasks.values()} == {"test"}
    assert {t.domain for t in tasks.values()} == {"code"}


def test_train_split_is_refused_as_eval_only() -> None:
    with pytest.raises(SuiteError, match="evaluation only"):
        load_suite("humaneval", "train")
    with pytest.raises(SuiteError, match="HumanEval is for evaluation only"):
        build("train")


def test_task_0_fields(tasks: dict[str, object]) -> None:
    task = tasks["HumanEval/0"]
    assert task.spec.kind == "function" and task.spec.entry_point == "has_close_elements"
    assert (
        task.prompt.startswith(INSTRUCTION) and "def has_close_elements(numbers: List[float]" in task.prompt
    )
    assert task.spec.prompt_code in task.prompt
    assert task.visible_tests == (
        CodeTest(
            "example_0",
            "assert has_close_elements([1.0, 2.0, 3.0], 0.5) == False, 'has_close_elements([1.0, 2.0, 3.0], 0.5)'",
        ),
        CodeTest(
            "example_1",
            "assert has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3) == True, "
            "'has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)'",
        ),
    )
    (hidden,) = task.hidden_tests
    assert (
        hidden.code.rstrip().endswith("check(has_close_elements)") and "def check(candidate):" in hidden.code
    )
    assert task.reference_solution.startswith(
        "```python\nfrom typing import List"
    ) and task.reference_solution.endswith("```")
    assert task.wrong_solution != task.reference_solution and "if idx == idx2:" in task.wrong_solution


def test_other_example_styles(tasks: dict[str, object]) -> None:
    # "f(x) ➞ y" (HumanEval/72), "Input:/Output:" (68), "For lst = ... the output should be" (94)
    assert tasks["HumanEval/72"].visible_tests[0].code.startswith("assert will_it_fly([1, 2], 5) == False")
    assert tasks["HumanEval/68"].visible_tests[0].code.startswith("assert pluck([4,2,3]) == [2, 1]")
    assert (
        tasks["HumanEval/94"]
        .visible_tests[0]
        .code.startswith("assert skjkasdkd(lst = [0,3,2,1,3,5,7,4,5,5,5,2,181,32,4,32,3,2,32,324,4,3]) == 10")
    )


def test_known_wrong_docstring_examples_are_excluded(tasks: dict[str, object]) -> None:
    assert not any("median([-10, 4, 6, 1000, 10, 20])" in t.code for t in tasks["HumanEval/47"].visible_tests)
    assert tasks["HumanEval/116"].visible_tests == ()


def test_visible_coverage() -> None:
    assert visible_coverage() == (149, 164)


def test_parse_examples_styles() -> None:
    source = '''def f(a, b=0):
    """Sum.
    >>> f(1, 2)
    3
    >>> f(1) == 1
    f(2, 2) ➞ 4
    * f(0, 1) => true
    f(x) == 3
    f(1, 1) -> 1 + 1 = 2
    f(5, 5)   # returns 10
    Input: a = 3, b = 4
    Output: 7
    Input: c = 3
    Output: 7
    For a = 1, b = 0.5 the output should be 1.5
    """
'''
    assert parse_examples(source, "f") == [
        DocExample("f(1, 2)", 3),
        DocExample("f(1)", 1),
        DocExample("f(2, 2)", 4),
        DocExample("f(0, 1)", True),
        DocExample("f(5, 5)", 10),
        DocExample("f(a = 3, b = 4)", 7),
        DocExample("f(a = 1, b = 0.5)", 1.5),
    ]
    assert function_params(source, "f") == ("a", "b")


def test_float_examples_compare_with_tolerance() -> None:
    assert DocExample("g(1)", 0.5).assertion() == "assert abs(g(1) - 0.5) < 1e-6, 'g(1)'"
    assert DocExample("g(1)", [1]).assertion() == "assert g(1) == [1], 'g(1)'"


def test_mutant_changes_one_site_in_order() -> None:
    source = "def f(x):\n    '''doc 1'''\n    if x < 2:\n        return x + 1\n    return 0\n"
    assert count_sites(source, "f") == 5  # <, 2, +, 1, 0 (the docstring is not a site)
    assert "if x <= 2:" in mutant(source, "f", 0)
    assert "if x < 3:" in mutant(source, "f", 1)
    assert "return x - 1" in mutant(source, "f", 2)
    assert "return 1\n" in mutant(source, "f", 4)


def test_mutant_without_sites_returns_none() -> None:
    assert mutant("def g(s):\n    return h(s)\n", "g") == "def g(s):\n    return None\n"
    with pytest.raises(ValueError, match="no function 'nope'"):
        mutant("x = 1\n", "nope")
