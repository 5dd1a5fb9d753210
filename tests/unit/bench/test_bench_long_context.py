"""``execrl bench long-context``'s pure parts: a prompt of exactly the asked length, the shared reward, the
goals read from the rows (the run itself is the benchmark, not a test)."""

from __future__ import annotations

from execrl.bench.long_context import _goals, long_prompt, synthetic_reward
from execrl.rollout.models import default_tokenizer
from execrl.rollout.prompts import encode_prompts


def test_prompt_has_exactly_the_asked_number_of_tokens() -> None:
    tokenizer = default_tokenizer()
    for length in (300, 1024):
        assert len(encode_prompts(tokenizer, [long_prompt(tokenizer, length)])[0]) == length


def test_synthetic_reward_counts_distinct_characters() -> None:
    assert synthetic_reward(["aab", "", "abc d"]) == [0.02, 0.0, 0.05]


def test_goals_from_rows() -> None:
    rows = [
        {"prompt_tokens": 512, "speedup_vs_trl": 2.5, "loss_check": {"checks": [{"ok": True}]}},
        {"prompt_tokens": 4096, "speedup_vs_trl": 2.1, "peak_rss_ratio_vs_trl": 0.4},
        {
            "prompt_tokens": 8192,
            "execrl": {"completed": True, "peak_rss_mb": 19_000.0},
            "trl": {"completed": False},
        },
    ]
    goals = _goals(rows)
    assert list(goals.values()) == [True, True, True, True]
    rows[1]["speedup_vs_trl"] = 1.9
    assert _goals(rows)["step_speedup_ge_2x_where_trl_completes"] is False
