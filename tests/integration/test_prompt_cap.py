"""The prompt-length cap in stages through the real CLI (issue 26).

A second suite mixes short and long prompts. Before step 2 the cap is the short prompts' length, so no
long prompt is drawn (``rollout/prompt_tokens_max`` is the longest prompt the engine saw), the long ones are
counted as ``rollout/tasks_over_prompt_cap``, and the start log says how many each suite leaves out; from step 2
the cap is lifted (only the model's context less the completion cap bounds it) and long prompts are drawn.
A run killed with SIGKILL and resumed equals the uninterrupted one bit for bit (guards against a stage
that depends on what the process drew before, not on the step), and so does a run resumed from each of
its checkpoints in turn, the ones on both sides of the stage boundary included: where a SIGKILL lands
depends on the machine's load, so the kill alone would test whichever checkpoint it happened to reach.
In this run step 3 draws one mixed task twice (its suite's epoch turns over mid-step), so 16 rows share one
context across both trainer threads' halves of the batch: the case whose gradient was not bit-reproducible
(the straight run differed from itself about one time in three) before the shared-prompt forward summed it
with ``index_select`` (``execrl.trainer.prefix``; ``tests/unit/trainer/test_prefix.py`` tests it directly).
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from dataclasses import dataclass
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


@dataclass(frozen=True)
class StagedRun:
    """The uninterrupted run of ``common`` (stderr kept for its start log) and the facts the tests check."""

    common: list[str]
    run_dir: Path
    stderr: str
    short: int  # the cap before step 2: the longest prompt of every toy task and the even mixed ones
    mixed: Path


@pytest.fixture(scope="module")
def staged_run(
    tiny_model_dir: Path, toy_tasks_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> StagedRun:
    from transformers import AutoTokenizer

    from execrl.components.prompt_lengths import prompt_token_counts
    from execrl.tasks import load_tasks

    tmp_path = tmp_path_factory.mktemp("prompt_cap")
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
    straight_out = tmp_path / "straight"
    straight = subprocess.run([*EXECRL, "train", "--no-progress", *common, f"run.output_dir={straight_out}"],
                              env=_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    assert straight.returncode == 0, straight.stdout + straight.stderr
    return StagedRun(common, _run_dir(straight_out), straight.stderr, short, mixed)


@pytest.mark.slow
def test_prompt_stages_draw_short_prompts_first_and_survive_sigkill_resume(
    staged_run: StagedRun, tmp_path: Path
) -> None:
    short = staged_run.short
    assert f"prompt cap from step 0: {short} tokens" in staged_run.stderr
    assert f"{staged_run.mixed}: 4/8" in staged_run.stderr  # the start log names what the stage leaves out
    killed_out = tmp_path / "killed"
    killed_dir = sigkill_then_resume([*staged_run.common, f"run.output_dir={killed_out}"], killed_out)
    rows = assert_same_run(staged_run.run_dir, killed_dir, total_steps=4)
    context_bound = 2048 - 8  # the tiny model's context less rollout.max_new_tokens
    assert [r["rollout/max_prompt_tokens"] for r in rows] == [short, short, context_bound, context_bound]
    assert [r["rollout/tasks_over_prompt_cap"] for r in rows] == [4.0, 4.0, 0.0, 0.0]
    assert all(r["rollout/prompt_tokens_max"] <= short for r in rows[:2])
    assert max(r["rollout/prompt_tokens_max"] for r in rows[2:]) > short  # long prompts drawn once allowed


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint_step", [0, 1, 2])  # 1: the last capped step, 2: the first uncapped
def test_prompt_stages_resume_bit_exact_from_each_checkpoint(
    staged_run: StagedRun, tmp_path: Path, checkpoint_step: int
) -> None:
    """The straight run's directory as a kill after step ``checkpoint_step + 1`` logged its metrics but
    before its checkpoint would leave it (the later checkpoints removed), continued with ``--resume``."""
    run_dir = tmp_path / staged_run.run_dir.name
    shutil.copytree(staged_run.run_dir, run_dir)
    for later in range(checkpoint_step + 1, 4):
        shutil.rmtree(run_dir / "checkpoints" / f"step_{later:06d}")
    resumed = subprocess.run([*EXECRL, "train", "--no-progress", "--resume", str(run_dir)], env=_env(),
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"at step {checkpoint_step + 1}" in resumed.stderr  # it resumed where it was meant to
    assert_same_run(staged_run.run_dir, run_dir, total_steps=4)
