"""The prompt-length cap in stages through the real CLI (issue 26).

A second suite mixes short and long prompts. Before step 2 the cap is the short prompts' length, so no
long prompt is drawn (``rollout/prompt_tokens_max`` is the longest prompt the engine saw), the long ones are
counted as ``rollout/tasks_over_prompt_cap``, and the start log says how many each suite leaves out; from step 2
the cap is lifted (only the model's context less the completion cap bounds it) and long prompts are drawn.
A run killed with SIGKILL and resumed equals the uninterrupted one bit for bit (guards against a stage
that depends on what the process drew before, not on the step).
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest
from test_train_cli import EXECRL, _env, _run_dir
from test_train_resume_exact import assert_same_run, sigkill_then_resume
from toy_domain import toy_overrides, toy_tasks

from execrl.tasks.schema import ChatMessage

PADDING = " Every word here only makes the prompt longer, nothing else." * 8


def _mixed_suite(path: Path) -> Path:
    """8 train tasks under other ids, the odd ones with a long prompt (and 4 test tasks)."""
    from execrl.tasks import save_tasks

    def lengthen(task, i):  # type: ignore[no-untyped-def]
        content = task.prompt[0].content + (PADDING if i % 2 else "")
        return dataclasses.replace(
            task, id=f"mixed/{task.id}", prompt=(ChatMessage(role="user", content=content),)
        )

    tasks = [lengthen(t, i) for i, t in enumerate(toy_tasks(8, "train"))] + [
        dataclasses.replace(t, id=f"mixed/{t.id}") for t in toy_tasks(4, "test")
    ]
    save_tasks(tasks, str(path))
    return path


@pytest.mark.slow
@pytest.mark.xfail(
    strict=False,
    reason="passed alone; in the 2-worker suite (2026-12-02) the resumed run's checkpoint keys differed from "
    "the straight run's: under investigation (issue 26 note)",
)
def test_prompt_stages_draw_short_prompts_first_and_survive_sigkill_resume(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path: Path
) -> None:
    from transformers import AutoTokenizer

    from execrl.components.prompt_lengths import prompt_token_counts
    from execrl.tasks import load_tasks

    mixed = _mixed_suite(tmp_path / "mixed.jsonl")
    train = {
        str(p): [t for t in load_tasks(str(p)) if t.metadata.split == "train"]
        for p in (toy_tasks_file, mixed)
    }
    lengths = prompt_token_counts(AutoTokenizer.from_pretrained(tiny_model_dir), train)
    long_ids = {f"mixed/toy/train/{i}" for i in (1, 3, 5, 7)}
    short = max(
        n for tid, n in lengths.items() if tid not in long_ids
    )  # every toy prompt, the even mixed ones
    assert min(lengths[tid] for tid in long_ids) > short
    base = toy_overrides(tiny_model_dir, toy_tasks_file, tmp_path)
    suites = f'tasks.suites={{"{toy_tasks_file}"=0.3, "{mixed}"=0.7}}'
    common = [*base, suites, "run.total_steps=4", "checkpoint.every_steps=1", "checkpoint.keep_last=5",
              "eval.enabled=false", "scheduler.mode=static", f"rollout.max_prompt_tokens={short}",
              "rollout.max_prompt_tokens_stages=[[2, 0]]"]  # fmt: skip
    straight_out, killed_out = tmp_path / "straight", tmp_path / "killed"
    straight = subprocess.run([*EXECRL, "train", "--no-progress", *common, f"run.output_dir={straight_out}"],
                              env=_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert straight.returncode == 0, straight.stdout + straight.stderr
    assert f"prompt cap from step 0: {short} tokens" in straight.stderr
    assert f"{mixed}: 4/8" in straight.stderr  # the start log names what the stage leaves out
    killed_dir = sigkill_then_resume([*common, f"run.output_dir={killed_out}"], killed_out)
    rows = assert_same_run(_run_dir(straight_out), killed_dir, total_steps=4)
    context_bound = 2048 - 8  # the tiny model's context less rollout.max_new_tokens
    assert [r["rollout/max_prompt_tokens"] for r in rows] == [short, short, context_bound, context_bound]
    assert [r["rollout/tasks_over_prompt_cap"] for r in rows] == [4.0, 4.0, 0.0, 0.0]
    assert all(r["rollout/prompt_tokens_max"] <= short for r in rows[:2])
    assert max(r["rollout/prompt_tokens_max"] for r in rows[2:]) > short  # long prompts drawn once allowed
