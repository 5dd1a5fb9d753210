"""Every execution draws fresh random numbers from every generator its runtime preloaded.

Guards against issue 23's repeat: in ``python-data`` (numpy and pandas preloaded, and with them the
standard library's ``random``) ``random.random()`` and ``getrandbits`` returned the same values in every
execution of a sandbox's lifetime when the candidate ran inline (a single test): the worker is a raw
``clone`` of the zygote, which runs no at-fork hook, and only numpy's generator was reseeded. A test that
draws random inputs then drew the same ones every time, which a policy can memorise. Checked for both
Python runtimes (the plain one preloads no generator: a fresh ``import random`` seeds itself) and for
every shape a Python program runs in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from execrl.sandbox import CallTest, ExecutionRequest, IOTest, Sandbox, SandboxConfig, TestCase
from execrl.sandbox.langs.runtimes import get_runtime

DRAW = """
import json, random, sys

def draw():
    np = sys.modules.get("numpy")
    return [random.getrandbits(64), int(np.random.randint(0, 2**62)) if np is not None else None]
"""
SHAPES: dict[str, tuple[TestCase, ...]] = {
    "inline": (CallTest("one", "draw"),),  # one test: the candidate runs in pid 1 itself
    "group": (CallTest("one", "draw"), CallTest("two", "draw")),
    "io": (IOTest("one", "", "never"),),
    "plain": (),
}
EXECUTIONS = 4


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(SandboxConfig(workers=1)) as sb:  # consecutive executions, copies of one zygote
        yield sb


def _draw(sandbox: Sandbox, runtime: str, tests: tuple[TestCase, ...]) -> list[int | None]:
    """One execution's draws: a call test's wrong answer shows the value, an io test's its stdout."""
    program = DRAW if tests and isinstance(tests[0], CallTest) else DRAW + "print(json.dumps(draw()))\n"
    result = sandbox.run(ExecutionRequest(language="python", program=program, tests=tests, runtime=runtime))
    text = result.tests[0].got if tests else result.stdout
    assert text, result
    values: list[int | None] = json.loads(text)
    return values


@pytest.mark.parametrize("runtime", ["python", "python-data"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_each_execution_draws_new_numbers(sandbox: Sandbox, runtime: str, shape: str) -> None:
    problem = get_runtime(runtime).problem()
    if problem:
        pytest.skip(problem)
    draws = [_draw(sandbox, runtime, SHAPES[shape]) for _ in range(EXECUTIONS)]
    assert len({stdlib for stdlib, _ in draws}) == EXECUTIONS, draws
    if runtime == "python-data":
        assert len({numpy for _, numpy in draws}) == EXECUTIONS, draws
