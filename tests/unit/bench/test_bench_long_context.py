"""``execrl bench long-context``'s pure parts: a prompt of exactly the asked length, the shared reward, the
goals read from the rows (the run itself is the benchmark, not a test)."""

from __future__ import annotations

import json
from pathlib import Path

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
    execrl_only = [{"prompt_tokens": 8192, "execrl": {"completed": True, "peak_rss_mb": 3_733.0}}]
    assert list(_goals(execrl_only).values()) == [None, None, True, None]  # not measured is not failed


def test_a_side_already_in_the_work_dir_is_reused_not_run(tmp_path: Path) -> None:
    """``--work-dir``: an interrupted benchmark goes on; a side with a result there is not spawned again
    (the job below names no model, so spawning it would fail)."""
    from execrl.bench.long_context import _spawn

    done = tmp_path / "trl_512.json"
    done.write_text(json.dumps({"step_times_s": [2.0, 1.0], "self_peak_rss_mb": 100.0}))
    out = _spawn({"out_path": str(done)}, timeout_s=1)
    assert out == {"completed": True, "step_times_s": [2.0, 1.0], "self_peak_rss_mb": 100.0,
                   "peak_rss_mb": 100.0, "wall_s": None, "reused": True}  # fmt: skip
    record = tmp_path / "execrl_512.result.json"
    record.write_text(json.dumps({"completed": False, "reason": "timed out after 1 s", "peak_rss_mb": 5.0}))
    assert (
        _spawn({"out_path": str(tmp_path / "execrl_512.json")}, timeout_s=1)["reason"]
        == "timed out after 1 s"
    )
