"""execrl.trainer: advantages, losses, log-probs, the policy update step and checkpoints. No loop here.

Supervised fine-tuning (``execrl sft``) uses ``packing.py`` (padding-free rows of several conversations)
and ``sft.py`` (attention per conversation, the assistant tokens' cross-entropy, the clipped step).

How a recipe uses it (GRPO; PPO swaps the advantages for ``gae`` and passes a ``ValueHead``/``Critic``)::

    config = TrainerConfig(learning_rate=1e-6, kl_coef=0.0, loss_aggregation="token-mean")
    optimizer = build_optimizer(model, config)
    scheduler = build_scheduler(optimizer, config)
    ref_model = load_reference() if needs_reference(config) else None
    if (ckpt := latest_checkpoint(run_dir)) is not None:
        data_state = load_checkpoint(ckpt, model, optimizer, scheduler).data_state
    for step in ...:
        input_ids, attention_mask, response_mask = rollout(...)          # [N, S] each, N = prompts * G
        with torch.no_grad():
            old, _ = compute_logprobs(model, input_ids, attention_mask, token_mask=response_mask,
                                      temperature=config.logprob_temperature)
        advantages = compute_advantages(config.advantage_estimator, rewards, samples_per_prompt=G,
                                        valid=valid, eps=config.advantage_std_eps)           # [N]
        batch = TrainBatch(input_ids, attention_mask, response_mask, old, advantages, valid=valid)
        metrics = policy_update(model, optimizer, scheduler, batch, config, ref_model=ref_model)
        save_checkpoint(run_dir, step=step, model=model, optimizer=optimizer, scheduler=scheduler,
                        data_state={"next_step": step + 1, ...}, metrics=metrics)

Names resolve lazily (PEP 562), so ``from execrl.trainer import TrainerConfig`` does not import torch; the
torch-backed names import their module on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    # config (no torch)
    "TrainerConfig": "config",
    "needs_reference": "config",
    "learns_values": "config",
    "VALUE_ESTIMATORS": "config",
    "LOSS_AGGREGATIONS": "config",
    "KL_ESTIMATORS": "config",
    "LoraSettings": "config",
    # advantages
    "ADVANTAGE_ESTIMATORS": "advantages",
    "compute_advantages": "advantages",
    "grpo_advantages": "advantages",
    "dr_grpo_advantages": "advantages",
    "rloo_advantages": "advantages",
    "reinforce_pp_advantages": "advantages",
    "reinforce_pp_baseline_advantages": "advantages",
    "filter_zero_variance_groups": "advantages",
    "group_ids_from_size": "advantages",
    "broadcast_to_tokens": "advantages",
    "masked_whiten": "advantages",
    "gae": "advantages",
    # losses and KL
    "POLICY_LOSSES": "losses",
    "PolicyLossOutput": "losses",
    "LossNormaliser": "losses",
    "loss_normaliser": "losses",
    "aggregate_loss": "losses",
    "clipped_surrogate": "losses",
    "ppo_loss": "losses",
    "gspo_loss": "losses",
    "clipped_value_loss": "losses",
    "masked_mean": "losses",
    "kl_per_token": "kl",
    "kl_penalised_rewards": "kl",
    "token_level_rewards": "kl",
    # models
    "compute_logprobs": "logprobs",
    "forward_hidden": "logprobs",
    "ValueHead": "logprobs",
    "Critic": "logprobs",
    # update step
    "TrainBatch": "step",
    "PreparedBatch": "step",
    "policy_update": "step",
    "prepare_batch": "step",
    "accumulate_gradients": "step",
    "build_optimizer": "step",
    "build_scheduler": "step",
    "lr_factor": "step",
    # off-policy correction (async)
    "truncated_is_weights": "offpolicy",
    # checkpoints
    "CheckpointError": "errors",
    "CheckpointState": "checkpoint",
    "check_resumable": "checkpoint",
    "save_checkpoint": "checkpoint",
    "load_checkpoint": "checkpoint",
    "latest_checkpoint": "checkpoint",
    "list_checkpoints": "checkpoint",
    "checkpoint_path": "checkpoint",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'execrl.trainer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"execrl.trainer.{module_name}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
