"""SFT rows (``recipes/sft_data.py``): the held-out split and the step plan are pure functions of the rows
and the seed (what ``--resume`` relies on), every conversation is trained once per epoch."""

from __future__ import annotations

from collections import Counter

from execrl.recipes.sft_data import RowSet, StepPlan, split_heldout
from execrl.tools.render import RenderedConversation


def _rows(lengths: list[int]) -> RowSet:
    convs = tuple(
        RenderedConversation(tuple(range(n)), (False,) + (True,) * (n - 1), 1, 1, 0) for n in lengths
    )
    return RowSet(convs, tuple(f"f:{i + 1}" for i in range(len(lengths))), ())


def test_heldout_split_is_seeded_and_disjoint() -> None:
    rows = _rows([5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
    train, held = split_heldout(rows, 0.2, seed=3)
    again, held_again = split_heldout(rows, 0.2, seed=3)
    assert held.where == held_again.where and len(held.where) == 2
    assert set(train.where) | set(held.where) == set(rows.where) and not set(train.where) & set(held.where)
    assert split_heldout(rows, 0.0, seed=3)[1].conversations == ()
    assert len(split_heldout(_rows([5, 6]), 0.01, seed=0)[1].where) == 1  # at least one held out


def test_step_plan_visits_every_conversation_once_per_epoch_and_is_deterministic() -> None:
    rows = _rows([30, 20, 20, 15, 10, 10, 5, 40, 35, 25])
    plan = StepPlan.build(rows, tokens_per_row=50, rows_per_step=2, seed=7)
    epoch = [i for step in range(plan.steps_per_epoch) for b in plan.step_bins(step) for i in b]
    assert Counter(epoch) == Counter(range(10))
    again = StepPlan.build(rows, tokens_per_row=50, rows_per_step=2, seed=7)
    assert [again.step_bins(s) for s in range(6)] == [plan.step_bins(s) for s in range(6)]
    assert all(sum(len(rows.conversations[i].token_ids) for i in b) <= 50 for b in plan.bins)
    second = [
        i
        for step in range(plan.steps_per_epoch, 2 * plan.steps_per_epoch)
        for b in plan.step_bins(step)
        for i in b
    ]
    assert Counter(second) == Counter(range(10))
