"""Each execution is freed by reference counting alone, the moment its result is returned.

Regression (issue 14, class 1): the stop_on_first_failure judge closed over the ``Driver`` that held it,
and the inline relay pointed back at the driver that owned its group, so every execution's captured output
stayed alive until the cycle collector ran (52 MB -> 1.77 GB RSS over 28 sequential 60 MB requests).
With the collector disabled, nothing of a finished execution may survive.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from execrl.sandbox import Sandbox, api
from execrl.sandbox.types import CallTest, ExecutionRequest, IOTest

ADD = "def add(a, b):\n    return a + b\n"
REQUESTS = [
    ExecutionRequest(language="python", program="print('x' * 100000)"),  # plain run
    ExecutionRequest(  # one call test: runs inline (the parent relays the records)
        language="python",
        program=ADD,
        tests=(CallTest(name="a", entry_point="add", args=(1, 2), expected=3),),
    ),
    ExecutionRequest(  # the judge closure: stop at the first failure
        language="python",
        program=ADD,
        tests=(
            CallTest(name="a", entry_point="add", args=(1, 2), expected=4),
            CallTest(name="b", entry_point="add", args=(1, 2), expected=3),
        ),
        stop_on_first_failure=True,
    ),
    ExecutionRequest(  # io tests through the harness
        language="python",
        program="print(input())",
        tests=(IOTest(name="io", stdin="hi\n", expected_stdout="hi\n"),),
        stop_on_first_failure=True,
    ),
]


@pytest.fixture
def tracked(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[weakref.ref[Any]]]:
    refs: list[weakref.ref[Any]] = []

    class TrackedDriver(api.Driver):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            refs.append(weakref.ref(self))
            refs.append(weakref.ref(self.state))

    monkeypatch.setattr(api, "Driver", TrackedDriver)
    gc.collect()
    gc.disable()
    try:
        yield refs
    finally:
        gc.enable()


@pytest.mark.parametrize("request_", REQUESTS, ids=["plain", "inline_call", "stop_judge", "io_stop"])
def test_execution_is_freed_without_the_cycle_collector(
    sandbox: Sandbox, tracked: list[weakref.ref[Any]], request_: ExecutionRequest
) -> None:
    result = sandbox.run(request_)
    assert not result.is_sandbox_error, result.sandbox_error
    assert len(tracked) == 2
    assert [ref() is None for ref in tracked] == [True, True]  # driver and its RunState, by refcount
