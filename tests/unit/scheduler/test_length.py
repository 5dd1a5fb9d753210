"""The length curriculum (``execrl.scheduler.length``): stages, the automatic rise, its bound and state."""

from __future__ import annotations

import pytest

from execrl.scheduler.length import LengthCurriculum, LengthSettings, truncation_rate


def test_stages_pick_the_last_stage_at_or_before_the_step() -> None:
    c = LengthCurriculum(LengthSettings(max_new_tokens=64, max_new_tokens_stages=((2, 128), (5, 256))))
    assert [c.cap(s) for s in range(7)] == [64, 64, 128, 128, 128, 256, 256]
    c.observe(0, 1.0)  # no rise configured: nothing changes
    assert c.rises == [] and c.cap(0) == 64


def test_rise_after_k_steps_above_threshold_up_to_the_bound() -> None:
    settings = LengthSettings(
        max_new_tokens=64,
        length_rise_factor=2.0,
        length_rise_truncation=0.5,
        length_rise_window_steps=2,
        length_rise_max_tokens=200,
    )
    c = LengthCurriculum(settings)
    rates = [0.9, 0.4, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]
    caps = []
    for step, rate in enumerate(rates):
        caps.append(c.cap(step))
        c.observe(step, rate)
    # steps 2-3 above 0.5: from step 4 the cap is 128; steps 4-5: 200 (bound, not 256); then no more rises.
    assert caps == [64, 64, 64, 64, 128, 128, 200, 200]
    assert c.rises == [(4, 128), (6, 200)]
    assert c.cap(3) == 64  # a past step's cap is still what it sampled with


def test_state_round_trips() -> None:
    settings = LengthSettings(max_new_tokens=8, length_rise_factor=1.5, length_rise_max_tokens=64)
    a = LengthCurriculum(settings)
    for step in range(4):
        a.observe(step, 1.0)
    b = LengthCurriculum(settings)
    b.load_state_dict(a.state_dict())
    assert (
        (b.rises, b.streak) == (a.rises, a.streak) == ([(3, 12)], 1)
    )  # rise after steps 0-2; step 3 starts a new streak


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"max_new_tokens_stages": ((3, 8), (3, 16))}, "strictly increase"),
        ({"max_new_tokens_stages": ((0, 0),)}, "max_new_tokens >= 1"),
        ({"length_rise_factor": 2.0}, "length_rise_max_tokens"),
        ({"length_rise_factor": 0.5}, ">= 1"),
    ],
)
def test_bad_settings_name_the_knob(kwargs: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        LengthSettings(max_new_tokens=16, **kwargs)


def test_truncation_rate() -> None:
    assert truncation_rate(["length", "stop", "length", "eos"]) == 0.5
    assert truncation_rate([]) == 0.0
