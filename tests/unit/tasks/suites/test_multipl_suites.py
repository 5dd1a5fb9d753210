"""The MultiPL-E-style suites (``functions-js``, ``functions-java``, ``functions-cpp``): translation
helpers with hand-written expected values, the tests carried over from the Python tasks, and a sample of
tasks checked through the real reward path (the full check is ``execrl tasks check functions-java``)."""

from __future__ import annotations

import pytest
from suite_checks import suite_tasks

from execrl.rewards import check_scorer
from execrl.sandbox.types import CallTest, IOTest
from execrl.tasks.check import check_tasks
from execrl.tasks.suites.multipl import camel, cpp_literal, declaration

SUITES = {"functions-js": "javascript", "functions-java": "java", "functions-cpp": "cpp"}


def test_names_and_declarations_per_language():
    assert camel("sum_list") == "sumList" and camel("clamp") == "clamp"
    assert declaration("javascript", "contains_value") == "function contains_value(nums, target)"
    assert declaration("java", "contains_value") == (
        "public static boolean containsValue(ArrayList<Long> nums, long target)"
    )
    assert declaration("cpp", "repeat_string") == "string repeat_string(string s, long long n)"


def test_cpp_literals():
    assert cpp_literal([1, -2], "list[int]", "t") == "vector<long long>{1LL, -2LL}"
    assert cpp_literal([], "list[int]", "t") == "vector<long long>{}"
    assert cpp_literal('a "b"', "str", "t") == 'string("a \\"b\\"")'
    assert cpp_literal(False, "bool", "t") == "false"
    with pytest.raises(ValueError, match="printable ASCII"):
        cpp_literal("caf\u00e9", "str", "t")
    with pytest.raises(ValueError, match="cannot write"):
        cpp_literal(True, "int", "t")  # a bool is not an int here


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_tasks_carry_the_python_tasks_tests(suite):
    for split in ("train", "test"):
        python = {t.id.split("/", 1)[1]: t for t in suite_tasks("functions", split)}
        tasks = suite_tasks(suite, split)
        assert tasks, (suite, split)
        for task in tasks:
            source = python[task.id.split("/", 1)[1]]
            assert task.spec.language == SUITES[suite] and task.metadata == source.metadata
            for mine, theirs in zip(task.hidden_tests, source.hidden_tests, strict=True):
                assert isinstance(theirs, CallTest) and mine.name == theirs.name
                if isinstance(mine, IOTest):  # C++: the expected value as compact JSON
                    assert mine.expected_stdout.rstrip("\n") == _compact_json(theirs.expected)
                else:
                    assert (mine.args, mine.expected) == (theirs.args, theirs.expected)


def _compact_json(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(_compact_json(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def test_sample_tasks_pass_with_their_reference_and_fail_with_their_wrong_answer():
    """Two templates per language (a list and a string result) through ``check_tasks``: 24 executions,
    a third of them Java compiles (``execrl tasks check functions-java`` checks every task)."""
    wanted = ("double_each", "reverse_string")
    sample = [
        t for suite in sorted(SUITES) for t in suite_tasks(suite, "train") if t.id.split("/")[1] in wanted
    ]
    assert len(sample) == 6
    report = check_tasks(sample, scorer=check_scorer)
    assert [(c.task_id, c.reference, c.wrong, c.visible, c.audit) for c in report.failures] == []
