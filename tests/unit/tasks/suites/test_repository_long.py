"""The ``repository-long`` suite (issue 26): the repository tasks with whole-repository prompts of 2k-8k
tokens, every existing test of the repository in the reward, an audit split that cannot hide the wrong
answer's failure."""

from __future__ import annotations

import ast

import pytest
from suite_checks import repository_runs

from execrl.rollout.models import default_tokenizer
from execrl.tasks.suites import BUILTIN_SUITES
from execrl.tasks.suites._common import SPLITS, split_pool
from execrl.tasks.suites.repository import _pool
from execrl.tasks.suites.repository_long import _dependents, _names


@pytest.fixture(scope="module")
def suites() -> dict[str, tuple[list, list]]:
    return {s: (BUILTIN_SUITES["repository"](s, 0), BUILTIN_SUITES["repository-long"](s, 0)) for s in SPLITS}


def test_same_tasks_and_split_as_repository_with_long_prompts(suites) -> None:
    tokenizer = default_tokenizer()
    for short, long in suites.values():
        assert [t.id.split("/", 1)[1] for t in short] == [t.id.split("/", 1)[1] for t in long]
        for s, t in zip(short, long, strict=True):
            assert (t.reference_solution, t.wrong_solution, t.visible_tests) == (
                s.reference_solution,
                s.wrong_solution,
                s.visible_tests,
            )
            assert set(s.spec.files) < set(t.spec.files)  # the project plus companion packages
        tokens = [len(tokenizer(t.prompt).input_ids) for t in long]
        assert min(tokens) >= 1_800 and max(tokens) <= 7_800, (min(tokens), max(tokens))


def test_reward_keeps_every_test_of_the_repository_and_audit_is_disjoint(suites) -> None:
    for _, long in suites.values():
        for t in long:
            hidden, audit = {x.name for x in t.hidden_tests}, {x.name for x in t.audit_tests}
            assert not hidden & audit and not audit & {x.name for x in t.visible_tests}
            files = {**t.spec.files, t.spec.program_path: ""}
            every = {f"{p}::{n.name}" for p, text in files.items() if p.startswith("tests/") and text
                     for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}  # fmt: skip
            assert hidden | audit == every
    with_audit = sum(bool(t.audit_tests) for _, long in suites.values() for t in long)
    assert with_audit >= 40  # 33 of 57 train and 10 of 12 test tasks at seed 0


def test_audit_tests_never_call_the_target_or_its_callers(suites) -> None:
    """Guards the split's one promise: an audit test that reached the target would be able to hold the
    only test that catches the wrong answer, and the reward would then pass it."""
    for split, (_, long) in suites.items():
        targets = [target for _, (_, target, _, _) in split_pool(_pool(), 0, split, "repository")]
        for t, target in zip(long, targets, strict=True):
            assert target.own_tests[0] in {x.name for x in t.visible_tests}
            touched = _dependents(
                {**t.spec.files, target.module: _code(t.reference_solution)}, target.function
            )
            assert target.function in touched
            assert all(not _names(ast.parse(a.code)) & touched for a in t.audit_tests), t.id


def _code(fenced: str) -> str:
    return fenced.strip().removeprefix("```python").removesuffix("```")


@pytest.mark.slow
@pytest.mark.parametrize("split", SPLITS)
def test_references_pass_and_wrong_answers_fail_the_reward(suites, split) -> None:
    _, long = suites[split]
    runs = repository_runs([(t, [(t.reference_solution, False), (t.wrong_solution, False)]) for t in long])
    bad = [t.id for t, (ref, wrong) in zip(long, runs, strict=True) if not all(ref) or all(wrong)]
    assert bad == []
