"""Suite registry: register, duplicate and unknown names, splits, validation of what builders return."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from execrl.sandbox.types import IOTest
from execrl.tasks import (
    SuiteError,
    TaskValidationError,
    list_suites,
    load_suite,
    register_suite,
    suite_info,
    suite_names,
    unregister_suite,
)
from execrl.tasks.schema import CodeSpec, Task, TaskMetadata


def _echo(split: str, seed: int = 0) -> list[Task]:
    """Echo tasks for the registry tests."""
    count = 3 if split == "train" else 1
    return [
        Task(
            f"echo/{split}/{seed}/{i}",
            "code",
            "Echo stdin.",
            CodeSpec(kind="stdio"),
            TaskMetadata("echo", split=split),  # type: ignore[arg-type]
            hidden_tests=(IOTest("t", f"{i}\n", f"{i}\n"),),
        )
        for i in range(count)
    ]


@pytest.fixture
def echo_suite() -> Iterator[str]:
    register_suite("unit_echo", _echo, description="echo")
    yield "unit_echo"
    unregister_suite("unit_echo")


def test_register_and_load(echo_suite: str) -> None:
    assert [t.id for t in load_suite(echo_suite, "test", seed=4)] == ["echo/test/4/0"]
    assert len(load_suite(echo_suite)) == 3  # split defaults to train
    info = suite_info(echo_suite)
    assert (info.domains, info.counts, info.splits) == (("code",), {"train": 3, "test": 1}, ("train", "test"))
    assert echo_suite in suite_names()


def test_duplicate_name_raises(echo_suite: str) -> None:
    with pytest.raises(SuiteError, match="suite 'unit_echo' is already registered"):
        register_suite(echo_suite, _echo)
    with pytest.raises(SuiteError, match="already registered"):
        register_suite("humaneval", _echo)


def test_unknown_name_lists_known() -> None:
    with pytest.raises(SuiteError, match=r"unknown task suite 'nope'; known suites: .*humaneval"):
        load_suite("nope")
    with pytest.raises(SuiteError, match="unknown task suite"):
        unregister_suite("nope")


def test_bad_split_and_name() -> None:
    with pytest.raises(SuiteError, match="splits must be a non-empty subset"):
        register_suite("unit_bad", _echo, splits=("dev",))
    with pytest.raises(SuiteError, match="must be non-empty letters"):
        register_suite("bad name!", _echo)
    register_suite("unit_eval_only", _echo, splits=("test",))
    try:
        with pytest.raises(SuiteError, match="has no split 'train' \\(it is for evaluation only"):
            load_suite("unit_eval_only", "train")
    finally:
        unregister_suite("unit_eval_only")


def test_builder_output_is_validated() -> None:
    def broken(split: str, seed: int = 0) -> list[Task]:
        task = _echo(split)[0]
        return [task, Task(task.id, "code", "p", CodeSpec(kind="function"), TaskMetadata("x"))]

    register_suite("unit_broken", broken)
    try:
        with pytest.raises(TaskValidationError) as info:
            load_suite("unit_broken")
    finally:
        unregister_suite("unit_broken")
    assert [str(e) for e in info.value.errors] == [
        "unit_broken/train:echo/train/0/0: field 'spec.entry_point': missing (required for kind 'function')",
        "unit_broken/train:echo/train/0/0: field 'hidden_tests': empty: a code task needs at least one hidden test to be scored",
        "unit_broken/train: field 'id': duplicate id 'echo/train/0/0'",
    ]


def test_list_suites_includes_humaneval_as_eval_only() -> None:
    infos = {i.name: i for i in list_suites()}
    assert infos["humaneval"].counts == {"test": 164}
    assert infos["humaneval"].splits == ("test",)
    assert infos["humaneval"].domains == ("code",)
