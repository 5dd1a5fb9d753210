"""Sizes, ids, splits and determinism of the built-in suites (seed 0 unless said otherwise)."""

from __future__ import annotations

from collections import Counter

import pytest
from suite_checks import all_tasks, suite_tasks

from execrl.sandbox.types import CallTest, CodeTest, IOTest
from execrl.tasks.schema import CodeSpec, MathSpec, StructuredSpec
from execrl.tasks.suites import BUILTIN_SUITES

TRAIN_MINIMUMS = {
    "functions": 600,
    "stdio": 100,
    "repository": 50,
    "math": 300,
    "structured": 100,
    "tools": 100,
}


def test_builtin_suite_names():
    assert sorted(BUILTIN_SUITES) == [
        "functions", "functions-cpp", "functions-java", "functions-js", "math", "repository", "repository-long",
        "stdio", "structured", "tools",
    ]  # fmt: skip


@pytest.mark.parametrize("name", sorted(TRAIN_MINIMUMS))
def test_train_split_meets_minimum_and_test_split_is_about_a_fifth(name):
    train, test = suite_tasks(name, "train"), suite_tasks(name, "test")
    if name == "stdio":  # the minimum counts Python tasks; the C++ tasks come on top
        assert sum(t.spec.language == "python" for t in train) >= TRAIN_MINIMUMS[name]
    assert len(train) >= TRAIN_MINIMUMS[name]
    assert 0.12 * len(train) <= len(test) <= 0.3 * len(train)


@pytest.mark.parametrize("name", sorted(TRAIN_MINIMUMS))
def test_metadata_split_matches_the_split_asked_for(name):
    for split in ("train", "test"):
        assert {t.metadata.split for t in suite_tasks(name, split)} == {split}


def test_ids_are_unique_and_splits_are_disjoint():
    tasks = all_tasks()
    counts = Counter(t.id for t in tasks)
    assert [i for i, n in counts.items() if n > 1] == []
    for name in BUILTIN_SUITES:
        tasks = [t for s in ("train", "test") for t in suite_tasks(name, s)]
        assert tasks and all(t.id.startswith(f"{name}/") for t in tasks), name


def test_train_and_test_prompts_never_coincide():
    for name in BUILTIN_SUITES:
        train_prompts = {t.prompt for t in suite_tasks(name, "train")}
        assert train_prompts and suite_tasks(name, "test"), name
        assert not [t.id for t in suite_tasks(name, "test") if t.prompt in train_prompts]


@pytest.mark.parametrize("name", sorted(TRAIN_MINIMUMS))
def test_same_seed_same_tasks_other_seed_other_tasks(name):
    again = BUILTIN_SUITES[name]("train", 0)
    assert again == list(suite_tasks(name, "train", 0))
    other = suite_tasks(name, "train", 1)
    assert [t.id for t in other] != [t.id for t in again] or [t.prompt for t in other] != [
        t.prompt for t in again
    ]


def test_unknown_split_names_the_valid_ones():
    with pytest.raises(ValueError, match="train"):
        BUILTIN_SUITES["math"]("validation", 0)


def test_function_suite_shape():
    tasks = suite_tasks("functions", "train")
    assert len({t.metadata.family for t in tasks}) >= 12
    assert sum(t.metadata.difficulty == 1 for t in tasks) >= 0.2 * len(tasks)
    assert {t.metadata.difficulty for t in tasks} <= {1, 2, 3, 4, 5}
    for t in tasks:
        assert isinstance(t.spec, CodeSpec) and t.spec.kind == "function"
        assert t.spec.prompt_code.startswith(f"def {t.spec.entry_point}(")
        assert 1 <= len(t.visible_tests) <= 2 and 5 <= len(t.hidden_tests) <= 10
        assert all(isinstance(c, CallTest) and c.entry_point == t.spec.entry_point for c in t.hidden_tests)
        assert "```python" in t.prompt and t.reference_solution.startswith("```python\n")


def test_function_test_split_holds_out_parameterisations():
    train = {t.id.rsplit("/", 1)[0] + t.spec.prompt_code for t in suite_tasks("functions", "train")}
    assert not [
        t.id for t in suite_tasks("functions", "test") if t.id.rsplit("/", 1)[0] + t.spec.prompt_code in train
    ]


def test_stdio_suite_shape():
    tasks = suite_tasks("stdio", "train") + suite_tasks("stdio", "test")
    assert sum(t.spec.language == "cpp" for t in tasks) >= 10
    assert sum(t.hidden_tests[0].compare == "float" for t in tasks) >= 10
    for t in tasks:
        assert t.spec.kind == "stdio"
        assert 1 <= len(t.visible_tests) <= 2 and 5 <= len(t.hidden_tests) <= 10
        assert all(isinstance(c, IOTest) for c in t.visible_tests + t.hidden_tests)


def test_repository_suite_shape():
    tasks = suite_tasks("repository", "train") + suite_tasks("repository", "test")
    assert tasks
    for t in tasks:
        spec = t.spec
        assert spec.kind == "repository" and spec.program_path not in spec.files
        assert (
            2
            <= sum(not p.startswith("tests/") and not p.endswith("__init__.py") for p in spec.files) + 1
            <= 4
        )
        assert any(p.startswith("tests/test_") for p in spec.files)
        assert 5 <= len(t.hidden_tests) <= 10 and all(isinstance(c, CodeTest) for c in t.hidden_tests)
        assert {c.name for c in t.visible_tests} < {c.name for c in t.hidden_tests}
        assert f"`{spec.program_path}`" in t.prompt and spec.starter_code in t.prompt


def test_math_and_structured_shape():
    for t in suite_tasks("math", "train"):
        assert isinstance(t.spec, MathSpec) and t.reference_solution.endswith(
            f"The answer is {t.spec.answer}."
        )
    answers = [t.spec.answer for t in suite_tasks("math", "train")]
    assert (
        any("/" in a for a in answers) and any("," in a for a in answers) and any("." in a for a in answers)
    )
    structured = suite_tasks("structured", "train")
    assert structured
    for t in structured:
        assert (
            isinstance(t.spec, StructuredSpec) and t.spec.expected_values and t.spec.json_schema["required"]
        )
