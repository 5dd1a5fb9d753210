"""Structured-output verifier: JSON extraction, schema validation with paths, expected values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from execrl.rewards import RewardConfig, extract_json, get_verifier
from execrl.tasks.schema import Task

PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name", "age"],
}
EXPECTED = {"name": "Ada", "address.city": "London", "tags.0": "math"}
GOOD = '{"name": "Ada", "age": 36, "address": {"city": "London"}, "tags": ["math", "code"]}'


def score(task: Task, completion: str, mode: str = "binary") -> Any:
    return get_verifier("structured").prepare(task, completion, RewardConfig(mode=mode))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "completion",
    [
        GOOD,
        f"Here you go:\n```json\n{GOOD}\n```\nDone.",
        f"```\n{GOOD}\n```",
        f"Sure! {GOOD} Hope this helps.<|im_end|>",
        f"```json\n{{broken\n```\nFixed: {GOOD}",
    ],
)
def test_valid_answer_in_any_wrapping_passes(
    make_structured_task: Callable[..., Task], completion: str
) -> None:
    result = score(make_structured_task(PERSON_SCHEMA, EXPECTED), completion)
    assert (result.reward, result.passed, result.reason) == (1.0, True, "passed")


def test_first_complete_object_is_taken() -> None:
    got = extract_json('text {"a": 1} and then {"a": 2}')
    assert got.found and got.value == {"a": 1}


def test_an_array_is_json_too() -> None:
    assert extract_json("values: [1, 2, 3].").value == [1, 2, 3]


def test_no_json_and_invalid_json_are_told_apart(make_structured_task: Callable[..., Task]) -> None:
    task = make_structured_task(PERSON_SCHEMA)
    assert score(task, "I cannot answer.").reason == "no_json_found"
    invalid = score(task, '{"name": "Ada", "age": }')
    assert invalid.reason_code == "invalid_json" and invalid.reward == 0.0 and invalid.valid


def test_nan_is_not_json(make_structured_task: Callable[..., Task]) -> None:
    assert score(make_structured_task({"type": "object"}), '{"x": NaN}').reason_code == "invalid_json"


def test_schema_violation_names_the_path(make_structured_task: Callable[..., Task]) -> None:
    result = score(make_structured_task(PERSON_SCHEMA), '{"name": "Ada", "age": 36, "address": {"city": 5}}')
    assert result.reason == "schema_mismatch: $.address.city: 5 is not of type 'string'"
    assert (result.reward, result.passed) == (0.0, False)


def test_missing_required_property(make_structured_task: Callable[..., Task]) -> None:
    result = score(make_structured_task(PERSON_SCHEMA), '{"name": "Ada"}')
    assert result.reason == "schema_mismatch: $: 'age' is a required property"


def test_wrong_value_binary_and_partial(make_structured_task: Callable[..., Task]) -> None:
    task = make_structured_task(PERSON_SCHEMA, EXPECTED)
    answer = '{"name": "Ada", "age": 36, "address": {"city": "Paris"}, "tags": ["math"]}'
    binary = score(task, answer)
    assert binary.reason == 'wrong_value: address.city: expected "London", got "Paris" (2/3 values match)'
    assert (binary.reward, binary.pass_fraction) == (0.0, pytest.approx(2 / 3))
    partial = score(task, answer, mode="partial")
    assert partial.reward == pytest.approx(2 / 3) and not partial.passed


def test_missing_expected_path(make_structured_task: Callable[..., Task]) -> None:
    result = score(make_structured_task(PERSON_SCHEMA, EXPECTED), '{"name": "Ada", "age": 1}')
    assert result.reason.startswith('wrong_value: address.city: expected "London", missing (1/3')


@pytest.mark.parametrize(
    ("expected", "got", "matches"),
    [
        (1, 1.0, True),
        (True, 1, False),
        (1, True, False),
        (None, None, True),
        ([1, 2], [1, 2], True),
        ("1", 1, False),
    ],
)
def test_json_equality(
    make_structured_task: Callable[..., Task], expected: Any, got: Any, matches: bool
) -> None:
    import json

    task = make_structured_task({"type": "object"}, {"v": expected})
    assert score(task, json.dumps({"v": got})).passed is matches


def test_a_broken_schema_is_a_task_bug(make_structured_task: Callable[..., Task]) -> None:
    from jsonschema.exceptions import SchemaError

    with pytest.raises(SchemaError):
        score(make_structured_task({"type": "no-such-type"}), "{}")
