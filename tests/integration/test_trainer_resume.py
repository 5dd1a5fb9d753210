"""A run killed with SIGKILL mid-step and resumed from its last checkpoint equals an uninterrupted run.

Guards against resume bugs (OpenRLHF #1103 data position lost, open-instruct PR #1523 replayed data, RNG
state not restored): after the resume, the parameters at step 6 must be bit-identical (``torch.equal``) to
those of a run that never stopped. CPU only, tiny random Llama; 15-40 s (three interpreter starts).

This file is also the training driver: ``python test_trainer_resume.py --run-dir D --steps 6`` runs a
self-contained GRPO loop (sample with ``torch.multinomial`` on the global torch RNG, reward = fraction of
tokens equal to TARGET, GRPO advantages, ``policy_update``, checkpoint every step), resuming from the latest
checkpoint in ``D`` if there is one. ``--pause-in-step N`` makes it stop after the update of step N, before
that step's checkpoint, write ``D/paused`` and sleep, so the test can kill it at a known point.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

VOCAB, TARGET, EOS = 24, 7, 0
PROMPTS_PER_STEP, SAMPLES_PER_PROMPT, PROMPT_TOKENS, MAX_NEW_TOKENS = 2, 4, 3, 6


def _build(seed: int):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    return LlamaForCausalLM(config)


def _rollout(model):
    """Sample responses (stop at EOS) for random prompts; returns (input_ids, attention_mask, response_mask)."""
    import torch

    prompts = torch.randint(1, VOCAB, (PROMPTS_PER_STEP, PROMPT_TOKENS)).repeat_interleave(
        SAMPLES_PER_PROMPT, 0
    )
    ids, attention = prompts, torch.ones_like(prompts)
    done = torch.zeros(ids.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for _ in range(MAX_NEW_TOKENS):
            logits = model(input_ids=ids, attention_mask=attention).logits[:, -1]  # [N, V]
            token = torch.multinomial(torch.softmax(logits, -1), 1).squeeze(-1)  # global torch RNG
            token = torch.where(done, torch.zeros_like(token), token)
            ids = torch.cat([ids, token[:, None]], 1)
            attention = torch.cat([attention, (~done).long()[:, None]], 1)
            done |= token == EOS
    response = attention.clone()
    response[:, :PROMPT_TOKENS] = 0
    return ids, attention, response


def run(run_dir: Path, steps: int, pause_in_step: int | None) -> None:
    import torch

    from execrl.trainer import (
        TrainBatch,
        TrainerConfig,
        build_optimizer,
        build_scheduler,
        compute_advantages,
        compute_logprobs,
        latest_checkpoint,
        load_checkpoint,
        needs_reference,
        policy_update,
        save_checkpoint,
    )  # fmt: skip

    torch.set_num_threads(1)
    config = TrainerConfig(
        learning_rate=2e-2, lr_schedule="cosine", warmup_steps=2, total_steps=steps, ppo_epochs=2,
        tokens_per_microbatch=40, kl_coef=0.01, clip_eps_high=0.28, seed=3,
    )  # fmt: skip
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    model = _build(config.seed)
    ref_model = _build(config.seed) if needs_reference(config) else None
    optimizer = build_optimizer(model, config)
    scheduler = build_scheduler(optimizer, config)
    next_step = 1
    latest = latest_checkpoint(run_dir)
    if latest is not None:
        next_step = load_checkpoint(latest, model, optimizer, scheduler).data_state["next_step"]
        print(f"resumed from {latest.name}", flush=True)
    for step in range(next_step, steps + 1):
        input_ids, attention, response = _rollout(model)
        rewards = ((input_ids == TARGET) & (response > 0)).sum(-1) / response.sum(-1).clamp(min=1)  # [N]
        advantages = compute_advantages(
            "grpo", rewards.double(), samples_per_prompt=SAMPLES_PER_PROMPT
        ).float()
        with torch.no_grad():
            old, _ = compute_logprobs(model, input_ids, attention, token_mask=response)
            ref, _ = compute_logprobs(ref_model, input_ids, attention, token_mask=response)
        batch = TrainBatch(input_ids, attention, response, old, advantages, ref_logprobs=ref)
        metrics = policy_update(model, optimizer, scheduler, batch, config, ref_model=ref_model)
        metrics["reward/mean"] = float(rewards.mean())
        if step == pause_in_step:
            (run_dir / "paused").write_text(str(step))
            time.sleep(120)  # the test SIGKILLs us here: after the update, before this step's checkpoint
        metrics.pop("perf/tokens_per_s")  # wall-clock, not reproducible
        save_checkpoint(run_dir, step=step, model=model, optimizer=optimizer, scheduler=scheduler,
                        data_state={"next_step": step + 1}, metrics=metrics, keep_last=2)  # fmt: skip
        print(json.dumps({"step": step, **metrics}), flush=True)


def _driver(run_dir: Path, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, __file__, "--run-dir", str(run_dir), "--steps", "6", *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out


@pytest.mark.slow
def test_sigkilled_run_resumes_to_identical_parameters(tmp_path):
    import torch
    from safetensors.torch import load_file

    straight_dir, killed_dir = tmp_path / "straight", tmp_path / "killed"
    straight_dir.mkdir()
    killed_dir.mkdir()
    straight = _driver(straight_dir)
    killed = _driver(killed_dir, "--pause-in-step", "4")
    deadline = time.monotonic() + 120
    while not (killed_dir / "paused").exists():
        assert killed.poll() is None, killed.communicate()[1]
        assert time.monotonic() < deadline, "driver never reached step 4"
        time.sleep(0.05)
    os.kill(killed.pid, signal.SIGKILL)
    killed.communicate(timeout=30)  # reap it and close its pipes
    assert killed.returncode == -signal.SIGKILL
    checkpoints = sorted(p.name for p in (killed_dir / "checkpoints").iterdir())
    assert checkpoints == ["step_000002", "step_000003"]  # step 4 was updated in memory but never saved

    resumed_out = _finish(_driver(killed_dir))
    straight_out = _finish(straight)
    assert resumed_out.splitlines()[0] == "resumed from step_000003"
    straight_final = load_file(straight_dir / "checkpoints" / "step_000006" / "model.safetensors")
    resumed_final = load_file(killed_dir / "checkpoints" / "step_000006" / "model.safetensors")
    assert straight_final.keys() == resumed_final.keys()
    for name, tensor in straight_final.items():
        assert torch.equal(tensor, resumed_final[name]), name
    initial = _build(3).state_dict()
    assert any(not torch.equal(initial[name], tensor) for name, tensor in straight_final.items())
    # the per-step metrics of steps 4-6 (rewards, losses, grad norms) also match exactly
    assert resumed_out.splitlines()[1:] == straight_out.splitlines()[3:]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--pause-in-step", type=int, default=None)
    arguments = parser.parse_args()
    run(arguments.run_dir, arguments.steps, arguments.pause_in_step)
